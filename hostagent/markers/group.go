package markers

import (
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
// SyncWrites: one WAL fsync for the whole group. Each writer is answered
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
	err     error
	done    chan struct{}
}

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
	}
}

// commitGroup applies a prefix of group in one transaction, commits it and
// sets every outcome of that prefix. It returns the length of the prefix
// (at least 1).
func (s *Store) commitGroup(group []*change) int {
	for range maxAttempts {
		n := 0
		err := s.db.Update(func(txn *badger.Txn) error {
			for _, c := range group {
				err := apply(txn, c)
				if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
					return nil // this change goes into the next transaction
				}
				// Any other error concerns c alone: it wrote nothing.
				c.err = err
				n++
			}
			return nil
		})
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
	c.out, c.created, c.err = nil, false, nil
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
		if err := setTxn(txn, c.key, c.marker); err != nil {
			return err
		}
		c.out, c.created = proto.Clone(c.marker).(*hostagentv1.Marker), true
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
		if err := setTxn(txn, c.key, m); err != nil {
			return err
		}
		c.out = m
		return nil
	case kindPut:
		return setTxn(txn, c.key, c.marker)
	}
	return fmt.Errorf("markers: unknown change kind %d", c.kind)
}
