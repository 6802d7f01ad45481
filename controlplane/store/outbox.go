package store

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The event outbox (controlplane/events drains it):
//
//	ob/<event id>   OutboxEvent (protobuf): the event and each sink's delivery state
//	oq/<event id>   "" while a delivery of the event is still to be tried (the queue)
//	od/<event id>   "" while a delivery of it is dead-lettered (the dead-letter list)
//	ou/<exec id>    the id of the execution's timed outcome_unknown event (written once)
//
// An event caused by a journal record is written by Append itself, in the
// same commit as that record, when an EventSource is set: a transition is
// never committed without its event, and a crash between the two cannot
// happen. Outbox rows are not compared with the journal by the state
// check: they decide nothing an execution's fate depends on (a receiver
// acts on the console or the CLI, which read the journaled state), like
// the list indexes.

// EventSource derives the outbox event a journal record causes, or nil.
// It runs on the writer goroutine inside the commit: it must not block or
// call the store (controlplane/events.Source implements it).
type EventSource func(e *recordv1.JournalEntry) *recordv1.OutboxEvent

// SetEventSource makes Append write the events src derives. Set it before
// the first Update.
func (s *Store) SetEventSource(src EventSource) { s.events = src }

// EventsC receives (without blocking the writer) after a commit that
// wrote an outbox event: the drainer wakes on it.
func (s *Store) EventsC() <-chan struct{} { return s.eventsC }

func eventKey(id string) []byte      { return []byte("ob/" + id) }
func eventQueueKey(id string) []byte { return []byte("oq/" + id) }
func eventDeadKey(id string) []byte  { return []byte("od/" + id) }
func eventOnceKey(id string) []byte  { return []byte("ou/" + id) }

// outbox writes the event e causes (Append).
func (t *Tx) outbox(e *recordv1.JournalEntry) error {
	if t.b.events == nil {
		return nil
	}
	ev := t.b.events(e)
	if ev == nil {
		return nil
	}
	return t.PutEvent(ev)
}

// PutEvent stores ev and files it in the queue while a delivery is to be
// tried (none recorded yet, or one neither delivered nor dead), in the
// dead-letter list while one is dead.
func (t *Tx) PutEvent(ev *recordv1.OutboxEvent) error {
	data, err := proto.Marshal(ev)
	if err != nil {
		return fmt.Errorf("store: encode event: %w", err)
	}
	id := ev.GetId()
	t.set(eventKey(id), data)
	pending, dead := EventPending(ev), false
	for _, d := range ev.GetDeliveries() {
		dead = dead || d.GetDead()
	}
	if pending {
		t.set(eventQueueKey(id), nil)
	} else {
		t.del(eventQueueKey(id))
	}
	if dead {
		t.set(eventDeadKey(id), nil)
	} else {
		t.del(eventDeadKey(id))
	}
	t.b.wroteEvent = true
	return nil
}

// EventPending reports whether a delivery of ev is still to be tried: a
// sink has neither delivered it nor given up. An event carries one
// delivery per sink that takes it from the moment it is written.
func EventPending(ev *recordv1.OutboxEvent) bool {
	for _, d := range ev.GetDeliveries() {
		if d.GetDeliveredAt() == nil && !d.GetDead() {
			return true
		}
	}
	return false
}

// Event returns the event as this update sees it, or ErrNotFound.
func (t *Tx) Event(id string) (*recordv1.OutboxEvent, error) {
	return decodeEvent(t.get(eventKey(id)))
}

// PutEventOnce stores ev unless the event of key (an execution ID) was
// written before; it reports whether it wrote it.
func (t *Tx) PutEventOnce(key string, ev *recordv1.OutboxEvent) (bool, error) {
	if _, err := t.get(eventOnceKey(key)); err == nil {
		return false, nil
	} else if !errors.Is(err, ErrNotFound) {
		return false, err
	}
	t.set(eventOnceKey(key), []byte(ev.GetId()))
	return true, t.PutEvent(ev)
}

// Event returns the committed event id, or ErrNotFound.
func (s *Store) Event(id string) (*recordv1.OutboxEvent, error) {
	return decodeEvent(s.kv.Get(eventKey(id)))
}

// DeleteEvent removes the event id and its queue and dead-letter rows
// (the outcome_unknown once-row stays: the event is never made again).
func (t *Tx) DeleteEvent(id string) {
	t.del(eventKey(id))
	t.del(eventQueueKey(id))
	t.del(eventDeadKey(id))
}

// EventFilter selects events (Events).
type EventFilter struct {
	// Pending: the queue only; Dead: the dead-letter list only.
	Pending, Dead bool
	// Limit bounds the answer (0: 100).
	Limit int
	// Oldest lists oldest first (the drainer); else newest first.
	Oldest bool
	// After, with Oldest, starts the list after this event ID (paging).
	After string
}

// Events lists committed events.
func (s *Store) Events(f EventFilter) ([]*recordv1.OutboxEvent, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	prefix := []byte("ob/")
	switch {
	case f.Pending:
		prefix = []byte("oq/")
	case f.Dead:
		prefix = []byte("od/")
	}
	var out []*recordv1.OutboxEvent
	var derr error
	scan := func(fn func(k, v []byte) bool) error { return s.kv.Scan(prefix, !f.Oldest, fn) }
	if f.Oldest && f.After != "" {
		// The smallest key after After: After itself followed by a zero byte.
		start := append(append(bytes.Clone(prefix), f.After...), 0)
		scan = func(fn func(k, v []byte) bool) error { return s.kv.ScanFrom(prefix, start, false, fn) }
	}
	err := scan(func(k, v []byte) bool {
		if !bytes.Equal(prefix, []byte("ob/")) {
			var err error
			v, err = s.kv.Get(eventKey(string(k[3:])))
			if errors.Is(err, ErrNotFound) {
				return true // the row and its index commit together
			}
			if err != nil {
				derr = err
				return false
			}
		}
		ev, err := decodeEvent(v, nil)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, ev)
		return len(out) < f.Limit
	})
	if err == nil {
		err = derr
	}
	return out, err
}

func decodeEvent(data []byte, err error) (*recordv1.OutboxEvent, error) {
	if err != nil {
		return nil, err
	}
	ev := &recordv1.OutboxEvent{}
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("store: decode event: %w", err)
	}
	return ev, nil
}
