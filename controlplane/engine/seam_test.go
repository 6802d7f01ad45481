package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/internal/testing/enginetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// queueChannel is a channel the engine has never heard of: it publishes a
// job to a message queue. It is written only against the engine.Channel
// seam (exported API, package engine_test), as a new channel's package
// would be, to prove that adding a channel touches no engine code (doc.go).
type queueChannel struct {
	mu        sync.Mutex
	published map[string]int // execution ID -> publishes
	acked     map[string]string
}

const queueChannelName tools.Channel = "queue"

// Identity: the queue and the job kind, never the job's arguments.
func (q *queueChannel) Identity(tool *tools.Tool, target *tools.Target) engine.Identity {
	return engine.Identity{Target: "queue://" + target.Name, Method: "publish", Command: tool.Command[:1]}
}

// Dispatch publishes with the execution ID as the message's dedup key; the
// broker's ack is lost on the first publish (outcome unknown).
func (q *queueChannel) Dispatch(ctx context.Context, c engine.Call) engine.Attempt {
	q.mu.Lock()
	defer q.mu.Unlock()
	id := c.Execution.GetId()
	q.published[id]++
	q.acked[id] = "m-" + c.Arguments["job"].(string)
	return engine.Attempt{Class: engine.Unknown, Reason: "broker connection dropped before its ack"}
}

// Query asks the broker by dedup key.
func (q *queueChannel) Query(ctx context.Context, c engine.Call) engine.Attempt {
	q.mu.Lock()
	defer q.mu.Unlock()
	msg, ok := q.acked[c.Execution.GetId()]
	if !ok {
		return engine.Attempt{Class: engine.Absent, Reason: "no message under this dedup key"}
	}
	return engine.Attempt{
		Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Reason: "broker holds message " + msg,
		Result: &recordv1.Result{Summary: "enqueued as " + msg, Body: []byte(`{"message_id":"` + msg + `"}`)},
	}
}

var _ engine.Channel = (*queueChannel)(nil)

// The catalog half of a new kind (its own target and tool keys) is
// controlplane/channels' TestNewKindEndToEnd; this engine-level test stands
// in for it by loading a local target and renaming its channel.
const queueCatalog = `
targets:
  jobs: {channel: local, hostagent_socket: /run/unused.sock}
tools:
  enqueue:
    description: Enqueue a job.
    input_schema: {type: object, required: [job], properties: {job: {type: string}}}
    target: jobs
    command: [/usr/bin/enqueue, "{{job}}"]
    positional_after_double_dash: [job]
    replay: status_query
`

// TestNewChannelThroughTheSeam: a channel registered in Config.Channels
// under a name the engine does not know is dispatched, recovered and
// fingerprinted through the seam alone: its identity is in the canonical
// intent, its result is stored as it gave it, target_status is 0 (its
// answers have no status code), and a retry of the same call attaches.
func TestNewChannelThroughTheSeam(t *testing.T) {
	cat, err := tools.Parse("queue.yaml", []byte(queueCatalog))
	if err != nil {
		t.Fatal(err)
	}
	cat.Targets["jobs"].Channel = queueChannelName
	q := &queueChannel{published: map[string]int{}, acked: map[string]string{}}
	_, e := enginetest.Start(t, memkv.New(), cat, map[tools.Channel]engine.Channel{queueChannelName: q})

	submit := func() *engine.SubmitResult {
		t.Helper()
		r, err := e.Submit(t.Context(), engine.SubmitInput{Actor: "alice", Tool: "enqueue", Arguments: json.RawMessage(`{"job":"42"}`)})
		if err != nil {
			t.Fatalf("Submit(enqueue) = %v", err)
		}
		return r
	}
	first := submit()
	id := first.Execution.GetId()
	enginetest.AwaitCompleted(t, e, id, "alice") // recovered through Query
	x, res, err := e.Get(id, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if x.GetChannel() != "queue" || x.GetTargetStatus() != 0 || x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("Get(%s) = channel %q, target_status %d, outcome %v; want queue, 0, succeeded", id, x.GetChannel(), x.GetTargetStatus(), x.GetOutcome())
	}
	if res.GetSummary() != "enqueued as m-42" || res.GetExited() || res.GetStatus() != 0 {
		t.Errorf("result = %v, want the queue's summary and neither exited nor a status", res)
	}
	if intent := string(x.GetCanonicalIntent()); !strings.Contains(intent, `"target":"queue://jobs"`) || !strings.Contains(intent, `"method":"publish"`) {
		t.Errorf("canonical intent %s does not carry the queue channel's identity", intent)
	}
	again := submit()
	if again.Execution.GetId() != id || again.Disposition != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Errorf("retry = %s %v, want attached to %s", again.Execution.GetId(), again.Disposition, id)
	}
	q.mu.Lock()
	n := q.published[id]
	q.mu.Unlock()
	if n != 1 {
		t.Errorf("published %d times, want 1 (recovery queries, never re-sends, a status_query tool)", n)
	}
}

// TestUnservedChannelIsRefusedAtSubmit: a tool whose target's channel no
// Channel serves cannot be fingerprinted (the channel supplies its
// identity), so Submit refuses it before anything is stored.
func TestUnservedChannelIsRefusedAtSubmit(t *testing.T) {
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cat, err := tools.Parse("queue.yaml", []byte(queueCatalog))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := fingerprint.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: st, Catalog: cat, Fingerprinter: fp})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.Submit(t.Context(), engine.SubmitInput{Actor: "alice", Tool: "enqueue", Arguments: json.RawMessage(`{"job":"42"}`)})
	if !errors.Is(err, engine.ErrUnknownTool) || !strings.Contains(err.Error(), `channel "local"`) {
		t.Errorf("Submit(enqueue) with no local channel = %v, want ErrUnknownTool naming the channel", err)
	}
	if n := st.JournalSize(); n != 0 {
		t.Errorf("journal holds %d records after the refusal, want 0", n)
	}
}
