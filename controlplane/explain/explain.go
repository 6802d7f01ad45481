// Package explain is the one derivation of an execution's story from its
// journal records (Tell): the five investigation questions of docs/design
// §10 answered (Explain: one agent process or two, did the first call
// reach dispatch, was a target answer observed, was the result delivered
// after completion, did the second call attach or create a new execution), the
// steps they rest on (sends and their answers, recovery queries, the
// approval trail, the calls with their correlation evidence, every record),
// the evidence an operator decides on and what can be done now. `latch exec
// explain` prints it as text or JSON; the console renders it as an
// execution's page. It reads records only; imported by controlplane/cli and
// controlplane/console.
package explain

import (
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Answer is one question and the sentences that answer it.
type Answer struct {
	Question string   `json:"question"`
	Lines    []string `json:"lines"`
}

// Report is the story of one execution (the shape of `latch exec explain
// --json`): its headline and the five answers, in order (what it means;
// Explain), and, from Tell, the steps they rest on, the evidence an
// operator decides on and what can be done now. The CLI prints it as text
// or JSON, the console as an execution's page.
type Report struct {
	ExecutionID string   `json:"execution_id"`
	Headline    string   `json:"headline"`
	Answers     []Answer `json:"answers"`
	// Delivery is what is known of the answer reaching its caller:
	// "delivered", "not_delivered_caller_left" or "not_recorded"
	// (lifecycle.DeliveryName; never "failed": only a front knows).
	Delivery string `json:"delivery"`

	// Steps: the sends and what came of each, the recovery queries and
	// whether they counted, the approval trail, the calls that reached
	// Latch (correlation evidence) and every journal record.
	Sends   []Send     `json:"sends,omitempty"`
	Queries []Query    `json:"recovery_queries,omitempty"`
	Trail   []Decision `json:"approvals,omitempty"`
	Calls   []Call     `json:"calls,omitempty"`
	Steps   []Step     `json:"steps,omitempty"`
	// Sent, Answered and LastQuery are the evidence next to a decision,
	// each its own sentence from its own source: what was sent and when,
	// what the target said, and what the last recovery query saw.
	Sent      string `json:"sent,omitempty"`
	Answered  string `json:"answered,omitempty"`
	LastQuery string `json:"last_recovery_query,omitempty"`
	// Retries says, when the agent's retries attached, that they did and
	// what was (not) re-sent for them.
	Retries string `json:"retries,omitempty"`
	// Next is what an operator can do now.
	Next []Action `json:"next,omitempty"`
}

// Questions are the five investigation questions, in order.
var Questions = []string{
	"One agent process or two?",
	"Did the first call reach dispatch?",
	"Was a target answer observed?",
	"Was the result delivered after completion?",
	"Did the second call attach or create a new execution?",
}

// Explain answers the five questions about x from its journal records
// (hist, oldest first).
func Explain(x *recordv1.Execution, hist []*recordv1.JournalEntry) Report {
	var attaches []*recordv1.JournalEntry
	var completed, delivered, unknown, notExecuted, left *recordv1.JournalEntry
	var queries []*recordv1.JournalEntry
	var first *recordv1.Evidence
	for _, e := range hist {
		switch {
		case lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_ATTACH:
			attaches = append(attaches, e)
		case lifecycle.EntryKindOf(e) == lifecycle.CallerLeftKind:
			if left == nil {
				left = e
			}
		case e.GetTo() == recordv1.State_STATE_ACCEPTED:
			first = e.GetExecution().GetEvidence()
		case e.GetTo() == recordv1.State_STATE_COMPLETED && completed == nil:
			completed = e
		case e.GetTo() == recordv1.State_STATE_DELIVERED:
			delivered = e
		case lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_RECOVERY_QUERY || lifecycle.EntryKindOf(e) == recordv1.EntryKind_ENTRY_KIND_RECOVERY_ATTEMPT:
			queries = append(queries, e)
		case e.GetTo() == recordv1.State_STATE_OUTCOME_UNKNOWN && unknown == nil:
			unknown = e
		case e.GetTo() == recordv1.State_STATE_NOT_EXECUTED:
			notExecuted = e
		}
	}
	if first == nil {
		first = x.GetEvidence()
	}
	r := Report{ExecutionID: x.GetId(), Delivery: lifecycle.DeliveryName(lifecycle.DeliveryOf(x)), Headline: fmt.Sprintf("%s: %s by %s, now %s", x.GetId(), x.GetTool(), x.GetActor(), lifecycle.Name(x.GetState()))}
	say := func(q int, format string, a ...any) {
		for len(r.Answers) <= q {
			r.Answers = append(r.Answers, Answer{Question: Questions[len(r.Answers)]})
		}
		r.Answers[q].Lines = append(r.Answers[q].Lines, fmt.Sprintf(format, a...))
	}

	// 1. One agent process or two? A reconnecting agent gets a new TCP port
	// and often a new MCP session; its client name, host and token stay.
	agents := map[string]bool{}
	sessions := map[string]bool{}
	for _, ev := range append([]*recordv1.Evidence{first}, evidences(attaches)...) {
		if ev == nil {
			continue
		}
		host := ev.GetPeerAddress()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		agents[ev.GetClientName()+"@"+host+"/"+ev.GetTokenId()] = true
		if ev.GetMcpSessionId() != "" {
			sessions[ev.GetMcpSessionId()] = true
		}
	}
	switch {
	case len(attaches) == 0:
		say(0, "One call reached Latch for this intent (%s).", EvidenceOr(first))
	case len(agents) > 1:
		say(0, "Two or more: %d calls came from %d different clients or hosts, all as actor %s (%d MCP sessions).", len(attaches)+1, len(agents), x.GetActor(), len(sessions))
	default:
		say(0, "One, most likely: %d calls from the same client and host (%s) over %d connection(s) and %d MCP session(s).", len(attaches)+1, EvidenceOr(first), len(attaches)+1, len(sessions))
	}

	// 2. Did the first call reach dispatch?
	if x.GetDispatchedAt() != nil {
		say(1, "Yes: dispatched at %s (%d dispatch attempt(s) under the one execution ID).", TS(x.GetDispatchedAt()), x.GetAttempts())
	} else {
		say(1, "No: it is %s (%s).", lifecycle.Name(x.GetState()), x.GetReason())
	}

	// 3. Was a target answer observed?
	switch {
	case completed != nil && lifecycle.EntryKindOf(completed) == recordv1.EntryKind_ENTRY_KIND_RESOLVE:
		say(2, "No answer was observed; an operator resolved it at %s: %s", TS(completed.GetTime()), completed.GetReason())
	case completed != nil:
		how := "on the first exchange"
		if unknown != nil {
			how = "after the outcome was unknown (" + unknown.GetReason() + "), recovered from the target"
		}
		say(2, "Yes: %s, %s, at %s, %s.", OutcomeName(x.GetOutcome()), lifecycle.DescribeExecutionAnswer(x), TS(x.GetCompletedAt()), how)
	case x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN || x.GetState() == recordv1.State_STATE_NEEDS_REVIEW:
		say(2, "Not yet: %s (%s). It was not re-sent blindly.", lifecycle.Name(x.GetState()), x.GetReason())
	case x.GetState() == recordv1.State_STATE_NOT_EXECUTED && notExecuted != nil:
		// Say what the conclusion rests on: never "nothing happened"
		// without the proof.
		switch lifecycle.EntryKindOf(notExecuted) {
		case recordv1.EntryKind_ENTRY_KIND_RECOVERY:
			say(2, "No answer to the request itself; recovery established from the target that it never acted on it: %s", notExecuted.GetReason())
		case recordv1.EntryKind_ENTRY_KIND_RESOLVE:
			say(2, "No answer was observed; an operator decided at %s that it was not executed: %s", TS(notExecuted.GetTime()), notExecuted.GetReason())
		default:
			say(2, "No: the request was never written to the target (seen before its first byte left Latch): %s", notExecuted.GetReason())
		}
	case x.GetState() == recordv1.State_STATE_NOT_EXECUTED:
		say(2, "No answer was observed; it is not_executed: %s", x.GetReason())
	default:
		say(2, "No.")
	}
	if n := len(queries); n > 0 {
		say(2, "%d recovery quer%s settled nothing; the last, at %s: %s", n, map[bool]string{true: "y", false: "ies"}[n == 1], TS(queries[n-1].GetTime()), queries[n-1].GetReason())
	}

	// 4. Was the result delivered after completion? Three facts, told
	// apart (lifecycle.DeliveryOf): delivered, not delivered because a
	// front saw the caller leave, and nothing recorded, which is never a
	// failure: a front records a delivery after the answer was written, and
	// the record may be in flight or kept by a front until the control
	// plane takes it.
	leftAt := ""
	if left != nil {
		leftAt = TS(left.GetTime())
	}
	again, waitAgain := "Nothing is re-sent: an identical call attaches and gets the stored result.", "an identical call attaches and gets the outcome."
	if x.GetObservation() != nil {
		again = "Observe mode: an identical call is forwarded again, as an execution of its own."
		waitAgain = "in observe mode an identical call is forwarded again, as an execution of its own."
	}
	switch {
	case completed == nil && left != nil:
		say(3, "Not applicable: it has not completed. The caller left at %s, before any answer (a front saw its connection or stream close); %s", leftAt, waitAgain)
	case completed == nil:
		say(3, "Not applicable: it has not completed.")
	case delivered != nil:
		early := 0
		for _, a := range attaches {
			if a.GetTime().AsTime().Before(completed.GetTime().AsTime()) {
				early++
			}
		}
		switch {
		case left != nil:
			say(3, "Yes, to a retry: the first caller left at %s before the answer (a front saw its connection or stream close), and the stored result was delivered at %s to a call that attached. Nothing was re-sent.", leftAt, TS(delivered.GetTime()))
		case early > 0:
			say(3, "Yes, to a retry: the first caller was gone before the answer came: %d retry(ies) attached while it was in flight, and the stored result was delivered at %s to a retry. Nothing was re-sent.", early, TS(delivered.GetTime()))
		default:
			say(3, "Yes: the result was delivered at %s.", TS(delivered.GetTime()))
		}
	case left != nil:
		say(3, "No: not delivered, the caller left before the answer (a front saw its connection or stream close at %s; completed at %s). %s", leftAt, TS(completed.GetTime()), again)
	default:
		say(3, "Delivery not recorded: completed at %s, and no front has recorded the answer as delivered or its caller as gone. The caller may have it (the record can still be on its way, or be kept by a front until the control plane takes it). %s", TS(completed.GetTime()), again)
	}

	// 5. Did the second call attach or create a new execution?
	o := x.GetObservation()
	switch {
	case o != nil && o.GetPriorExecutionId() != "":
		say(4, "Observe mode: this call was itself a repeat of the intent of %s (then %s) and was forwarded as a new execution; enforcement would have attached it there and not sent it again.",
			o.GetPriorExecutionId(), lifecycle.Name(o.GetPriorState()))
	case o != nil:
		say(4, "Observe mode: calls of this tool are forwarded as they come, so a repeat of this intent is an execution of its own (latch observe report pairs them); none of them attaches here.")
	case len(attaches) == 0:
		say(4, "No second call with this intent reached Latch within the attach window.")
	}
	if o.GetWouldNeedApproval() {
		say(4, "Enforcement would have made it wait first: %s", o.GetWouldWaitReason())
	}
	if o.GetWouldHoldUncertain() {
		say(2, "Observe mode: its outcome is unknown and Latch does not recover observed calls (the target never saw an execution ID to be asked about); enforcement would have held it and recovered the outcome before a retry was sent.")
	}
	for i, a := range attaches {
		say(4, "Call %d at %s attached to %s while it was %s (%s): %s", i+2, TS(a.GetTime()), x.GetId(), lifecycle.Name(a.GetFrom()), EvidenceOr(a.GetEvidence()), a.GetReason())
	}
	if x.GetRepeatOf() != "" {
		say(4, "This execution is a deliberate repeat of %s (repeat_of).", x.GetRepeatOf())
	}
	return r
}

func evidences(es []*recordv1.JournalEntry) []*recordv1.Evidence {
	out := make([]*recordv1.Evidence, 0, len(es))
	for _, e := range es {
		out = append(out, e.GetEvidence())
	}
	return out
}

// EvidenceOr is EvidenceText, or a sentence saying there is none.
func EvidenceOr(ev *recordv1.Evidence) string {
	if t := EvidenceText(ev); t != "" {
		return t
	}
	return "no transport evidence recorded"
}

// EvidenceText is protocol correlation evidence as key=value pairs
// (transport, mcp_session, jsonrpc_id, client, peer), "" for none.
func EvidenceText(ev *recordv1.Evidence) string {
	if ev == nil {
		return ""
	}
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("transport", ev.GetTransport())
	add("mcp_session", ev.GetMcpSessionId())
	add("jsonrpc_id", ev.GetJsonrpcId())
	add("client", ev.GetClientName())
	add("peer", ev.GetPeerAddress())
	return strings.Join(parts, " ")
}

// OutcomeName is "succeeded", "failed_at_target" or "" (none yet).
func OutcomeName(o recordv1.Outcome) string {
	if o == recordv1.Outcome_OUTCOME_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}

// TS is a timestamp in RFC 3339 with nanoseconds, UTC; "" when unset.
func TS(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339Nano)
}
