package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Errors of the state check (see "State is a function of the journal" in
// doc.go). Both are matched by *StateError.
var (
	// ErrStateMismatch: an execution record, the history or fingerprint
	// index, or a stored result disagrees with the journal.
	ErrStateMismatch = errors.New("store: state disagrees with the journal")
	// ErrResultIntegrity: the execution record agrees with the journal but
	// its stored result does not hash to what the journal committed.
	ErrResultIntegrity = errors.New("store: result_integrity: the stored result does not hash to its journal record")
)

// VerifyCommand is what an operator runs to see every disagreement.
const VerifyCommand = "latch audit verify DATA_DIR"

// MismatchKind names what disagrees with the journal.
type MismatchKind string

const (
	// MismatchRecord: the execution record (x/) differs from the execution
	// snapshot of its last journal record.
	MismatchRecord MismatchKind = "record"
	// MismatchMissing: the journal holds an execution whose record is gone.
	MismatchMissing MismatchKind = "missing_record"
	// MismatchUnjournaled: a record, result or index entry that no journal
	// record accounts for.
	MismatchUnjournaled MismatchKind = "unjournaled"
	// MismatchHistory: the history index (e/) does not list the journal
	// records of the execution.
	MismatchHistory MismatchKind = "history"
	// MismatchResult: the stored result (r/) does not hash to the hash the
	// journal committed, or is missing.
	MismatchResult MismatchKind = "result_integrity"
	// MismatchIndex: a fingerprint index entry (f/) points at an execution
	// that does not exist or has another fingerprint.
	MismatchIndex MismatchKind = "fingerprint_index"
)

// Mismatch is one disagreement between the stored state and the journal.
type Mismatch struct {
	ExecutionID string
	// JournalIndex is the journal record the state was compared with, or -1
	// when there is none.
	JournalIndex int64
	// Key is the store key that disagrees (x/<id>, r/<id>, f/<fp>, e/<id>).
	Key    string
	Kind   MismatchKind
	Detail string
}

func (m Mismatch) String() string {
	id := m.ExecutionID
	if id == "" {
		id = "(no execution)"
	}
	at := "no journal record"
	if m.JournalIndex >= 0 {
		at = "journal record " + strconv.FormatInt(m.JournalIndex, 10)
	}
	return fmt.Sprintf("%s (%s): %s %s: %s", id, at, m.Key, m.Kind, m.Detail)
}

// StateError carries the mismatches that made a read or a start-up refuse.
type StateError struct {
	Mismatches []Mismatch
}

func (e *StateError) Error() string {
	var b strings.Builder
	if e.resultOnly() {
		b.WriteString(ErrResultIntegrity.Error())
	} else {
		b.WriteString(ErrStateMismatch.Error())
	}
	for i, m := range e.Mismatches {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Mismatches)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(m.String())
	}
	b.WriteString("; run `" + VerifyCommand + "` on the stopped data dir to see every mismatch")
	return b.String()
}

// Is matches ErrResultIntegrity when every mismatch is about the result
// alone, ErrStateMismatch always.
func (e *StateError) Is(target error) bool {
	return target == ErrStateMismatch || (target == ErrResultIntegrity && e.resultOnly())
}

func (e *StateError) resultOnly() bool {
	for _, m := range e.Mismatches {
		if m.Kind != MismatchResult {
			return false
		}
	}
	return len(e.Mismatches) > 0
}

func stateErr(ms []Mismatch) error {
	if len(ms) == 0 {
		return nil
	}
	return &StateError{Mismatches: ms}
}

// ResultSum is the hash the journal commits for a stored result: SHA-256 of
// its bytes exactly as stored under r/<id> (the deterministic protobuf
// encoding PutResult writes).
func ResultSum(stored []byte) []byte {
	s := sha256.Sum256(stored)
	return s[:]
}

// ResultRef names a result by its hash.
func ResultRef(sum []byte) string { return "sha256:" + hex.EncodeToString(sum) }

