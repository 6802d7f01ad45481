package store

import (
	"strconv"
	"time"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Transition is one journaled state change of an execution, reported after
// the commit that made it durable (for metrics and the settled-execution log
// line). Its fields are copies: nothing in it is shared with the writer.
type Transition struct {
	ExecutionID string
	Tool        string
	Actor       string
	// Kind is the journal record's kind (transition, recovery, approval, …).
	Kind     recordv1.EntryKind
	From, To recordv1.State
	Outcome  recordv1.Outcome
	// AcceptedAt and At are the execution's acceptance and this record's
	// time, as journaled.
	AcceptedAt, At time.Time
}

// Group is what one group commit made durable.
type Group struct {
	// Updates is the number of Update functions that shared the commit.
	Updates int
	// Transitions are the state changes it journaled, in journal order.
	Transitions []Transition
}

// OnGroup registers fn to be called on the writer goroutine after each
// group commit that wrote something, so it must be quick and must not block
// (count, enqueue). Set it before the first Update.
func (s *Store) OnGroup(fn func(Group)) { s.onGroup = fn }

// transitionOf is what Append keeps of a journal record for OnGroup: state
// changes only (attach and recovery records leave the state as it is).
func transitionOf(e *recordv1.JournalEntry) (Transition, bool) {
	if e.GetFrom() == e.GetTo() || e.GetExecutionId() == "" {
		return Transition{}, false
	}
	x := e.GetExecution()
	return Transition{
		ExecutionID: e.GetExecutionId(), Tool: x.GetTool(), Actor: x.GetActor(), Kind: lifecycle.EntryKindOf(e),
		From: e.GetFrom(), To: e.GetTo(), Outcome: x.GetOutcome(),
		AcceptedAt: x.GetAcceptedAt().AsTime(), At: e.GetTime().AsTime(),
	}, true
}

// CountByState counts committed executions per state by walking the state
// index (keys only). The metrics take it once at start and then follow
// OnGroup's transitions.
func (s *Store) CountByState() (map[recordv1.State]int64, error) {
	out := map[recordv1.State]int64{}
	for v := range recordv1.State_name {
		st := recordv1.State(v)
		if st == recordv1.State_STATE_UNSPECIFIED {
			continue
		}
		var n int64
		err := s.kv.Scan([]byte("s/"+strconv.Itoa(int(st))+"/"), false, func(_, _ []byte) bool { n++; return true })
		if err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, nil
}

// Oldest returns the committed execution of state st that was accepted
// first (execution IDs are ULIDs, so the state index is in acceptance
// order), or ErrNotFound when none is in that state.
func (s *Store) Oldest(st recordv1.State) (*recordv1.Execution, error) {
	var id string
	err := s.kv.Scan([]byte("s/"+strconv.Itoa(int(st))+"/"), false, func(k, _ []byte) bool {
		id = string(k[len("s/"+strconv.Itoa(int(st))+"/"):])
		return false
	})
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, ErrNotFound
	}
	return s.execution(id)
}

// Closed reports whether Close was called.
func (s *Store) Closed() bool {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	return s.closed
}
