package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// waitsFor says what an execution awaiting approval waits for, and the
// command that gives it.
func waitsFor(x *recordv1.Execution) string {
	if lifecycle.ReasonOf(x) == recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION && x.GetSessionId() != "" {
		return "session authorization: latch session authorize " + x.GetSessionId()
	}
	return "an operator's decision: latch approvals approve " + x.GetId() + " (or deny " + x.GetId() + " --reason R)"
}

// watchPoll is how often `exec watch` lists executions to find new ones;
// each one found is then followed through the API's Watch stream.
const watchPoll = time.Second

// execWatch is `latch exec watch [--state S] [--json] [ID]`: it prints a line
// whenever a followed execution changes state, until interrupted. With an
// ID it follows that execution until it is terminal; without, it follows
// every execution that is not terminal, and new ones as they arrive.
func execWatch(ctx context.Context, env *Env, fs *flag.FlagSet, t *target, args []string) error {
	state := fs.String("state", "", "print only changes into this state (e.g. outcome_unknown, needs_review, awaiting_approval)")
	actor := fs.String("actor", "", "only this actor's executions")
	tool := fs.String("tool", "", "only this tool")
	asJSON := jsonFlag(fs, "watch", "print one JSON line per change (the execution's record)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("exec watch takes at most one execution ID")
	}
	var only recordv1.State
	if *state != "" {
		if only, err = lifecycle.Parse(*state); err != nil {
			return usagef("--state: %v", err)
		}
	}
	c, closeFn, err := t.dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	w := &watcher{c: c, out: env.Stdout, only: only, json: *asJSON, following: map[string]bool{}, last: map[string]recordv1.State{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(pos) == 1 {
		return w.follow(ctx, pos[0])
	}
	if !*asJSON {
		fmt.Fprintln(env.Stderr, "following executions; Ctrl-C to stop")
	}
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	for {
		resp, err := c.List(ctx, &controlplanev1.ListRequest{Actor: *actor, Tool: *tool, Limit: 200})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return rpcError(err)
		}
		for _, x := range resp.GetExecutions() {
			if w.start(x) {
				go w.follow(ctx, x.GetId()) //nolint:errcheck // each stream reports through print
			}
		}
		select {
		case <-ctx.Done():
			w.wg.Wait()
			return nil
		case <-tick.C:
		}
	}
}

type watcher struct {
	c    controlplanev1.ControlPlaneClient
	out  io.Writer
	only recordv1.State
	json bool

	mu        sync.Mutex
	following map[string]bool
	last      map[string]recordv1.State
	wg        sync.WaitGroup
}

// start reports whether x is new to the watcher and worth following (not
// terminal, or never printed).
func (w *watcher) start(x *recordv1.Execution) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.following[x.GetId()] {
		return false
	}
	if _, seen := w.last[x.GetId()]; seen && lifecycle.Terminal(x.GetState()) {
		return false
	}
	if lifecycle.Terminal(x.GetState()) {
		w.last[x.GetId()] = x.GetState()
		return false // finished before we looked: nothing will change
	}
	w.following[x.GetId()] = true
	w.wg.Add(1)
	return true
}

// follow streams one execution's changes until it is terminal or ctx ends.
func (w *watcher) follow(ctx context.Context, id string) error {
	defer func() {
		w.mu.Lock()
		if w.following[id] {
			delete(w.following, id)
			w.wg.Done()
		}
		w.mu.Unlock()
	}()
	stream, err := w.c.Watch(ctx, &controlplanev1.WatchRequest{ExecutionId: id})
	if err != nil {
		return rpcError(err)
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			// The caller's deadline can end the stream from the server's
			// side (grpc-timeout) a moment before ctx says so here.
			if errors.Is(err, io.EOF) || ctx.Err() != nil || status.Code(err) == codes.Canceled || status.Code(err) == codes.DeadlineExceeded {
				return nil
			}
			return rpcError(err)
		}
		if x := m.GetExecution(); x != nil {
			w.print(x)
		}
	}
}

// print writes one line per state change of x.
func (w *watcher) print(x *recordv1.Execution) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.last[x.GetId()]; ok && prev == x.GetState() {
		return
	}
	w.last[x.GetId()] = x.GetState()
	if w.only != recordv1.State_STATE_UNSPECIFIED && x.GetState() != w.only {
		return
	}
	if w.json {
		_ = printJSON(w.out, recordOf(x))
		return
	}
	detail := outcomeName(x.GetOutcome())
	if x.GetState() == recordv1.State_STATE_AWAITING_APPROVAL {
		detail = "waits for " + waitsFor(x)
	} else if r := x.GetReason(); r != "" && !lifecycle.Observed(x.GetState()) {
		detail = r
	}
	at := x.GetUpdatedAt()
	if at == nil {
		at = x.GetAcceptedAt()
	}
	fmt.Fprintf(w.out, "%s  %s  %-17s  %s  %s  %s\n", ts(at), x.GetId(), lifecycle.Name(x.GetState()), x.GetTool(), x.GetActor(), detail)
}