// getter reads a key as some view sees it (the KV, or an update's Tx).
type getter func([]byte) ([]byte, error)

// entryAt reads and decodes journal record i.
func entryAt(get getter, i int64) (*recordv1.JournalEntry, error) {
	v, err := get(journalKey(i))
	if err != nil {
		return nil, err
	}
	_, data, ok := decodeLeaf(v)
	if !ok {
		return nil, fmt.Errorf("journal record %d is malformed", i)
	}
	e := &recordv1.JournalEntry{}
	if err := proto.Unmarshal(data, e); err != nil {
		return nil, fmt.Errorf("journal record %d does not decode: %v", i, err)
	}
	if e.GetIndex() != uint64(i) {
		return nil, fmt.Errorf("journal record under key %d says it is record %d", i, e.GetIndex())
	}
	return e, nil
}

// changesRecord reports whether a journal record of an execution is one its
// record must equal: every record that carries the execution except
// "attach", which reports the execution as it was without changing it.
func changesRecord(e *recordv1.JournalEntry) bool {
	return e.GetExecution() != nil && lifecycle.EntryKindOf(e) != recordv1.EntryKind_ENTRY_KIND_ATTACH
}

// expectedRecord is the execution record the journal records of one
// execution imply: the snapshot of the last record that changed it, with
// the fields fixed at acceptance (carried by the accepted record only, see
// engine appendJournaled) taken from the accepted record, and journal_index
// set to the last record's own index (its snapshot holds the previous one:
// the index is known only once the record is appended). It is last's own
// snapshot, changed in place: last is a record just decoded for this
// comparison (entryAt), which nothing else holds.
func expectedRecord(accepted, last *recordv1.JournalEntry) *recordv1.Execution {
	want := last.GetExecution()
	if want == nil {
		want = &recordv1.Execution{}
	}
	if want.GetState() != recordv1.State_STATE_ACCEPTED && accepted != nil {
		a := accepted.GetExecution()
		want.CanonicalIntent, want.Arguments, want.Evidence = a.GetCanonicalIntent(), a.GetArguments(), a.GetEvidence()
	}
	want.JournalIndex = last.GetIndex()
	return want
}

