package markers

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// Group commit.
//
// Every write (Create, Update, Put) is a change handed to one committer
// goroutine. The committer takes the first waiting change, then every change
// already waiting (at most maxGroup; it never waits for more), applies them
// in arrival order inside one Badger transaction and commits it once, with
// SyncWrites: one WAL fsync for the whole group. With a mirror log, the
// script markers the group writes are appended to it as one frame and
// fsynced just before that commit (mirror.go): two fsyncs per group, not
// per change. Each writer is answered
// only after that commit returned, so "durable when the call returns" holds
// exactly as with one transaction per write; a failed commit fails every
// change of the group.
//
// Changes of one key in one group see each other (a Badger update
// transaction reads its own pending writes), so a Create then an Update of
// the same ID in one group behave as two transactions in that order. A
// change whose own check fails (fn returned an error, the marker does not
// exist, or it exists already) writes nothing and does not disturb the
// others. A group too large for one transaction (ErrTxnTooBig) is committed
// up to the change that did not fit, and the rest goes into the next
// transaction. All writes go through the committer, so transactions of this
// process do not conflict; ErrConflict is still retried, as a whole group.

type changeKind int

const (
	kindCreate changeKind = iota + 1
	kindUpdate
	kindPut
)

// change is one write waiting for a group commit, and its outcome.
type change struct {
	kind   changeKind
	key    []byte
	id     string                          // kindUpdate: the execution ID
	marker *hostagentv1.Marker             // kindCreate, kindPut
	fn     func(*hostagentv1.Marker) error // kindUpdate

	out     *hostagentv1.Marker
	created bool
	enc     []byte // what the change wrote (nil: nothing)
	err     error
	done    chan struct{}
}

var scriptPrefix = []byte(Scripts)

// submit hands c to the committer and waits for its outcome.
func (s *Store) submit(c *change) error {
	c.done = make(chan struct{})
	select {
	case s.reqs <- c:
	case <-s.quit:
		return fmt.Errorf("%w: write after close", ErrClosed)
	}
	<-c.done
	return c.err
}

func (s *Store) commitLoop() {
	defer close(s.committed)
	group := make([]*change, 0, maxGroup)
	for {
		select {
		case <-s.quit:
			return
		case c := <-s.reqs:
			group = append(group[:0], c)
		}
	gather:
		for len(group) < maxGroup {
			select {
			case c := <-s.reqs:
				group = append(group, c)
			default:
				break gather
			}
		}
		for len(group) > 0 {
			n := s.commitGroup(group)
			for _, c := range group[:n] {
				close(c.done)
			}
			group = group[n:]
		}
		s.maybeCompact()
	}
}

// maybeCompact rewrites the mirror log from the store once it has grown
// past its threshold. A failure leaves the old log in use (it is still
// correct, only long) and waits for it to double before trying again.
func (s *Store) maybeCompact() {
	ml := s.mirror
	if ml == nil || ml.size <= ml.compactAt {
		return
	}
	before := ml.size
	if err := ml.compact(s.db); err != nil {
		ml.compactAt = 2 * ml.size
		s.log.Error("compacting the mirror log failed; it keeps growing until the next try", "error", err, "size_bytes", ml.size)
		return
	}
	s.log.Debug("mirror log compacted", "from_bytes", before, "to_bytes", ml.size)
}

// encodeKeys lists the keys of group's script changes, each preceded by
// its length as a uvarint.
func encodeKeys(group []*change) []byte {
	var b []byte
	for _, c := range group {
		if bytes.HasPrefix(c.key, scriptPrefix) {
			b = appendRecord(b, c.key)
		}
	}
	return b
}

// mirrored returns what the changes group[:n] wrote to script markers,
// and their keys.
func mirrored(group []*change) (keys, encoded [][]byte) {
	for _, c := range group {
		if c.err == nil && c.enc != nil && bytes.HasPrefix(c.key, scriptPrefix) {
			keys = append(keys, c.key)
			encoded = append(encoded, c.enc)
		}
	}
	return keys, encoded
}

