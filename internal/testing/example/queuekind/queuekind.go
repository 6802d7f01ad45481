// Package queuekind is a channel kind Latch does not ship, written only
// against the exported seams (tools.Kind, engine.Channel, channels.Kind) as
// a new kind's package would be: a target is a message queue (queue:, the
// broker's topic), a tool's action the message it publishes (publish:, a
// template). The channels tests register it with one line and run a call
// through it end to end. Tests only.
package queuekind

import (
	"context"
	"strings"
	"sync"

	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/controlplane/engine"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Channel is the kind's name.
const Channel tools.Channel = "queue"

// Target is a queue target's settings (tools.Target.Spec).
type Target struct{ Topic string }

// Action is a queue tool's action (tools.Tool.Action).
type Action struct{ Publish string }

// Catalog is the kind's catalog half.
type Catalog struct{}

var _ tools.Kind = Catalog{}

func (Catalog) Channel() tools.Channel { return Channel }
func (Catalog) TargetKeys() []string   { return []string{"channel", "queue", "timeout", "settle"} }
func (Catalog) ToolKeys() []string     { return []string{"publish"} }

// ParseTarget: queue is required, a topic name without "/".
func (Catalog) ParseTarget(s *tools.TargetSpec) {
	if !s.Require("queue", "the broker's topic") {
		return
	}
	if topic, ok := s.String("queue"); ok {
		if strings.Contains(topic, "/") {
			s.Problemf("queue", "queue %q must not contain /", topic)
			return
		}
		s.Target.Spec = Target{Topic: topic}
	}
}

// ParseTool: publish is required; the broker deduplicates by message key
// and answers for it, so the kind backs every replay class but
// idempotency_key (nothing re-sends a publish).
func (Catalog) ParseTool(s *tools.ToolSpec) {
	s.ReportForeign()
	if !s.Require("publish", "the message, a template") {
		return
	}
	if msg, ok := s.Template("publish"); ok {
		s.Tool.Action = Action{Publish: msg}
	}
	if s.ReplayOK && s.Tool.Replay == tools.ReplayIdempotencyKey {
		s.Problemf("replay", "replay idempotency_key does not apply to queue tools: use status_query")
	}
}

// Broker is the kind's engine.Channel: an in-memory broker whose ack of
// the first publish is lost (outcome unknown), answering by dedup key.
type Broker struct {
	mu        sync.Mutex
	published map[string]int // execution ID -> publishes
	acked     map[string]string
}

var _ engine.Channel = (*Broker)(nil)

// NewBroker returns an empty broker.
func NewBroker() *Broker {
	return &Broker{published: map[string]int{}, acked: map[string]string{}}
}

// Identity: the topic and the message template, never its arguments.
func (b *Broker) Identity(tool *tools.Tool, target *tools.Target) engine.Identity {
	return engine.Identity{Target: "queue://" + target.Spec.(Target).Topic, Method: "publish", Command: []string{tool.Action.(Action).Publish}}
}

// Dispatch publishes the rendered message with the execution ID as its
// dedup key; the broker's ack is lost.
func (b *Broker) Dispatch(ctx context.Context, c engine.Call) engine.Attempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := c.Execution.GetId()
	b.published[id]++
	msg := c.Tool.Action.(Action).Publish
	for k, v := range c.Arguments {
		if s, ok := v.(string); ok {
			msg = strings.ReplaceAll(msg, "{{"+k+"}}", s)
		}
	}
	b.acked[id] = "m-" + msg
	return engine.Attempt{Class: engine.Unknown, Reason: "broker connection dropped before its ack"}
}

// Query asks the broker by dedup key.
func (b *Broker) Query(ctx context.Context, c engine.Call) engine.Attempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	msg, ok := b.acked[c.Execution.GetId()]
	if !ok {
		return engine.Attempt{Class: engine.Absent, Reason: "no message under this dedup key"}
	}
	return engine.Attempt{
		Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Reason: "broker holds message " + msg,
		Result: &recordv1.Result{Summary: "enqueued as " + msg, Body: []byte(`{"message_id":"` + msg + `"}`)},
	}
}

// Kind is the kind's registration: its catalog half and its channel, b.
func Kind(b *Broker) channels.Kind {
	return channels.Kind{
		Catalog: []tools.Kind{Catalog{}},
		New:     func(channels.Deps) (engine.Channel, func(), error) { return b, nil, nil },
	}
}

// Count is how many times the execution's message was published.
func (b *Broker) Count(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.published[id]
}
