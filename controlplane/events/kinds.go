// Package events tells people when something needs them: it derives
// events from journal records (approval requested, session awaiting
// authorization, needs_review, outcome resolved, per-tool completed) and
// from time (outcome_unknown longer than a bound), keeps them in the
// store's durable outbox (written in the same commit as the record that
// caused them, store/outbox.go), and delivers them at least once to the
// operator's sinks: HTTPS webhooks signed per the Standard Webhooks
// scheme, in Latch's JSON or a Slack incoming-webhook payload, through the
// one egress client, retried with internal/backoff, dead-lettered after a
// bound. The event ID is the webhook-id: a receiver that keeps the IDs it
// has seen acts once per event, whatever is re-sent after a crash.
//
// Only the control plane imports it (the server wires it; the admin API
// lists and replays through it).
package events

import (
	"fmt"
	"time"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Kind names as sinks subscribe to them and payloads carry them.
var kindNames = map[recordv1.EventKind]string{
	recordv1.EventKind_EVENT_KIND_APPROVAL_REQUESTED:             "approval_requested",
	recordv1.EventKind_EVENT_KIND_SESSION_AWAITING_AUTHORIZATION: "session_awaiting_authorization",
	recordv1.EventKind_EVENT_KIND_OUTCOME_UNKNOWN:                "outcome_unknown",
	recordv1.EventKind_EVENT_KIND_NEEDS_REVIEW:                   "needs_review",
	recordv1.EventKind_EVENT_KIND_OUTCOME_RESOLVED:               "outcome_resolved",
	recordv1.EventKind_EVENT_KIND_COMPLETED:                      "completed",
}

// KindName is the wire name of k ("approval_requested").
func KindName(k recordv1.EventKind) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return "unknown"
}

// ParseKind is the kind named n.
func ParseKind(n string) (recordv1.EventKind, error) {
	for k, name := range kindNames {
		if name == n {
			return k, nil
		}
	}
	return 0, fmt.Errorf("events: unknown event kind %q (one of approval_requested, session_awaiting_authorization, outcome_unknown, needs_review, outcome_resolved, completed)", n)
}

// EventID is the ID of the event the journal record at index causes.
func EventID(index uint64) string { return fmt.Sprintf("evt_%016x", index) }

// UnknownEventID is the ID of an execution's timed outcome_unknown event.
func UnknownEventID(executionID string) string { return "evt_u_" + executionID }

// Source returns the store's EventSource: completed tells whether a
// tool's contract opts in to `completed` events (nil: none does). An event
// is written with one delivery per sink that takes its kind, and not at
// all when none does. It runs inside the store's commit, so completed
// must not block (the engine's Catalog is an atomic load).
func Source(completed func(tool string) bool, sinks []Sink) store.EventSource {
	return func(e *recordv1.JournalEntry) *recordv1.OutboxEvent {
		return addressed(Classify(e, completed), sinks)
	}
}

// addressed gives ev a delivery for each sink that takes its kind; it is
// nil when none does (or ev is nil).
func addressed(ev *recordv1.OutboxEvent, sinks []Sink) *recordv1.OutboxEvent {
	if ev == nil {
		return nil
	}
	for _, s := range sinks {
		if s.Takes(ev.GetKind()) {
			ev.Deliveries = append(ev.Deliveries, &recordv1.EventDelivery{Sink: s.Name})
		}
	}
	if len(ev.Deliveries) == 0 {
		return nil
	}
	return ev
}