// pendingKey holds, in each group's transaction, the keys of the script
// markers the group may write (see mirror.go: the log's fsync runs beside
// the commit, so Open corrects these keys too).
var pendingKey = []byte("mirror/pending")

// commitGroup applies a prefix of group in one transaction, commits it and
// sets every outcome of that prefix. It returns the length of the prefix
// (at least 1).
//
// With a mirror log, the group's frame is written and fsynced by a second
// goroutine while Badger commits (and fsyncs its WAL); the writers are
// answered when both are durable. Whichever of the two a crash cuts off,
// Open finds it: the log's last frame, or the keys in pendingKey.
func (s *Store) commitGroup(group []*change) int {
	if s.mirror != nil && s.mirror.broken != nil {
		// After a failed fsync of the log nothing more is committed: the
		// store would move on without its copy. A restart repairs the
		// log's end from the store.
		for _, c := range group {
			c.out, c.created, c.err = nil, false, s.mirror.broken
		}
		return len(group)
	}
	for range maxAttempts {
		n := 0
		var (
			logged  [][]byte   // keys of the changes sent to the mirror log
			mirrorc chan error // the log write's outcome
		)
		err := s.db.Update(func(txn *badger.Txn) error {
			if s.mirror != nil {
				if err := txn.Set(pendingKey, encodeKeys(group)); err != nil {
					return fmt.Errorf("markers: set %s: %w", pendingKey, err)
				}
			}
			for _, c := range group {
				err := apply(txn, c)
				if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
					break // this change goes into the next transaction
				}
				// Any other error concerns c alone: it wrote nothing.
				c.err = err
				n++
			}
			if s.mirror == nil {
				return nil
			}
			keys, encoded := mirrored(group[:n])
			if len(encoded) == 0 {
				return nil
			}
			logged, mirrorc = keys, make(chan error, 1)
			go func() { mirrorc <- s.mirror.write(encoded) }()
			return nil
		})
		var merr error
		if mirrorc != nil {
			merr = <-mirrorc
		}
		switch {
		case err != nil && merr == nil && len(logged) > 0:
			// Logged, not committed: the log must say what the store says.
			if cerr := s.mirror.correct(s.db, logged, nil); cerr != nil {
				s.log.Error("correcting the mirror log after a failed commit failed", "error", cerr)
			}
		case err == nil && merr != nil:
			// Committed, not logged: log the store's markers again; if
			// that fails too, the changes are refused (the store keeps
			// them: a status query shows them, unmirrored).
			if cerr := s.mirror.correct(s.db, logged, nil); cerr != nil {
				s.log.Error("mirror log write failed after the store committed; these markers are in the store but not in its mirror", "error", cerr)
				err = cerr
			}
		}
		if errors.Is(err, badger.ErrConflict) {
			continue
		}
		for _, c := range group[:n] {
			if err != nil {
				c.err = mapClosed(err)
			}
			if c.err != nil {
				c.out, c.created = nil, false
			}
		}
		return n
	}
	group[0].out, group[0].created, group[0].err = nil, false, ErrContention
	return 1
}

// apply performs c inside txn. An error means c wrote nothing.
func apply(txn *badger.Txn, c *change) error {
	c.out, c.created, c.enc, c.err = nil, false, nil, nil
	switch c.kind {
	case kindCreate:
		// Read first: Badger detects conflicts only on keys a txn read.
		got, err := getTxn(txn, c.key)
		if err == nil {
			c.out = got
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		enc, err := setTxn(txn, c.key, c.marker)
		if err != nil {
			return err
		}
		c.out, c.created, c.enc = proto.Clone(c.marker).(*hostagentv1.Marker), true, enc
		return nil
	case kindUpdate:
		m, err := getTxn(txn, c.key)
		if err != nil {
			return err
		}
		if err := c.fn(m); err != nil {
			return err
		}
		m.ExecutionId = c.id
		enc, err := setTxn(txn, c.key, m)
		if err != nil {
			return err
		}
		c.out, c.enc = m, enc
		return nil
	case kindPut:
		enc, err := setTxn(txn, c.key, c.marker)
		c.enc = enc
		return err
	}
	return fmt.Errorf("markers: unknown change kind %d", c.kind)
}
