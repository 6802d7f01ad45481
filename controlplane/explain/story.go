package explain

import (
	"fmt"
	"strings"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Send is one time the request went to the target (the first dispatch or
// a re-send by recovery) and what came of it.
type Send struct {
	N     int    `json:"n"`
	Time  string `json:"time"`
	Kind  string `json:"kind"` // "dispatch" or "re-send by recovery"
	Index uint64 `json:"journal_index"`
	// Key and Carriers are the idempotency key sent and where it went
	// (Contract); Key "" with a known contract: none, the target never
	// learns the execution ID.
	Key      string `json:"key,omitempty"`
	Carriers string `json:"carriers,omitempty"`
	// AnswerState is the state the answer led to ("" when none is
	// recorded); Answer says what it was.
	AnswerState string `json:"answer_state,omitempty"`
	Answer      string `json:"answer"`
	// AnswerTime is when the answer was recorded ("" when none is).
	AnswerTime string `json:"answer_time,omitempty"`
}

// Query is one recovery query or decision, and whether it counted as
// evidence.
type Query struct {
	Time     string `json:"time"`
	Kind     string `json:"kind"`
	Saw      string `json:"saw"`
	Verdict  string `json:"verdict"`
	Evidence bool   `json:"evidence"`
	Index    uint64 `json:"journal_index"`
}

// Decision is one step of the approval trail: an approval card opened, an
// operator's approval, denial or resolution.
type Decision struct {
	Time   string `json:"time"`
	What   string `json:"what"`
	Reason string `json:"reason"`
}

// Call is one call that reached Latch for this intent, with its protocol
// correlation evidence (recorded, never used to decide).
type Call struct {
	Call        string `json:"call"`
	Time        string `json:"time,omitempty"`
	Transport   string `json:"transport,omitempty"`
	JSONRPC     string `json:"jsonrpc_id,omitempty"`
	MCPSession  string `json:"mcp_session,omitempty"`
	Client      string `json:"client,omitempty"`
	Peer        string `json:"peer,omitempty"`
	Token       string `json:"token_id,omitempty"`
	Traceparent string `json:"traceparent,omitempty"`
}

// Step is one journal record of the execution, named for a reader.
type Step struct {
	Index    uint64 `json:"journal_index"`
	Time     string `json:"time"`
	Step     string `json:"step"`
	Reason   string `json:"reason,omitempty"`
	Actor    string `json:"actor,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	// Kind is the record's kind (transition, attach, recovery_query, …)
	// by name (lifecycle.EntryKindName of EntryKind) and State the state
	// it left the execution in.
	Kind      string             `json:"kind,omitempty"`
	State     string             `json:"state,omitempty"`
	EntryKind recordv1.EntryKind `json:"-"`
}

// What an operator can do about an execution (Action.Do).
const (
	DoApprove          = "approve"
	DoDeny             = "deny"
	DoAuthorizeSession = "authorize_session"
	DoResolve          = "resolve"
	DoCancel           = "cancel"
)

// Action is one thing an operator can do now, and how (the CLI command;
// the console offers the same as a form).
type Action struct {
	Do   string `json:"do"`
	Says string `json:"says"`
}

// Contract is what the tool's contract says goes to the target as the
// idempotency key: Key (the execution ID, or "" for none) and Carriers
// (where). The zero Contract is "not known" (the reader has no catalog):
// the story then says nothing of the key.
type Contract struct {
	Known         bool
	Key, Carriers string
}

// ContractOf is the key contract of x's tool in the catalog cat (the one
// in force); a tool or catalog that is missing is said so.
func ContractOf(cat *tools.Catalog, x *recordv1.Execution) Contract {
	if cat == nil {
		return Contract{Known: true, Key: x.GetId(), Carriers: "contract not in the catalog in force"}
	}
	tool := cat.Tools[x.GetTool()]
	if tool == nil {
		return Contract{Known: true, Key: x.GetId(), Carriers: "tool not in the catalog in force"}
	}
	cs := tool.KeyCarriers(cat.Targets[tool.Target])
	if len(cs) == 0 {
		return Contract{Known: true}
	}
	return Contract{Known: true, Key: x.GetId(), Carriers: strings.Join(cs, ", ")}
}

func (c Contract) phrase() string {
	if c.Key == "" {
		return "without the execution ID (the target cannot tell a re-send from a new request)"
	}
	return "carrying " + c.Key + " as its key (" + c.Carriers + ")"
}

// Tell is the whole story of x from its journal records (hist, oldest
// first): Explain's five answers, and the steps they rest on (sends and
// their answers, recovery queries, the approval trail, the calls that
// reached Latch, every record), the evidence an operator decides on (Sent,
// Answered) and what can be done now (Next). c is the tool's key contract
// (ContractOf; the zero Contract when it is not known).
func Tell(x *recordv1.Execution, hist []*recordv1.JournalEntry, c Contract) Report {
	r := Explain(x, hist)
	for i, e := range hist {
		kind := ""
		switch {
		case lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_TRANSITION && e.GetTo() == recordv1.State_STATE_DISPATCHED:
			kind = "dispatch"
		case lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_RECOVERY_REPLAY:
			kind = "re-send by recovery"
		}
		if kind != "" {
			s := Send{N: len(r.Sends) + 1, Time: TS(e.GetTime()), Kind: kind, Key: c.Key, Carriers: c.Carriers,
				Answer: "no answer recorded yet", Index: e.GetIndex()}
			if ans := answerAfter(hist[i+1:]); ans != nil {
				s.AnswerState = lifecycle.Name(ans.GetTo())
				s.Answer = ans.GetReason()
				if ans.GetTo() == recordv1.State_STATE_COMPLETED {
					s.Answer = fmt.Sprintf("%s, %s (%s)", lifecycle.DescribeExecutionAnswer(ans.GetExecution()), OutcomeName(ans.GetExecution().GetOutcome()), ans.GetReason())
				}
				s.AnswerTime = TS(ans.GetTime())
				s.Answer = s.AnswerTime + ": " + s.Answer
			}
			r.Sends = append(r.Sends, s)
		}
		switch lifecycle.EntryKindOf(e) {
		case recordv1.EntryKind_ENTRY_KIND_RECOVERY_QUERY, recordv1.EntryKind_ENTRY_KIND_RECOVERY_ATTEMPT:
			r.Queries = append(r.Queries, Query{Time: TS(e.GetTime()), Kind: lifecycle.EntryKindNameOf(e), Saw: e.GetReason(),
				Verdict: "not evidence: the execution stays " + lifecycle.Name(e.GetTo()) + " and is asked again", Index: e.GetIndex()})
		case recordv1.EntryKind_ENTRY_KIND_RECOVERY:
			q := Query{Time: TS(e.GetTime()), Kind: lifecycle.EntryKindNameOf(e), Saw: e.GetReason(), Index: e.GetIndex()}
			switch e.GetTo() {
			case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NOT_EXECUTED:
				q.Evidence, q.Verdict = true, "evidence: it settled the execution as "+lifecycle.Name(e.GetTo())
			default:
				q.Verdict = "no evidence to be had: handed to an operator as " + lifecycle.Name(e.GetTo())
			}
			r.Queries = append(r.Queries, q)
		case recordv1.EntryKind_ENTRY_KIND_APPROVAL, recordv1.EntryKind_ENTRY_KIND_RESOLVE:
			r.Trail = append(r.Trail, Decision{Time: TS(e.GetTime()), What: lifecycle.EntryKindNameOf(e) + ": " + lifecycle.Name(e.GetFrom()) + " → " + lifecycle.Name(e.GetTo()), Reason: e.GetReason()})
		}
		if e.GetTo() == recordv1.State_STATE_AWAITING_APPROVAL && e.GetFrom() != recordv1.State_STATE_AWAITING_APPROVAL {
			r.Trail = append(r.Trail, Decision{Time: TS(e.GetTime()), What: "approval card opened", Reason: e.GetReason()})
		}
		if e.GetTo() == recordv1.State_STATE_ACCEPTED && lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_TRANSITION {
			r.Calls = append(r.Calls, callOf("first call", e, e.GetExecution().GetEvidence()))
		}
		if lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_ATTACH {
			r.Calls = append(r.Calls, callOf(fmt.Sprintf("call %d (attached)", len(r.Calls)+1), e, e.GetEvidence()))
		}
		step := lifecycle.Name(e.GetTo())
		if lifecycle.EntryKindOf(e) != recordv1.EntryKind_ENTRY_KIND_TRANSITION {
			step = lifecycle.EntryKindNameOf(e) + " (" + lifecycle.Name(e.GetTo()) + ")"
		}
		r.Steps = append(r.Steps, Step{Index: e.GetIndex(), Time: TS(e.GetTime()), Step: step, Reason: e.GetReason(),
			Actor: e.GetActor(), Evidence: EvidenceText(e.GetEvidence()), Kind: lifecycle.EntryKindNameOf(e), State: lifecycle.Name(e.GetTo()), EntryKind: lifecycle.EntryKindOf(e)})
	}
	if len(r.Calls) == 0 && x.GetEvidence() != nil {
		r.Calls = append(r.Calls, callOf("first call", nil, x.GetEvidence()))
	}

	// The evidence an operator decides on.
	switch {
	case x.GetDispatchedAt() != nil:
		r.Sent = fmt.Sprintf("Sent to %s at %s (%d dispatch attempt(s), last at %s)", x.GetTarget(), TS(x.GetDispatchedAt()), x.GetAttempts(), TS(x.GetLastSentAt()))
		if c.Known {
			r.Sent += ", " + c.phrase()
		}
		r.Sent += "."
	default:
		r.Sent = "Nothing has been sent to " + x.GetTarget() + " yet."
	}
	switch {
	case len(r.Sends) > 0 && r.Sends[len(r.Sends)-1].AnswerState != "":
		r.Answered = "The target's last answer: " + sentence(r.Sends[len(r.Sends)-1].Answer)
	case x.GetDispatchedAt() != nil:
		r.Answered = "No answer from the target has been recorded."
	}
	r.LastQuery = lastQuery(r.Queries)
	r.Retries = retries(r.Calls, r.Sends)

	// What can be done now.
	id := x.GetId()
	if x.GetState() == recordv1.State_STATE_AWAITING_APPROVAL {
		if lifecycle.ReasonOf(x) == recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION {
			ses := x.GetSessionId()
			if ses == "" {
				ses = "SESSION_ID"
			}
			r.Next = append(r.Next, Action{DoAuthorizeSession, "It waits for its agent session's authorization: authorize the session (latch session authorize " + ses + ") and this call and the session's later calls go on."})
		}
		r.Next = append(r.Next,
			Action{DoApprove, "Approve this call alone: latch approvals approve " + id + " (it is then dispatched to " + x.GetTarget() + ")."},
			Action{DoDeny, "Deny it: latch approvals deny " + id + " --reason R (the agent is told the reason; nothing is sent)."})
	}
	if x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN || x.GetState() == recordv1.State_STATE_NEEDS_REVIEW {
		r.Next = append(r.Next, Action{DoResolve, "Find out at the target whether it happened, then record it with the evidence: latch exec resolve " + id +
			" --completed --outcome succeeded|failed_at_target --reason R, or --not-executed --reason R. Retries of the agent get that answer; nothing is re-sent."})
	}
	if lifecycle.Cancellable(x.GetState()) {
		r.Next = append(r.Next, Action{DoCancel, "Cancel it before it is dispatched (the console's Cancel): nothing is sent."})
	}
	return r
}

// Can reports whether the story offers the action do (DoApprove, …) now.
func (r Report) Can(do string) bool {
	for _, a := range r.Next {
		if a.Do == do {
			return true
		}
	}
	return false
}

// answerAfter is the first record after a send that says what came of it.
func answerAfter(rest []*recordv1.JournalEntry) *recordv1.JournalEntry {
	for _, e := range rest {
		switch {
		case lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_RECOVERY_QUERY || lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_RECOVERY_ATTEMPT:
			return e
		case lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_RECOVERY_REPLAY || (lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_TRANSITION && e.GetTo() == recordv1.State_STATE_DISPATCHED):
			return nil // the next send came before an answer
		}
		switch e.GetTo() {
		case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_NEEDS_REVIEW:
			if e.GetFrom() != e.GetTo() {
				return e
			}
		}
	}
	return nil
}

func callOf(call string, e *recordv1.JournalEntry, ev *recordv1.Evidence) Call {
	c := Call{Call: call, Transport: ev.GetTransport(), JSONRPC: ev.GetJsonrpcId(), MCPSession: ev.GetMcpSessionId(),
		Client: ev.GetClientName(), Peer: ev.GetPeerAddress(), Token: ev.GetTokenId(), Traceparent: ev.GetTraceparent()}
	if e != nil {
		c.Time = TS(e.GetTime())
	}
	return c
}
