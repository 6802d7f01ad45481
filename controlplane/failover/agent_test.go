package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// caller performs one agent call and reports the execution the control
// plane acknowledged (ok false: no acknowledgement, e.g. no replica
// reachable within the call's bound).
type caller func(ctx context.Context, actor, tool, intent string) (ack ack, ok bool, err error)

// grpcCaller submits straight to the replicas' API sockets, trying each
// in turn (what a front that knows every replica does), and waits for the
// execution to come to rest in the same call (wait_ms).
func (c *cluster) grpcCaller(t *testing.T) caller {
	clients := make([]controlplanev1.ControlPlaneClient, len(c.replicas))
	for i, r := range c.replicas {
		clients[i] = r.client(t)
	}
	var mu sync.Mutex
	next := 0
	return func(ctx context.Context, actor, tool, intent string) (ack, bool, error) {
		args, _ := json.Marshal(map[string]string{"intent": intent})
		var lastErr error
		for ctx.Err() == nil {
			mu.Lock()
			i := next
			mu.Unlock()
			sctx, cancel := context.WithTimeout(ctx, dispatchTimeout+settle+5*time.Second)
			r, err := clients[i].Submit(sctx, &controlplanev1.SubmitRequest{Actor: actor, Tool: tool, Arguments: args, WaitMs: int64((dispatchTimeout + time.Second) / time.Millisecond)})
			cancel()
			if err == nil && r.GetExecution().GetId() != "" {
				return ack{ID: r.GetExecution().GetId(), Intent: intent, State: r.GetExecution().GetState(), At: time.Now()}, true, nil
			}
			lastErr = err
			if err != nil && status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled {
				return ack{}, false, fmt.Errorf("Submit(%s) on %s: %w", intent, c.replicas[i].name, err)
			}
			mu.Lock()
			if next == i {
				next = (i + 1) % len(clients)
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		return ack{}, false, lastErr
	}
}

// load runs agents that call until stop is closed or each made maxCalls
// calls. Each call is a new intent (a held one with probability held);
// an answer in a state that is not yet final is re-issued (it must attach)
// up to 5 times. It returns, once stopped, every acknowledgement.
type load struct {
	mu    sync.Mutex
	acks  []ack
	errs  []string
	stop  chan struct{}
	wg    sync.WaitGroup
	calls int
}

func startLoad(agents int, call caller, seed int64, held float64, maxCalls int) *load {
	l := &load{stop: make(chan struct{})}
	tools := []string{toolIdem, toolStatus, toolReview}
	for a := range agents {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(a)))
			actor := actors[a%len(actors)]
			for n := range maxCalls {
				select {
				case <-l.stop:
					return
				default:
				}
				intent := fmt.Sprintf("g%d_%d_%d", seed%100000, a, n)
				if rng.Float64() < held {
					intent += "_h"
				}
				tool := tools[rng.IntN(len(tools))]
				for try := range 6 {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					k, ok, err := call(ctx, actor, tool, intent)
					cancel()
					l.mu.Lock()
					l.calls++
					if ok {
						l.acks = append(l.acks, k)
					} else {
						l.errs = append(l.errs, fmt.Sprintf("%s try %d: %v", intent, try, err))
					}
					l.mu.Unlock()
					if ok && !unsettled(k.State) {
						break
					}
					stopped := false
					select {
					case <-l.stop:
						stopped = true
					case <-time.After(time.Duration(100+rng.IntN(400)) * time.Millisecond):
					}
					if stopped {
						break
					}
				}
			}
		}()
	}
	return l
}

// count returns how many acknowledgements arrived so far, and how many
// of them after since.
func (l *load) count(since time.Time) (all, after int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.acks {
		if a.At.After(since) {
			after++
		}
	}
	return len(l.acks), after
}

// waitAcks waits (bounded) until n acknowledgements arrived after since.
func (l *load) waitAcks(t *testing.T, n int, since time.Time, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if _, after := l.count(since); after >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, after := l.count(since)
	t.Fatalf("only %d acknowledged calls within %s, want %d: agents cannot get through", after, bound, n)
}

// finish stops the agents and returns their acknowledgements.
func (l *load) finish(t *testing.T) []ack {
	close(l.stop)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("agents did not stop within 90s")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) > 0 {
		t.Logf("%d of %d calls got no acknowledgement (retried); first: %s", len(l.errs), l.calls, l.errs[0])
	}
	return append([]ack(nil), l.acks...)
}

// acceptedTimes returns the accepted_at of every acknowledged execution,
// by asking the control plane.
func acceptedTimes(t *testing.T, op controlplanev1.ControlPlaneClient, acks []ack) []time.Time {
	var out []time.Time
	seen := map[string]bool{}
	for _, a := range acks {
		if seen[a.ID] {
			continue
		}
		seen[a.ID] = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := op.Get(ctx, &controlplanev1.GetRequest{ExecutionId: a.ID})
		cancel()
		if err == nil && r.GetExecution().GetAcceptedAt() != nil {
			out = append(out, r.GetExecution().GetAcceptedAt().AsTime())
		}
	}
	return out
}
