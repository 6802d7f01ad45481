package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/storetest"
	"github.com/latchhq/latch/internal/testbin"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const stateCatalog = `
targets:
  api: {channel: http, base_url: "http://127.0.0.1:1", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  deploy:
    description: Deploy.
    input_schema: {type: object, required: [version], properties: {version: {type: string}}}
    target: api
    request: {method: POST, path: /deploy, body: {version: "{{version}}"}}
    replay: idempotency_key
    attach_window: 1h
`

// answering is a channel whose target always answers 201.
type answering struct{}

func (answering) Dispatch(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED,
		Result: &recordv1.Result{Status: 201, Body: []byte(`{"ok":true}`)}, Reason: "201"}
}

func (answering) Query(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Unsupported, Reason: "no status endpoint"}
}

func (answering) Identity(_ *tools.Tool, t *tools.Target) engine.Identity {
	return engine.Identity{Target: t.BaseURL}
}

func stateConfig(t *testing.T, data string, fullUpTo int64) Config {
	if _, err := tools.Parse("c.yaml", []byte(stateCatalog)); err != nil {
		t.Fatal(err)
	}
	return Config{DataDir: data, CatalogSource: catalog.Bytes("c.yaml", []byte(stateCatalog)), Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: answering{}},
		FullStateCheckUpTo: fullUpTo}
}

// TestStateCheckAtStartAndInTheBackground: a forged result of a settled
// execution stops New when start-up checks all state, and, when start-up
// checks only the unsettled executions (a large store), stops Run through
// the background pass; both name the execution and the command to run.
func TestStateCheckAtStartAndInTheBackground(t *testing.T) {
	data := t.TempDir()
	srv, err := New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	r, err := srv.Engine.Submit(ctx, engine.SubmitInput{Actor: "alice", Tool: "deploy", Arguments: []byte(`{"version":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Execution.GetId()
	testbin.Eventually(t, "execution "+id+" to complete", func() bool {
		x, err := srv.Store.Execution(id)
		return err == nil && x.GetState() == recordv1.State_STATE_COMPLETED
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	kv, err := store.OpenBadger(DBDir(data), store.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.Forge(kv, storetest.ResultBody, id, ""); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	wantIn := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "latch audit verify "+data) {
			t.Errorf("%s = %v, want ErrStateMismatch naming %s and `latch audit verify %s`", what, err, id, data)
		}
	}
	_, err = New(stateConfig(t, data, 0))
	wantIn("New on a forged small store", err)

	srv, err = New(stateConfig(t, data, -1))
	if err != nil {
		t.Fatalf("New with the unsettled start-up scope: %v (the forged execution is settled: the background pass finds it)", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wantIn("Run with the background pass", srv.Run(ctx))
}

// TestPlantedTokenRefusedAtStart: a token written into a stopped store by
// hand (record and hash index, no journal record) stops New, naming the
// token; a token the control plane made passes.
func TestPlantedTokenRefusedAtStart(t *testing.T) {
	data := t.TempDir()
	srv, err := New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Tokens.Create(context.Background(), "alice", 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	srv, err = New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatalf("New with a token the control plane made: %v", err)
	}
	srv.Store.Close()

	kv, err := store.OpenBadger(DBDir(data), store.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	planted := "tok_" + sum[:12]
	v, err := proto.Marshal(&recordv1.AgentToken{Id: planted, Actor: "mallory", Sha256: sum, Origin: "api", CreatedAt: timestamppb.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]store.Write{{Key: []byte("t/" + planted), Value: v}, {Key: []byte("h/" + sum), Value: []byte(planted)}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()
	_, err = New(stateConfig(t, data, 0))
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), planted) {
		t.Errorf("New with a planted token = %v, want ErrStateMismatch naming %s", err, planted)
	}
}
