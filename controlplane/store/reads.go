package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Execution returns the committed execution with the id, or ErrNotFound.
//
// While a start-up gate is open (startupgate.go), an execution in a state
// the start-up check covers is checked against its journal first, unless it
// was cleared already.
func (s *Store) Execution(id string) (*recordv1.Execution, error) {
	x, err := s.execution(id)
	if err != nil {
		return x, err
	}
	if g := s.gate.Load(); g != nil {
		if err := g.admitRead(id, x); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// execution reads a record without the start-up gate (listings, and the
// checks themselves).
func (s *Store) execution(id string) (*recordv1.Execution, error) {
	return decodeExecution(s.kv.lend(execKey(id)))
}

// Filter selects executions for List. Zero fields match everything.
type Filter struct {
	Actor string
	Tool  string
	State recordv1.State
	// Limit caps the answer (required, > 0).
	Limit int
	// OldestFirst lists oldest first instead of newest first.
	OldestFirst bool
	// After is a cursor: the ID of the last execution of the previous page.
	// The listing continues past it in the listing's order, so a long
	// listing is read page by page, each page costing its own size only.
	After string
}

// List returns executions newest first (OldestFirst: oldest first). Order
// is by execution ID, which is a ULID and so sorts by acceptance time. It
// walks the narrowest index the filter allows (state, then actor, then all
// executions).
func (s *Store) List(f Filter) ([]*recordv1.Execution, error) {
	if f.Limit <= 0 {
		return nil, errors.New("store: List needs a positive limit")
	}
	var prefix []byte
	idOf := func(key []byte) string { return string(key[len(prefix):]) }
	switch {
	case f.State != recordv1.State_STATE_UNSPECIFIED:
		prefix = []byte("s/" + strconv.Itoa(int(f.State)) + "/")
	case f.Actor != "":
		prefix = []byte("a/" + f.Actor + "\x00")
	default:
		prefix = []byte("x/")
	}
	var out []*recordv1.Execution
	var scanErr error
	var start []byte
	if f.After != "" {
		start = append(bytes.Clone(prefix), f.After...)
	}
	err := s.kv.ScanFrom(prefix, start, !f.OldestFirst, func(key, value []byte) bool {
		if start != nil && bytes.Equal(key, start) {
			return true // the cursor itself was on the previous page
		}
		var x *recordv1.Execution
		var err error
		if bytes.HasPrefix(prefix, []byte("x/")) {
			x, err = decodeExecution(value, nil)
		} else {
			x, err = s.execution(idOf(key))
		}
		if errors.Is(err, ErrNotFound) {
			return true // index raced with nothing: indexes and records commit together
		}
		if err != nil {
			scanErr = err
			return false
		}
		if (f.Actor != "" && x.GetActor() != f.Actor) || (f.Tool != "" && x.GetTool() != f.Tool) ||
			(f.State != recordv1.State_STATE_UNSPECIFIED && x.GetState() != f.State) {
			return true
		}
		out = append(out, x)
		return len(out) < f.Limit
	})
	if err == nil {
		err = scanErr
	}
	return out, err
}

// JournalEntry returns the raw leaf data of journal entry i.
func (s *Store) JournalEntry(i int64) ([]byte, error) {
	v, err := s.kv.Get(journalKey(i))
	if err != nil {
		return nil, err
	}
	_, data, ok := decodeLeaf(v)
	if !ok {
		return nil, fmt.Errorf("store: journal record %d is malformed: the data dir is damaged", i)
	}
	return data, nil
}

// StoredHash returns a stored tlog hash; ok is false when it is absent or
// its record is malformed.
func (s *Store) StoredHash(index int64) (tlog.Hash, bool, error) {
	return readStoredHash(s.kv.lend, index)
}

// Checkpoints returns every stored signed checkpoint, oldest first.
func (s *Store) Checkpoints() ([][]byte, error) {
	var out [][]byte
	err := s.kv.Scan([]byte("c/"), false, func(_, v []byte) bool {
		out = append(out, v)
		return true
	})
	return out, err
}

// ScanJournal calls fn for each journal leaf in index order, as stored: the
// index is the one in the key, data is the leaf bytes. Offline audit uses it
// to see a journal exactly as it lies on disk, gaps and all.
func (s *Store) ScanJournal(fn func(keyIndex int64, data []byte) bool) error {
	var perr error
	err := s.kv.Scan([]byte("j/"), false, func(k, v []byte) bool {
		i, err := strconv.ParseInt(string(k[2:]), 16, 64)
		if err != nil {
			perr = fmt.Errorf("store: journal key %q is malformed", k)
			return false
		}
		if _, data, ok := decodeLeaf(v); ok {
			v = data
		} // else: hand over the damaged record whole; its hash will not match
		return fn(i, v)
	})
	if err == nil {
		err = perr
	}
	return err
}

// History returns the journal records of one execution, oldest first.
func (s *Store) History(id string) ([]*recordv1.JournalEntry, error) {
	idx, err := s.kv.Get(historyKey(id))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(idx)%8 != 0 {
		return nil, fmt.Errorf("store: history of %s is %d bytes, not a list of indexes: the data dir is damaged", id, len(idx))
	}
	out := make([]*recordv1.JournalEntry, 0, len(idx)/8)
	for ; len(idx) > 0; idx = idx[8:] {
		i := int64(binary.BigEndian.Uint64(idx))
		data, err := s.JournalEntry(i)
		if err != nil {
			return nil, fmt.Errorf("store: journal entry %d: %w", i, err)
		}
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(data, e); err != nil {
			return nil, fmt.Errorf("store: decode journal entry %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// SessionExecutions returns the executions an agent session created, oldest
// first.
func (s *Store) SessionExecutions(sessionID string) ([]*recordv1.Execution, error) {
	prefix := sessionExecKey(sessionID, "")
	var out []*recordv1.Execution
	var rerr error
	err := s.kv.Scan(prefix, false, func(k, _ []byte) bool {
		x, err := s.execution(string(k[len(prefix):]))
		if errors.Is(err, ErrNotFound) {
			return true // index raced with nothing: indexes and records commit together
		}
		if err != nil {
			rerr = err
			return false
		}
		out = append(out, x)
		return true
	})
	if err == nil {
		err = rerr
	}
	return out, err
}

// Session returns a committed session, or ErrNotFound.
func (s *Store) Session(id string) (*recordv1.Session, error) {
	return decodeSession(s.kv.Get(sessionKey(id)))
}

// Sessions returns up to limit sessions, most recently seen first.
func (s *Store) Sessions(limit int) ([]*recordv1.Session, error) {
	out, err := scanDecoded(s.kv, "S/", decodeSession)
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetLastSeenAt().AsTime().After(out[j].GetLastSeenAt().AsTime())
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// scanDecoded decodes every value under prefix, in key order; the first
// value that does not decode ends the scan with its error.
func scanDecoded[T any](kv KV, prefix string, decode func([]byte, error) (T, error)) ([]T, error) {
	var out []T
	var derr error
	err := kv.Scan([]byte(prefix), false, func(_, v []byte) bool {
		x, err := decode(v, nil)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, x)
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}
