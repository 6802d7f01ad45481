package cli

import (
	"fmt"
	"io"
	"net"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// explain answers DESIGN §10's five investigation questions, in order, from
// an execution's journal records.
func explain(w io.Writer, x *recordv1.Execution, hist []*recordv1.JournalEntry) {
	var attaches []*recordv1.JournalEntry
	var completed, delivered, unknown, notExecuted *recordv1.JournalEntry
	var queries []*recordv1.JournalEntry
	var first *recordv1.Evidence
	for _, e := range hist {
		switch {
		case e.GetKind() == "attach":
			attaches = append(attaches, e)
		case e.GetTo() == recordv1.State_STATE_ACCEPTED:
			first = e.GetExecution().GetEvidence()
		case e.GetTo() == recordv1.State_STATE_COMPLETED && completed == nil:
			completed = e
		case e.GetTo() == recordv1.State_STATE_DELIVERED:
			delivered = e
		case e.GetKind() == "recovery_query" || e.GetKind() == "recovery_attempt":
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
	fmt.Fprintf(w, "%s: %s by %s, now %s\n\n", x.GetId(), x.GetTool(), x.GetActor(), lifecycle.Name(x.GetState()))

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
	fmt.Fprintln(w, "1. One agent process or two?")
	switch {
	case len(attaches) == 0:
		fmt.Fprintf(w, "   One call reached Latch for this intent (%s).\n", evidenceOr(first))
	case len(agents) > 1:
		fmt.Fprintf(w, "   Two or more: %d calls came from %d different clients or hosts, all as actor %s (%d MCP sessions).\n", len(attaches)+1, len(agents), x.GetActor(), len(sessions))
	default:
		fmt.Fprintf(w, "   One, most likely: %d calls from the same client and host (%s) over %d connection(s) and %d MCP session(s).\n", len(attaches)+1, evidenceOr(first), len(attaches)+1, len(sessions))
	}

	// 2. Did the first call reach dispatch?
	fmt.Fprintln(w, "2. Did the first call reach dispatch?")
	if x.GetDispatchedAt() != nil {
		fmt.Fprintf(w, "   Yes: dispatched at %s (%d dispatch attempt(s) under the one execution ID).\n", ts(x.GetDispatchedAt()), x.GetAttempts())
	} else {
		fmt.Fprintf(w, "   No: it is %s (%s).\n", lifecycle.Name(x.GetState()), x.GetReason())
	}

	// 3. Was a target answer observed?
	fmt.Fprintln(w, "3. Was a target answer observed?")
	switch {
	case completed != nil && completed.GetKind() == "resolve":
		fmt.Fprintf(w, "   No answer was observed; an operator resolved it at %s: %s\n", ts(completed.GetTime()), completed.GetReason())
	case completed != nil:
		how := "on the first exchange"
		if unknown != nil {
			how = "after the outcome was unknown (" + unknown.GetReason() + "), recovered from the target"
		}
		fmt.Fprintf(w, "   Yes: %s, target status %d, at %s, %s.\n", outcomeName(x.GetOutcome()), x.GetTargetStatus(), ts(x.GetCompletedAt()), how)
	case x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN || x.GetState() == recordv1.State_STATE_NEEDS_REVIEW:
		fmt.Fprintf(w, "   Not yet: %s (%s). It was not re-sent blindly.\n", lifecycle.Name(x.GetState()), x.GetReason())
	case x.GetState() == recordv1.State_STATE_NOT_EXECUTED && notExecuted != nil:
		// Say what the conclusion rests on: never "nothing happened"
		// without the proof.
		switch notExecuted.GetKind() {
		case "recovery":
			fmt.Fprintf(w, "   No answer to the request itself; recovery established from the target that it never acted on it: %s\n", notExecuted.GetReason())
		case "resolve":
			fmt.Fprintf(w, "   No answer was observed; an operator decided at %s that it was not executed: %s\n", ts(notExecuted.GetTime()), notExecuted.GetReason())
		default:
			fmt.Fprintf(w, "   No: the request was never written to the target (seen before its first byte left Latch): %s\n", notExecuted.GetReason())
		}
	case x.GetState() == recordv1.State_STATE_NOT_EXECUTED:
		fmt.Fprintf(w, "   No answer was observed; it is not_executed: %s\n", x.GetReason())
	default:
		fmt.Fprintln(w, "   No.")
	}

	if n := len(queries); n > 0 {
		fmt.Fprintf(w, "   %d recovery quer%s settled nothing; the last, at %s: %s\n", n, map[bool]string{true: "y", false: "ies"}[n == 1], ts(queries[n-1].GetTime()), queries[n-1].GetReason())
	}

	// 4. Did delivery fail after completion?
	fmt.Fprintln(w, "4. Did delivery fail after completion?")
	switch {
	case completed == nil:
		fmt.Fprintln(w, "   Not applicable: it has not completed.")
	case delivered != nil:
		early := 0
		for _, a := range attaches {
			if a.GetTime().AsTime().Before(completed.GetTime().AsTime()) {
				early++
			}
		}
		if early > 0 {
			fmt.Fprintf(w, "   The first caller was gone before the answer came: %d retry(ies) attached while it was in flight, and the stored result was delivered at %s to a retry. Nothing was re-sent.\n", early, ts(delivered.GetTime()))
		} else {
			fmt.Fprintf(w, "   No: the result was delivered at %s.\n", ts(delivered.GetTime()))
		}
	default:
		fmt.Fprintf(w, "   Yes: completed at %s but no response was recorded as delivered (completed_result_not_delivered).\n", ts(completed.GetTime()))
	}

	// 5. Did the second call attach or create a new execution?
	fmt.Fprintln(w, "5. Did the second call attach or create a new execution?")
	if len(attaches) == 0 {
		fmt.Fprintln(w, "   No second call with this intent reached Latch within the attach window.")
	}
	for i, a := range attaches {
		fmt.Fprintf(w, "   Call %d at %s attached to %s while it was %s (%s): %s\n", i+2, ts(a.GetTime()), x.GetId(), lifecycle.Name(a.GetFrom()), evidenceOr(a.GetEvidence()), a.GetReason())
	}
	if x.GetRepeatOf() != "" {
		fmt.Fprintf(w, "   This execution is a deliberate repeat of %s (repeat_of).\n", x.GetRepeatOf())
	}
}

func evidences(es []*recordv1.JournalEntry) []*recordv1.Evidence {
	out := make([]*recordv1.Evidence, 0, len(es))
	for _, e := range es {
		out = append(out, e.GetEvidence())
	}
	return out
}

func evidenceOr(ev *recordv1.Evidence) string {
	if ev == nil {
		return "no transport evidence recorded"
	}
	if t := evidenceText(ev); t != "" {
		return t
	}
	return "no transport evidence recorded"
}

// rpcError turns a gRPC status into a message for a terminal.
func rpcError(err error) error {
	if st, ok := status.FromError(err); ok {
		return fmt.Errorf("%s (%s)", st.Message(), strings.ToLower(st.Code().String()))
	}
	return err
}
