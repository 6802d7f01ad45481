package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// client is an agent calling one tool with one intent through the engine,
// as the API does for the MCP front: Submit, then wait for the execution to
// rest. Its behaviour is one of the fault suite's: call once and wait long;
// retry (a new request, as a client that lost its connection sends) after
// a short wait or an unknown outcome; two clients with one intent
// double-dispatch it.
type client struct {
	n        int
	intent   string
	tool     string
	patience time.Duration
	retries  int // calls after the first
	ready    bool
	goCh     chan struct{}
}

var simTools = []string{"deploy", "transfer", "charge", "migrate", "tracker.open_ticket"}

// addClient makes client i: its tool and intent, and its behaviour. A
// client shares the intent of the one before it with some chance (a
// double dispatch).
func (w *world) addClient(i int) {
	c := &client{n: i, goCh: make(chan struct{}, 1)}
	if i > 0 && w.rng.IntN(3) == 0 {
		prev := w.clients[i-1]
		c.tool, c.intent = prev.tool, prev.intent
	} else {
		c.tool, c.intent = simTools[w.rng.IntN(len(simTools))], fmt.Sprintf("i%d", i)
	}
	if w.rng.IntN(2) == 0 {
		c.patience, c.retries = 10*time.Minute, 0
	} else {
		c.patience, c.retries = time.Duration(1+w.rng.IntN(20))*time.Second, 1+w.rng.IntN(4)
	}
	w.tracef("  client %d: %s %s, patience %s, %d retries", i, c.tool, c.intent, c.patience, c.retries)
	w.clients = append(w.clients, c)
	go w.runClient(c)
}

// rests is what ends a client's wait: a settled state, or an unknown
// outcome the front reports as such.
func rests(x *recordv1.Execution) bool {
	return lifecycle.Settled(x.GetState()) || x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN
}

func (w *world) runClient(c *client) {
	args, _ := json.Marshal(map[string]string{"ref": c.intent})
	for call := 0; call <= c.retries; call++ {
		w.mu.Lock()
		c.ready = true
		w.mu.Unlock()
		select {
		case <-c.goCh:
		case <-w.stop:
			return
		}
		w.mu.Lock()
		g := w.live
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(g.ctx, c.patience)
		res, err := g.e.Submit(ctx, engine.SubmitInput{Actor: "agent", Tool: c.tool, Arguments: args})
		if err != nil {
			cancel()
			continue // the call failed: the client tries again, as an agent does
		}
		w.mu.Lock()
		w.acked[res.Execution.GetId()] = c.intent
		w.mu.Unlock()
		x := g.e.AwaitResting(ctx, res.Execution, rests)
		cancel()
		switch x.GetState() {
		case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED:
			w.mu.Lock()
			w.done[x.GetId()] = true
			w.mu.Unlock()
			return
		case recordv1.State_STATE_NOT_EXECUTED:
			// Latch says it did not happen: calling again is safe.
		case recordv1.State_STATE_NEEDS_REVIEW, recordv1.State_STATE_REJECTED, recordv1.State_STATE_CANCELLED:
			return
		}
	}
}