// Classify is the event the journal record e causes, or nil.
func Classify(e *recordv1.JournalEntry, completed func(tool string) bool) *recordv1.OutboxEvent {
	kind := lifecycle.EntryKindOf(e)
	if kind == recordv1.EntryKind_ENTRY_KIND_SESSION_STARTED {
		ss := e.GetSession()
		if ss.GetState() != recordv1.SessionState_SESSION_STATE_PENDING {
			return nil
		}
		return &recordv1.OutboxEvent{Id: EventID(e.GetIndex()), Kind: recordv1.EventKind_EVENT_KIND_SESSION_AWAITING_AUTHORIZATION,
			Time: e.GetTime(), JournalIndex: e.GetIndex(), SessionId: ss.GetId(), Actor: ss.GetActor(), Reason: ss.GetReason()}
	}
	x := e.GetExecution()
	if x == nil || e.GetFrom() == e.GetTo() || kind == recordv1.EntryKind_ENTRY_KIND_ATTACH {
		return nil
	}
	var k recordv1.EventKind
	switch to, from := e.GetTo(), e.GetFrom(); {
	case to == recordv1.State_STATE_AWAITING_APPROVAL:
		k = recordv1.EventKind_EVENT_KIND_APPROVAL_REQUESTED
	case to == recordv1.State_STATE_NEEDS_REVIEW:
		k = recordv1.EventKind_EVENT_KIND_NEEDS_REVIEW
	case (from == recordv1.State_STATE_OUTCOME_UNKNOWN || from == recordv1.State_STATE_NEEDS_REVIEW) &&
		(to == recordv1.State_STATE_COMPLETED || to == recordv1.State_STATE_NOT_EXECUTED):
		k = recordv1.EventKind_EVENT_KIND_OUTCOME_RESOLVED
	case to == recordv1.State_STATE_COMPLETED && completed != nil && completed(x.GetTool()):
		k = recordv1.EventKind_EVENT_KIND_COMPLETED
	default:
		return nil
	}
	ev := executionEvent(EventID(e.GetIndex()), k, x)
	ev.Time, ev.JournalIndex = e.GetTime(), e.GetIndex()
	if e.GetReason() != "" {
		ev.Reason = e.GetReason()
	}
	if k == recordv1.EventKind_EVENT_KIND_OUTCOME_RESOLVED {
		ev.ResolvedBy = lifecycle.EntryKindName(kind)
	}
	return ev
}

func executionEvent(id string, k recordv1.EventKind, x *recordv1.Execution) *recordv1.OutboxEvent {
	return &recordv1.OutboxEvent{Id: id, Kind: k, ExecutionId: x.GetId(), SessionId: x.GetSessionId(), Actor: x.GetActor(),
		Tool: x.GetTool(), State: x.GetState(), Outcome: x.GetOutcome(), TargetStatus: x.GetTargetStatus(),
		Reason: x.GetReason(), ResultRef: x.GetResultRef()}
}

// Delivery states (DescribeDelivery).
const (
	DeliveryDelivered = "delivered"
	DeliveryDead      = "dead"
	DeliveryRetrying  = "retrying"
	DeliveryQueued    = "queued"
)

// DescribeDelivery is d's state (one of the Delivery… names) and a line
// saying what happened, as the CLI and the console show it.
func DescribeDelivery(d *recordv1.EventDelivery) (state, detail string) {
	attempts := fmt.Sprintf("%d attempt", d.GetAttempts())
	if d.GetAttempts() != 1 {
		attempts += "s"
	}
	switch {
	case d.GetDeliveredAt() != nil:
		return DeliveryDelivered, fmt.Sprintf("delivered %s (%s, answered %d)", d.GetDeliveredAt().AsTime().UTC().Format(time.RFC3339), attempts, d.GetLastStatus())
	case d.GetDead():
		return DeliveryDead, fmt.Sprintf("dead-lettered after %s: %s (latch events replay sends it again)", attempts, d.GetLastError())
	case d.GetAttempts() > 0:
		next := ""
		if d.GetNextAttemptAt() != nil {
			next = ", next at " + d.GetNextAttemptAt().AsTime().UTC().Format(time.RFC3339)
		}
		return DeliveryRetrying, fmt.Sprintf("retrying after %s%s: %s", attempts, next, d.GetLastError())
	default:
		return DeliveryQueued, "queued, not tried yet"
	}
}
