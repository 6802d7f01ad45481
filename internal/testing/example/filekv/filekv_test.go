package filekv_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/backends"
	"github.com/latchhq/latch/internal/testing/enginetest"
	"github.com/latchhq/latch/internal/testing/example/filekv"
	"github.com/latchhq/latch/internal/testing/kvtest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

func open(t testing.TB, path string) *filekv.KV {
	t.Helper()
	kv, err := filekv.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestKVContract holds the file backend to the KV contract.
func TestKVContract(t *testing.T) {
	kvtest.Run(t, func(t testing.TB) backend.KV { return open(t, filepath.Join(t.TempDir(), "kv")) })
}

// TestReopenKeepsCommitsAndDropsATornBatch: what was committed is there
// after a reopen; a batch cut short by a crash is dropped, and the next
// commit follows the last whole one.
func TestReopenKeepsCommitsAndDropsATornBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv")
	kv := open(t, path)
	if err := kv.Commit([]backend.Write{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]backend.Write{{Key: []byte("a"), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 40, 1, 2}) // a torn batch
	f.Close()
	kv = open(t, path)
	if _, err := kv.Get([]byte("a")); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get(a) after reopen = %v, want ErrNotFound (deleted)", err)
	}
	if v, err := kv.Get([]byte("b")); err != nil || string(v) != "2" {
		t.Errorf("Get(b) after reopen = %q, %v; want 2", v, err)
	}
	if err := kv.Commit([]backend.Write{{Key: []byte("c"), Value: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()
	kv = open(t, path)
	defer kv.Close()
	if v, err := kv.Get([]byte("c")); err != nil || string(v) != "3" {
		t.Errorf("Get(c) after a torn batch and a commit = %q, %v; want 3", v, err)
	}
}

// echoChannel answers every dispatch with success.
type echoChannel struct{}

func (echoChannel) Identity(tool *tools.Tool, target *tools.Target) engine.Identity {
	return engine.Identity{Target: "echo://" + target.Name, Method: "run", Command: tool.Command[:1]}
}

func (echoChannel) Dispatch(_ context.Context, c engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Reason: "echoed",
		Result: &recordv1.Result{Summary: "echoed " + c.Arguments["job"].(string)}}
}

func (echoChannel) Query(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Absent, Reason: "never dispatched here"}
}

const catalog = `
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

// TestCarriesAnExecution: the backend, registered with one line and opened
// by its --store value like a built-in, carries the execution store: an
// engine submits and completes an execution on it, and after a restart
// (a new store and engine on the reopened file) the execution, its result
// and its journal are there and pass the state check.
func TestCarriesAnExecution(t *testing.T) {
	if err := backends.Register(backends.Kind{Name: "file", Takes: func(spec string) bool { return strings.HasPrefix(spec, "file:") }, Open: func(_ context.Context, spec, _ string, _ hclog.Logger) (backend.KV, error) {
		return filekv.Open(strings.TrimPrefix(spec, "file:"))
	}}); err != nil {
		t.Fatal(err)
	}
	spec := "file:" + filepath.Join(t.TempDir(), "kv")
	cat, err := tools.Parse("jobs.yaml", []byte(catalog))
	if err != nil {
		t.Fatal(err)
	}
	cat.Targets["jobs"].Channel = "echo"
	start := func() (*store.Store, *engine.Engine) {
		t.Helper()
		kv, err := backends.Open(t.Context(), spec, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return enginetest.Start(t, kv, cat, map[tools.Channel]engine.Channel{"echo": echoChannel{}})
	}
	st, e := start()
	r, err := e.Submit(t.Context(), engine.SubmitInput{Actor: "alice", Tool: "enqueue", Arguments: json.RawMessage(`{"job":"42"}`)})
	if err != nil {
		t.Fatalf("Submit(enqueue) = %v", err)
	}
	id := r.Execution.GetId()
	enginetest.AwaitCompleted(t, e, id, "alice")
	size := st.JournalSize()
	e.Close()
	st.Close()

	st, e = start()
	x, res, err := e.Get(id, "alice")
	if err != nil || x.GetState() != recordv1.State_STATE_COMPLETED || res.GetSummary() != "echoed 42" {
		t.Fatalf("after a restart Get(%s) = %v, %v, %v; want completed with the echoed result", id, x.GetState(), res, err)
	}
	if st.JournalSize() != size || size == 0 {
		t.Errorf("journal after a restart = %d entries, want the %d written", st.JournalSize(), size)
	}
	rep, err := st.CheckState(t.Context(), store.CheckAll)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Executions != 1 || rep.Results != 1 {
		t.Errorf("state check on the file backend = %v, want one execution and its result, no mismatch", rep)
	}
}
