package channels_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/internal/testing/enginetest"
	"github.com/latchhq/latch/internal/testing/example/queuekind"
	"github.com/latchhq/latch/internal/testing/testlog"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// queueCatalog uses the queue kind's own keys (queue: on the target,
// publish: on the tool) beside a built-in http target.
const queueCatalog = `
targets:
  jobs: {channel: queue, queue: builds}
  api: {channel: http, base_url: "https://api.example.test"}
tools:
  enqueue:
    description: Enqueue a job.
    input_schema: {type: object, required: [job], properties: {job: {type: string}}}
    target: jobs
    publish: "build {{job}}"
    replay: status_query
  ping:
    target: api
    request: {method: GET, path: /ping}
    replay: read_only
`

// TestNewKindEndToEnd: a channel kind added as one package
// (internal/testing/example/queuekind) and one registration line is accepted by the
// catalog loader with its own keys, built by the registry, and serves a
// call through the engine: Submit, dispatch (outcome unknown), recovery
// through its Query, the result recorded and journaled; a retry attaches.
func TestNewKindEndToEnd(t *testing.T) {
	broker := queuekind.NewBroker()
	reg, err := channels.NewRegistry(append(channels.BuiltIn(), queuekind.Kind(broker))...) // the registration line
	if err != nil {
		t.Fatal(err)
	}
	cat, err := reg.Catalog().Parse("queue.yaml", []byte(queueCatalog))
	if err != nil {
		t.Fatalf("Parse(queue.yaml) = %v", err)
	}
	if got, want := cat.Targets["jobs"].Spec, (queuekind.Target{Topic: "builds"}); got != want {
		t.Errorf("target jobs: Spec = %#v, want %#v", got, want)
	}
	set, err := reg.Build(channels.Deps{Logger: testlog.New(t, hclog.Debug)})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if set.Channels[queuekind.Channel] != engine.Channel(broker) || set.Channels[tools.ChannelHTTP] == nil {
		t.Fatalf("Build: channels %v, want the broker under queue beside the built-ins", slices.Sorted(func(yield func(tools.Channel) bool) {
			for c := range set.Channels {
				if !yield(c) {
					return
				}
			}
		}))
	}

	st, e := enginetest.Start(t, memkv.New(), cat, set.Channels)

	submit := func() *engine.SubmitResult {
		t.Helper()
		r, err := e.Submit(t.Context(), engine.SubmitInput{Actor: "alice", Tool: "enqueue", Arguments: json.RawMessage(`{"job":"42"}`)})
		if err != nil {
			t.Fatalf("Submit(enqueue) = %v", err)
		}
		return r
	}
	id := submit().Execution.GetId()
	enginetest.AwaitCompleted(t, e, id, "alice") // recovered through Query
	x, res, err := e.Get(id, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if x.GetChannel() != "queue" || x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("Get(%s) = channel %q, outcome %v; want queue, succeeded", id, x.GetChannel(), x.GetOutcome())
	}
	if res.GetSummary() != "enqueued as m-build 42" {
		t.Errorf("result summary = %q, want the broker's answer for the rendered message", res.GetSummary())
	}
	if intent := string(x.GetCanonicalIntent()); !strings.Contains(intent, `"target":"queue://builds"`) || !strings.Contains(intent, `"build {{job}}"`) {
		t.Errorf("canonical intent %s does not carry the queue kind's identity", intent)
	}
	hist, err := st.History(id)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(hist); n == 0 || hist[n-1].GetTo() != recordv1.State_STATE_COMPLETED || hist[n-1].GetExecution().GetChannel() != "queue" {
		t.Errorf("journal of %s = %d entries ending %v, want one ending in completed on channel queue", id, n, hist)
	}
	if again := submit(); again.Execution.GetId() != id || again.Disposition != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Errorf("retry = %s %v, want attached to %s", again.Execution.GetId(), again.Disposition, id)
	}
	if n := broker.Count(id); n != 1 {
		t.Errorf("published %d times, want 1 (recovery queries, never re-sends, a status_query tool)", n)
	}
}