// checkAgainst compares one execution's record and result with the journal
// records listed in hist (its history index, oldest first). It also returns
// the stored result's bytes when it read them and they hash right.
func checkAgainst(get getter, id string, x *recordv1.Execution, stored []byte, hist []int64) (out []Mismatch, result []byte) {
	add := func(idx int64, key string, kind MismatchKind, format string, args ...any) {
		out = append(out, Mismatch{ExecutionID: id, JournalIndex: idx, Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	if len(hist) == 0 {
		add(-1, "x/"+id, MismatchUnjournaled, "no journal record of this execution exists; the record was not written by this control plane")
		return out, nil
	}
	// The newest record vouches for the current record: a record that
	// changed it (normalised, see expectedRecord), or an attach, which
	// carries the whole record as it was answered from (nothing changes a
	// record without a newer journal record). One decode, however many
	// times the execution was attached to.
	newest := hist[len(hist)-1]
	last, err := entryAt(get, newest)
	switch {
	case err != nil:
		add(newest, "j/"+strconv.FormatInt(newest, 10), MismatchHistory, "%v", err)
		return out, nil
	case last.GetExecutionId() != id || last.GetExecution().GetId() != id:
		add(newest, "e/"+id, MismatchHistory, "the history index lists journal record %d, which belongs to %q", newest, last.GetExecutionId())
		return out, nil
	}
	var want *recordv1.Execution
	if changesRecord(last) {
		var accepted *recordv1.JournalEntry
		if last.GetExecution().GetState() != recordv1.State_STATE_ACCEPTED {
			e, err := entryAt(get, hist[0])
			switch {
			case err != nil:
				add(hist[0], "e/"+id, MismatchHistory, "%v", err)
				return out, nil
			case e.GetExecutionId() != id || e.GetExecution().GetState() != recordv1.State_STATE_ACCEPTED:
				add(hist[0], "e/"+id, MismatchHistory, "the first journal record the history index lists is not this execution's accepted record")
				return out, nil
			}
			accepted = e
		}
		want = expectedRecord(accepted, last)
	} else {
		want = last.GetExecution()
	}
	idx := newest
	if x == nil {
		add(idx, "x/"+id, MismatchMissing, "the journal records this execution (last as %s) but its record is gone", lifecycle.Name(want.GetState()))
		return out, nil
	}
	if !sameRecord(x, stored, want) {
		add(idx, "x/"+id, MismatchRecord, "differs from the journal in %s", diffFields(want, x))
	}
	r, err := get(resultKey(id))
	switch {
	case errors.Is(err, ErrNotFound):
		if len(want.GetResultSha256()) > 0 {
			add(idx, "r/"+id, MismatchResult, "the journal commits result %s but no result is stored", ResultRef(want.GetResultSha256()))
		}
	case err != nil:
		add(idx, "r/"+id, MismatchResult, "cannot read the stored result: %v", err)
	case len(want.GetResultSha256()) == 0:
		add(idx, "r/"+id, MismatchResult, "a result is stored but no journal record commits one")
	case !bytes.Equal(ResultSum(r), want.GetResultSha256()):
		add(idx, "r/"+id, MismatchResult, "the stored result hashes to %s, the journal commits %s", ResultRef(ResultSum(r)), ResultRef(want.GetResultSha256()))
	default:
		result = r
	}
	return out, result
}

// sameRecord reports whether x, decoded from stored (nil when the caller
// has not the bytes), equals want. The bytes decide first: the store
// writes a record with proto.Marshal, and an Execution (no map fields)
// encodes one way, so a record equal to the journal's snapshot has its
// encoding; that costs a fifth of proto.Equal, which decides whenever the
// bytes differ (records written by older builds may differ in bytes alone,
// see statewire.go).
func sameRecord(x *recordv1.Execution, stored []byte, want *recordv1.Execution) bool {
	if stored != nil {
		if b, err := proto.Marshal(want); err == nil && bytes.Equal(b, stored) {
			return true
		}
	}
	return proto.Equal(x, want)
}

// diffFields names the top-level fields in which got differs from want,
// with both values for scalar fields, never secrets (records hold none).
func diffFields(want, got *recordv1.Execution) string {
	w, g := want.ProtoReflect(), got.ProtoReflect()
	var parts []string
	fields := w.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		wv, gv := w.Get(f), g.Get(f)
		if w.Has(f) == g.Has(f) && valueEqual(f, wv, gv) {
			continue
		}
		switch {
		case f.Kind() == protoreflect.EnumKind && f.Enum().FullName() == "latch.record.v1.State":
			parts = append(parts, fmt.Sprintf("state (journal %s, record %s)", lifecycle.Name(recordv1.State(wv.Enum())), lifecycle.Name(recordv1.State(gv.Enum()))))
		case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.BytesKind:
			parts = append(parts, string(f.Name()))
		default:
			parts = append(parts, fmt.Sprintf("%s (journal %v, record %v)", f.Name(), wv.Interface(), gv.Interface()))
		}
	}
	if len(parts) == 0 {
		return "unknown fields"
	}
	return strings.Join(parts, ", ")
}

func valueEqual(f protoreflect.FieldDescriptor, a, b protoreflect.Value) bool {
	switch f.Kind() {
	case protoreflect.MessageKind:
		return proto.Equal(a.Message().Interface(), b.Message().Interface())
	case protoreflect.BytesKind:
		return bytes.Equal(a.Bytes(), b.Bytes())
	}
	return a.Interface() == b.Interface()
}

// historyOf reads an execution's history index as a list of journal indexes.
func historyOf(get getter, id string) ([]int64, error) {
	v, err := get(historyKey(id))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(v)%8 != 0 {
		return nil, fmt.Errorf("history index of %s is %d bytes, not a list of 8-byte indexes", id, len(v))
	}
	out := make([]int64, 0, len(v)/8)
	for ; len(v) > 0; v = v[8:] {
		out = append(out, int64(binary.BigEndian.Uint64(v)))
	}
	return out, nil
}

// checkOne checks one execution (x nil: its record is missing) through its
// history index.
func checkOne(get getter, id string, x *recordv1.Execution) ([]Mismatch, []byte) {
	return checkStored(get, id, x, nil)
}

// checkStored is checkOne given the bytes x was decoded from (sameRecord).
func checkStored(get getter, id string, x *recordv1.Execution, stored []byte) ([]Mismatch, []byte) {
	hist, err := historyOf(get, id)
	if err != nil {
		return []Mismatch{{ExecutionID: id, JournalIndex: -1, Key: "e/" + id, Kind: MismatchHistory, Detail: err.Error()}}, nil
	}
	return checkAgainst(get, id, x, stored, hist)
}

// Check verifies one execution as this update sees it: its record against
// its journal records, and its stored result against the committed hash. It
// returns a *StateError, or nil. Attach uses it before answering from a
// prior execution.
func (t *Tx) Check(x *recordv1.Execution) error {
	ms, _ := checkOne(t.get, x.GetId(), x)
	return stateErr(ms)
}

// Verified returns a committed execution and its stored result (nil when it
// has none), both checked against the journal: this is the one read through
// which results reach anyone. A result whose bytes do not hash to its
// journal record is never returned: the error is a *StateError matching
// ErrResultIntegrity (the record is sound, the result is not) or
// ErrStateMismatch (the record itself disagrees); x is returned with it
// when the record was read.
func (s *Store) Verified(id string) (*recordv1.Execution, *recordv1.Result, error) {
	x, ms, data, err := s.checkCommitted(id)
	if err != nil {
		return nil, nil, err
	}
	if err := stateErr(ms); err != nil {
		return x, nil, err
	}
	if len(x.GetResultSha256()) == 0 {
		return x, nil, nil
	}
	// checkOne compared the bytes it read (data) with the hash the journal
	// committed; x equals the journal's record, so that is x's hash too.
	r := &recordv1.Result{}
	if err := proto.Unmarshal(data, r); err != nil {
		return x, nil, fmt.Errorf("store: decode result of %s: %w", id, err)
	}
	return x, r, nil
}

// checkCommitted checks one committed execution. The fast path reads
// outside the writer, where the record, history index and result are
// separate reads that a commit can land between (a record read before a
// transition, its history after). So a disagreement is confirmed inside the
// writer, whose view is one consistent state (a read-only update: no
// commit, no sync), and only a confirmed one is reported.
func (s *Store) checkCommitted(id string) (*recordv1.Execution, []Mismatch, []byte, error) {
	stored, err := s.kv.lend(execKey(id))
	x, err := decodeExecution(stored, err)
	if err != nil {
		return nil, nil, nil, err
	}
	ms, data := checkStored(s.kv.lend, id, x, stored) // data is only decoded (Verified)
	if len(ms) == 0 {
		return x, nil, data, nil
	}
	var cx *recordv1.Execution
	var cms []Mismatch
	var cdata []byte
	uerr := s.Update(context.Background(), func(tx *Tx) error {
		v, err := tx.get(execKey(id))
		if err != nil {
			return err
		}
		if cx, err = decodeExecution(v, nil); err != nil {
			return err
		}
		cms, cdata = checkOne(tx.get, id, cx)
		return nil
	})
	switch {
	case uerr == nil:
		return cx, cms, cdata, nil
	case errors.Is(uerr, ErrClosed):
		return x, ms, data, nil // no writer to ask: report what was read
	}
	return nil, nil, nil, uerr
}

// Result returns the stored result of an execution through Verified (so it
// is checked against the journal too), or ErrNotFound when it has none.
func (s *Store) Result(id string) (*recordv1.Result, error) {
	_, r, err := s.Verified(id)
	if err == nil && r == nil {
		return nil, ErrNotFound
	}
	return r, err
}
