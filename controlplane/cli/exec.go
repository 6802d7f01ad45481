package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	explainpkg "github.com/latchhq/latch/controlplane/explain"
	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func runExec(ctx context.Context, env *Env, args []string) error {
	sub, args, fs, t, err := adminCommand(env, "exec", "list | show ID | explain ID | receipt ID | watch [--state S] [ID] | resolve ID --completed|--not-executed --reason R", args)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		actor := fs.String("actor", "", "only this actor's executions")
		tool := fs.String("tool", "", "only this tool")
		state := fs.String("state", "", "only this state (e.g. outcome_unknown, needs_review)")
		limit := fs.Int("limit", 50, "at most this many (max 1000)")
		asJSON := jsonFlag(fs, "list", "print one JSON line per execution (its record)")
		if _, err := parse(fs, args); err != nil {
			return err
		}
		req := &controlplanev1.ListRequest{Actor: *actor, Tool: *tool, Limit: int32(*limit)}
		if *state != "" {
			st, err := lifecycle.Parse(*state)
			if err != nil {
				return usagef("--state: %v", err)
			}
			req.State = st
		}
		c, closeFn, err := t.dial(ctx)
		if err != nil {
			return err
		}
		defer closeFn()
		resp, err := c.List(ctx, req)
		if err != nil {
			return rpcError(err)
		}
		if *asJSON {
			return printJSONLines(env.Stdout, resp.GetExecutions())
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EXECUTION\tTOOL\tACTOR\tSTATE\tOUTCOME\tACCEPTED")
		for _, x := range resp.GetExecutions() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.GetId(), x.GetTool(), x.GetActor(), lifecycle.Name(x.GetState()), outcomeName(x.GetOutcome()), ts(x.GetAcceptedAt()))
		}
		return tw.Flush()
	case "show", "explain":
		asJSON := jsonFlag(fs, sub, map[string]string{
			"show":    "print the execution, its result and its journal as one JSON object",
			"explain": "print the story as one JSON object: {execution_id, headline, delivery, answers: [{question, lines}], sends, recovery_queries, approvals, calls, steps, sent, answered, next: [{do, says}]}",
		}[sub])
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("exec %s needs exactly one execution ID", sub)
		}
		c, closeFn, err := t.dial(ctx)
		if err != nil {
			return err
		}
		defer closeFn()
		got, err := c.Get(ctx, &controlplanev1.GetRequest{ExecutionId: pos[0]})
		if err != nil {
			return rpcError(err)
		}
		hist, err := c.History(ctx, &controlplanev1.HistoryRequest{ExecutionId: pos[0]})
		if err != nil {
			return rpcError(err)
		}
		if sub == "explain" {
			if *asJSON {
				return writeJSON(env.Stdout, explainpkg.Tell(got.GetExecution(), hist.GetEntries(), explainpkg.Contract{})) // explainJSON
			}
			explain(env.Stdout, got.GetExecution(), hist.GetEntries())
			return nil
		}
		if *asJSON {
			return showJSON(env.Stdout, got.GetExecution(), got.GetResult(), hist.GetEntries())
		}
		show(env.Stdout, got.GetExecution(), got.GetResult(), hist.GetEntries())
		return nil
	case "receipt":
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		return execReceipt(ctx, env, t, pos)
	case "watch":
		return execWatch(ctx, env, fs, t, args)
	case "resolve":
		completed := fs.Bool("completed", false, "the action happened at the target")
		notExecuted := fs.Bool("not-executed", false, "the action provably did not happen")
		outcome := fs.String("outcome", "succeeded", "with --completed: succeeded or failed_at_target")
		reason := fs.String("reason", "", "the evidence that decided it (required, journaled)")
		operator := fs.String("operator", env.Getenv("USER"), "who decides (journaled)")
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("exec resolve needs exactly one execution ID")
		}
		if *completed == *notExecuted {
			return usagef("say exactly one of --completed or --not-executed")
		}
		if strings.TrimSpace(*reason) == "" {
			return usagef("--reason is required: say what evidence decided it")
		}
		req := &controlplanev1.ResolveRequest{ExecutionId: pos[0], Completed: *completed, NotExecuted: *notExecuted, Reason: *reason, Operator: *operator}
		if *completed {
			switch *outcome {
			case "succeeded":
				req.Outcome = recordv1.Outcome_OUTCOME_SUCCEEDED
			case "failed_at_target":
				req.Outcome = recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
			default:
				return usagef("--outcome must be succeeded or failed_at_target")
			}
		}
		c, closeFn, err := t.dial(ctx)
		if err != nil {
			return err
		}
		defer closeFn()
		resp, err := c.Resolve(ctx, req)
		if err != nil {
			return rpcError(err)
		}
		fmt.Fprintf(env.Stdout, "%s is now %s\n", resp.GetExecution().GetId(), lifecycle.Name(resp.GetExecution().GetState()))
		return nil
	}
	return usagef("unknown exec subcommand %q (want list, show, explain, watch or resolve)", sub)
}

