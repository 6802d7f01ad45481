package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/latchhq/latch/controlplane/events"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// runEvents is latch events: the event outbox of the running control plane.
func runEvents(ctx context.Context, env *Env, args []string) error {
	sub, args, fs, t, err := adminCommand(env, "events", "list [--pending|--dead] | replay [ID...] | test SINK", args)
	if err != nil {
		return err
	}
	pending := fs.Bool("pending", false, "list: only events still to be delivered")
	dead := fs.Bool("dead", false, "list: only dead-lettered events")
	limit := fs.Int("limit", 100, "list: at most this many, newest first")
	asJSON := jsonFlag(fs, sub, "print the outbox as one JSON object", "list")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case sub == "list" && len(pos) != 0:
		return usagef("events list takes no arguments")
	case sub == "test" && len(pos) != 1:
		return usagef("events test needs one sink name (latch events list names them)")
	case sub != "list" && sub != "replay" && sub != "test":
		return usagef("events: unknown subcommand %q (list, replay, test)", sub)
	}
	c, closeFn, err := adminClient(ctx, t)
	if err != nil {
		return err
	}
	defer closeFn()
	switch sub {
	case "list":
		resp, err := c.ListEvents(ctx, &controlplanev1.ListEventsRequest{Pending: *pending, Dead: *dead, Limit: int32(*limit)})
		if err != nil {
			return rpcError(err)
		}
		if *asJSON {
			return writeJSON(env.Stdout, recordOf(resp)) // eventsListJSON
		}
		fmt.Fprintf(env.Stdout, "sinks: %s\n", or(strings.Join(resp.GetSinks(), ", "), "none configured"))
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tKIND\tEXECUTION/SESSION\tTIME\tDELIVERY")
		for _, ev := range resp.GetEvents() {
			var ds []string
			for _, d := range ev.GetDeliveries() {
				_, line := events.DescribeDelivery(d)
				ds = append(ds, d.GetSink()+": "+line)
			}
			if len(ds) == 0 {
				ds = []string{"no sink takes it"}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ev.GetId(), events.KindName(ev.GetKind()), or(ev.GetExecutionId(), ev.GetSessionId()), ts(ev.GetTime()), strings.Join(ds, "; "))
		}
		return tw.Flush()
	case "replay":
		resp, err := c.ReplayEvents(ctx, &controlplanev1.ReplayEventsRequest{Ids: pos})
		if err != nil {
			return rpcError(err)
		}
		fmt.Fprintf(env.Stdout, "%d events queued again (same IDs: receivers that keep webhook-id act once)\n", resp.GetRequeued())
		return nil
	default:
		resp, err := c.TestEventSink(ctx, &controlplanev1.TestEventSinkRequest{Sink: pos[0]})
		if err != nil {
			return rpcError(err)
		}
		if resp.GetError() != "" {
			return fmt.Errorf("sink %s: test event %s not delivered: %s", pos[0], resp.GetEventId(), resp.GetError())
		}
		fmt.Fprintf(env.Stdout, "sink %s answered %d to test event %s\n", pos[0], resp.GetStatus(), resp.GetEventId())
		return nil
	}
}
