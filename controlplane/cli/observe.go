package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// runObserve is latch observe: what enforcement would have done with the
// calls of tools in observe mode.
func runObserve(ctx context.Context, env *Env, args []string) error {
	sub, args, fs, t, err := adminCommand(env, "observe", "report [--since DURATION|TIME] [--pairs N] [--json]", args)
	if err != nil {
		return err
	}
	since := fs.String("since", "", "report: only calls accepted since this long ago (24h) or since this RFC 3339 time; default: every call kept")
	pairs := fs.Int("pairs", 20, "report: list at most this many would-attach pairs, newest first (the counts cover all)")
	asJSON := jsonFlag(fs, sub, "print the report as one JSON object", "report")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case sub != "report":
		return usagef("observe: unknown subcommand %q (report)", sub)
	case len(pos) != 0:
		return usagef("observe report takes no arguments")
	case *pairs < 0 || *pairs > 5000:
		return usagef("observe report: --pairs must be between 0 and 5000")
	}
	req := &controlplanev1.ObserveReportRequest{MaxPairs: int32(*pairs)}
	if *pairs == 0 {
		req.MaxPairs = 1 // the server's 0 is its default; none are printed below
	}
	if *since != "" {
		at, err := parseSince(*since, time.Now())
		if err != nil {
			return usagef("observe report: --since: %v", err)
		}
		req.Since = timestamppb.New(at)
	}
	c, closeFn, err := adminClient(ctx, t)
	if err != nil {
		return err
	}
	defer closeFn()
	resp, err := c.ObserveReport(ctx, req)
	if err != nil {
		return rpcError(err)
	}
	if *pairs == 0 {
		resp.Pairs = nil
	}
	if *asJSON {
		return writeJSON(env.Stdout, recordOf(resp)) // observeReportJSON
	}
	return printObserveReport(env.Stdout, resp)
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("%q: give a positive duration like 24h", s)
		}
		return now.Add(-d), nil
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (24h, 30m) nor an RFC 3339 time (2026-12-01T09:00:00Z)", s)
	}
	return at, nil
}

func printObserveReport(w io.Writer, resp *controlplanev1.ObserveReportResponse) error {
	scope := "every call kept"
	if resp.GetSince() != nil {
		scope = "calls since " + ts(resp.GetSince())
	}
	fmt.Fprintf(w, "observe report: %s (%d executions read)\n", scope, resp.GetScanned())
	if resp.GetTruncated() {
		fmt.Fprintln(w, "  the scan stopped at its bound before reaching the start: older calls are not counted; narrow --since")
	}
	if len(resp.GetTools()) == 0 {
		fmt.Fprintln(w, "no tool is in observe mode and no observed call was found (set mode: observe on a tool, target or upstream in the catalog)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tMODE\tCALLS\tWOULD ATTACH\tREACHED TWICE\tNEW REQUEST ID\tNEW SESSION\tCONCURRENT\tUNCERTAIN\tAPPROVAL\tGAP MIN/MEDIAN/MAX\tNEXT")
	for _, r := range resp.GetTools() {
		gap := "-"
		if r.GetWouldAttach() > 0 {
			gap = seconds(r.GetGapMinSeconds()) + "/" + seconds(r.GetGapMedianSeconds()) + "/" + seconds(r.GetGapMaxSeconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", r.GetTool(), or(r.GetMode(), "-"), r.GetCalls(), r.GetWouldAttach(),
			r.GetReachedTwice(), r.GetNewRequestId(), r.GetNewSession(), r.GetConcurrent(), r.GetWouldHoldUncertain(), r.GetWouldNeedApproval(), gap, r.GetNextStep())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(resp.GetPairs()) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nwould-attach pairs, newest first (latch exec explain ID tells each one's story):")
	for _, p := range resp.GetPairs() {
		var how []string
		if p.GetReachedTwice() {
			how = append(how, "reached the target twice")
		}
		if p.GetConcurrent() {
			how = append(how, "while the first was in flight")
		}
		if p.GetNewSession() {
			how = append(how, "in a new MCP session")
		}
		if p.GetNewRequestId() {
			how = append(how, "with a new JSON-RPC id")
		}
		fmt.Fprintf(w, "  %s %s: would have attached to %s (%s) %s later", p.GetTool(), p.GetExecutionId(), p.GetPriorExecutionId(),
			lifecycle.Name(p.GetPriorState()), seconds(p.GetGapSeconds()))
		if len(how) > 0 {
			fmt.Fprintf(w, "; %s", strings.Join(how, ", "))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// seconds prints a gap the way durations print, to the millisecond.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