func runApprovals(ctx context.Context, env *Env, args []string) error {
	sub, args, fs, t, err := adminCommand(env, "approvals", "list | show ID | approve ID | deny ID --reason R", args)
	if err != nil {
		return err
	}
	var reason, operator *string
	var asJSON *bool
	switch sub {
	case "list", "show":
		asJSON = jsonFlag(fs, sub, map[string]string{"list": "print one JSON line per card (the execution's record and waits_for)", "show": "print the execution, its result and its journal as one JSON object"}[sub])
	default:
		reason = fs.String("reason", "", "why (required for deny; shown to the agent)")
		operator = fs.String("operator", env.Getenv("USER"), "who decides (journaled)")
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	c, closeFn, err := t.dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	if operator != nil && *operator == "" {
		*operator = "operator"
	}
	switch sub {
	case "list":
		resp, err := c.List(ctx, &controlplanev1.ListRequest{State: recordv1.State_STATE_AWAITING_APPROVAL, Limit: 1000})
		if err != nil {
			return rpcError(err)
		}
		if *asJSON {
			for _, x := range resp.GetExecutions() {
				if err := printJSON(env.Stdout, approvalCardJSON{Execution: recordOf(x), WaitsFor: waitsFor(x)}); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EXECUTION\tTOOL\tACTOR\tTARGET\tACCEPTED\tWAITS FOR")
		for _, x := range resp.GetExecutions() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.GetId(), x.GetTool(), x.GetActor(), x.GetTarget(), ts(x.GetAcceptedAt()), waitsFor(x))
		}
		return tw.Flush()
	case "show", "approve", "deny":
		if len(pos) != 1 {
			return usagef("approvals %s needs exactly one execution ID", sub)
		}
		switch sub {
		case "show":
			got, err := c.Get(ctx, &controlplanev1.GetRequest{ExecutionId: pos[0]})
			if err != nil {
				return rpcError(err)
			}
			hist, err := c.History(ctx, &controlplanev1.HistoryRequest{ExecutionId: pos[0]})
			if err != nil {
				return rpcError(err)
			}
			if *asJSON {
				return showJSON(env.Stdout, got.GetExecution(), got.GetResult(), hist.GetEntries())
			}
			show(env.Stdout, got.GetExecution(), got.GetResult(), hist.GetEntries())
			return nil
		case "approve":
			resp, err := c.Approve(ctx, &controlplanev1.ApproveRequest{ExecutionId: pos[0], Operator: *operator, Reason: *reason})
			if err != nil {
				return rpcError(err)
			}
			fmt.Fprintf(env.Stdout, "%s approved; it is now %s\n", pos[0], lifecycle.Name(resp.GetExecution().GetState()))
			return nil
		default:
			if strings.TrimSpace(*reason) == "" {
				return usagef("deny needs --reason (it is shown to the agent)")
			}
			resp, err := c.Deny(ctx, &controlplanev1.DenyRequest{ExecutionId: pos[0], Operator: *operator, Reason: *reason})
			if err != nil {
				return rpcError(err)
			}
			fmt.Fprintf(env.Stdout, "%s denied; it is now %s\n", pos[0], lifecycle.Name(resp.GetExecution().GetState()))
			return nil
		}
	}
	return usagef("unknown approvals subcommand %q (want list, show, approve or deny)", sub)
}

// show prints the full record of an execution, like an incident record.
func show(w io.Writer, x *recordv1.Execution, r *recordv1.Result, hist []*recordv1.JournalEntry) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("execution_id", x.GetId())
	row("tool", x.GetTool())
	row("target", fmt.Sprintf("%s (%s)", x.GetTarget(), x.GetChannel()))
	row("replay", x.GetReplay())
	row("actor", x.GetActor())
	row("intent_scope", x.GetIntentScope())
	row("fingerprint", x.GetFingerprint())
	row("repeat_of", x.GetRepeatOf())
	row("catalog_version", x.GetCatalogVersion())
	row("state", lifecycle.Name(x.GetState()))
	row("outcome", outcomeName(x.GetOutcome()))
	if x.GetTargetStatus() != 0 || x.GetOutcome() != 0 {
		row("target_status", fmt.Sprint(x.GetTargetStatus()))
		row("answer", lifecycle.DescribeExecutionAnswer(x))
	}
	row("result_ref", x.GetResultRef())
	row("reason", x.GetReason())
	row("accepted_at", ts(x.GetAcceptedAt()))
	row("authorized_at", ts(x.GetAuthorizedAt()))
	row("dispatched_at", ts(x.GetDispatchedAt()))
	if x.GetLastSentAt() != nil && !x.GetLastSentAt().AsTime().Equal(x.GetDispatchedAt().AsTime()) {
		row("last_sent_at", ts(x.GetLastSentAt()))
	}
	row("completed_at", ts(x.GetCompletedAt()))
	row("delivered_at", ts(x.GetDeliveredAt()))
	if lifecycle.Observed(x.GetState()) || x.GetCallerLeftAt() != nil {
		row("delivery", lifecycle.DescribeDelivery(lifecycle.DeliveryOf(x)))
	}
	row("caller_left_at", ts(x.GetCallerLeftAt()))
	row("dispatches", fmt.Sprint(x.GetAttempts()))
	row("recovery_attempts", fmt.Sprint(x.GetRecoveryAttempts()))
	if x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN {
		row("next_recovery_at", ts(x.GetNextRecoveryAt()))
	}
	if ev := x.GetEvidence(); ev != nil {
		row("evidence", evidenceText(ev))
	}
	row("canonical_intent", string(x.GetCanonicalIntent()))
	if r != nil {
		row("result", fmt.Sprintf("status %d, %d bytes%s", r.GetStatus(), len(r.GetBody()), map[bool]string{true: " (truncated)"}[r.GetBodyTruncated()]))
		if len(r.GetBody()) > 0 {
			body := string(r.GetBody())
			if len(body) > 2000 {
				body = body[:2000] + "…"
			}
			row("result_body", body)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\njournal:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range hist {
		step := lifecycle.Name(e.GetTo())
		if lifecycle.EntryKindOf(e) != recordv1.EntryKind_ENTRY_KIND_TRANSITION {
			step = lifecycle.EntryKindNameOf(e) + " (" + lifecycle.Name(e.GetTo()) + ")"
		}
		ev := ""
		if e.GetEvidence() != nil {
			ev = " [" + evidenceText(e.GetEvidence()) + "]"
		}
		fmt.Fprintf(tw, "  #%d\t%s\t%s\t%s%s\n", e.GetIndex(), ts(e.GetTime()), step, e.GetReason(), ev)
	}
	tw.Flush()
}

func evidenceText(ev *recordv1.Evidence) string { return explainpkg.EvidenceText(ev) }

func outcomeName(o recordv1.Outcome) string { return explainpkg.OutcomeName(o) }

func ts(t *timestamppb.Timestamp) string { return explainpkg.TS(t) }

// printJSONLines prints one record line per item (jsonRecord).
func printJSONLines[T proto.Message](w io.Writer, items []T) error {
	for _, it := range items {
		if err := printJSON(w, recordOf(it)); err != nil {
			return err
		}
	}
	return nil
}

// showJSON is `show --json`: the execution, its stored result and journal.
func showJSON(w io.Writer, x *recordv1.Execution, r *recordv1.Result, hist []*recordv1.JournalEntry) error {
	out := execShowJSON{Execution: recordOf(x), Journal: make([]jsonRecord[*recordv1.JournalEntry], len(hist))}
	for i, e := range hist {
		// "kind" names the kind on every record, as before entry_kind.
		if e.GetKind() == "" {
			if name := lifecycle.EntryKindNameOf(e); name != "" {
				e = proto.CloneOf(e)
				e.Kind = name
			}
		}
		out.Journal[i] = recordOf(e)
	}
	if r != nil {
		rr := recordOf(r)
		out.Result = &rr
	}
	return printJSON(w, out)
}