// TestNewKindCatalogRules: the queue kind's keys are checked by the kind,
// with the loader's file:line problems, and no other kind accepts them.
func TestNewKindCatalogRules(t *testing.T) {
	reg, err := channels.NewRegistry(append(channels.BuiltIn(), queuekind.Kind(queuekind.NewBroker()))...)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"queue required", "targets:\n  jobs: {channel: queue}\ntools:\n  t: {target: jobs, publish: x, replay: review}\n",
			"q.yaml:2: target jobs: queue is required (the broker's topic)"},
		{"bad topic", "targets:\n  jobs:\n    channel: queue\n    queue: a/b\ntools:\n  t: {target: jobs, publish: x, replay: review}\n",
			`q.yaml:4: target jobs: queue "a/b" must not contain /`},
		{"key of another kind", "targets:\n  jobs: {channel: queue, queue: b, base_url: \"https://x.test\"}\ntools:\n  t: {target: jobs, publish: x, replay: review}\n",
			"q.yaml:2: target jobs: base_url does not apply to queue targets"},
		{"queue key on http", "targets:\n  api: {channel: http, base_url: \"https://x.test\", queue: b}\ntools:\n  t: {target: api, request: {method: GET, path: /}, replay: read_only}\n",
			"q.yaml:2: target api: queue does not apply to http targets"},
		{"publish on http", "targets:\n  api: {channel: http, base_url: \"https://x.test\"}\ntools:\n  t:\n    target: api\n    request: {method: GET, path: /}\n    publish: x\n    replay: read_only\n",
			"q.yaml:7: tool t: publish does not apply to HTTP tools (target api is http); use request:"},
		{"request on queue", "targets:\n  jobs: {channel: queue, queue: b}\ntools:\n  t:\n    target: jobs\n    publish: x\n    request: {method: GET, path: /}\n    replay: review\n",
			"q.yaml:7: tool t: request does not apply to queue tools (target jobs is queue); its keys are publish"},
		{"publish on an upstream tool", "upstreams:\n  tr: {transport: stdio, command: [/bin/tr]}\ntools:\n  tr.t:\n    upstream: tr\n    tool: t\n    publish: x\n    replay: review\n",
			"q.yaml:7: tool tr.t: publish does not apply to upstream tools: the upstream defines the tool and its input schema (latch catalog upstream-tools shows them)"},
		{"publish required", "targets:\n  jobs: {channel: queue, queue: b}\ntools:\n  t: {target: jobs, replay: review}\n",
			"q.yaml:4: tool t: publish is required (the message, a template)"},
		{"template checked", "targets:\n  jobs: {channel: queue, queue: b}\ntools:\n  t: {target: jobs, publish: \"{{nope}}\", replay: review}\n",
			"q.yaml:4: tool t: publish: {{nope}} names no property of input_schema"},
		{"replay the kind cannot back", "targets:\n  jobs: {channel: queue, queue: b}\ntools:\n  t:\n    target: jobs\n    publish: x\n    replay: idempotency_key\n",
			"q.yaml:7: tool t: replay idempotency_key does not apply to queue tools: use status_query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := reg.Catalog().Parse("q.yaml", []byte(tt.yaml))
			var le *tools.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("Parse = %v, want a *LoadError", err)
			}
			var got []string
			for _, p := range le.Problems {
				got = append(got, p.String())
			}
			if !slices.Contains(got, tt.want) {
				t.Errorf("Parse problems = %q, want one %q", got, tt.want)
			}
		})
	}
	if _, err := tools.Parse("q.yaml", []byte(queueCatalog)); err == nil || !strings.Contains(err.Error(), `unknown channel "queue" (want http, ssh, local)`) {
		t.Errorf("tools.Parse (built-in kinds only) = %v, want the queue channel unknown", err)
	}
}

// TestBuiltInIsToolsBuiltIn: the registry's built-in kinds are exactly the
// catalog kinds tools.Load accepts, in its order.
func TestBuiltInIsToolsBuiltIn(t *testing.T) {
	var got []tools.Channel
	for _, k := range channels.BuiltIn() {
		for _, ck := range k.Catalog {
			got = append(got, ck.Channel())
		}
	}
	var want []tools.Channel
	for _, k := range tools.BuiltInKinds() {
		want = append(want, k.Channel())
	}
	if !slices.Equal(got, want) {
		t.Errorf("channels.BuiltIn() serves %v, want tools.BuiltInKinds() %v", got, want)
	}
	if _, err := channels.NewRegistry(append(channels.BuiltIn(), channels.BuiltIn()[0])...); err == nil {
		t.Error("NewRegistry with http twice = nil error, want the duplicate refused")
	}
}
