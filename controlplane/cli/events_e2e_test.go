package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/pgtest"
	"github.com/latchhq/latch/internal/testing/testbin"
	"github.com/latchhq/latch/internal/testing/webhooktest"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const eventsCatalog = `
targets:
  releases:
    channel: http
    base_url: %s
    allow_private: true
    idempotency_header: Idempotency-Key
tools:
  deploy_release:
    description: Deploy.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}}}
    target: releases
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}"}}
    replay: idempotency_key
    events: [completed]
  gated_release:
    description: Deploy, approved.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}}}
    target: releases
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}"}}
    replay: idempotency_key
    approval: every_call
`

// TestEventsSurviveSIGKILL: latch serve (a real process) is SIGKILLed
// while a loopback HTTPS receiver holds a webhook delivery it has
// already recorded; after the restart every event reaches the receiver
// with a valid signature, and the one seen before the kill comes again
// under the same webhook-id.
func TestEventsSurviveSIGKILL(t *testing.T) {
	_, url := newTarget(t)
	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(fmt.Sprintf(eventsCatalog, url)), 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := webhooktest.New(t)
	data := t.TempDir()
	sink := []string{"--event-sink", "ops url=" + rcv.URL + " secret=ops-webhook allow_private=true ca_file=" + rcv.CAFile}
	p := startServe(t, data, catalog, sink...)
	var out bytes.Buffer
	if code := Main(context.Background(), &Env{Stdin: strings.NewReader(webhooktest.Secret + "\n"), Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }},
		[]string{"vault", "put", "ops-webhook", "--kind", "bearer", "--data", data}); code != 0 {
		t.Fatalf("vault put: exit %d: %s", code, out.String())
	}
	rcv.HoldNext()
	c := client(t, data)
	done, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, done.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	select {
	case <-rcv.Held():
	case <-time.After(60 * time.Second):
		t.Fatal("the completed event never reached the receiver")
	}
	gated, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "gated_release", Arguments: []byte(`{"service":"api","version":"2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, gated.GetExecution().GetId(), recordv1.State_STATE_AWAITING_APPROVAL)
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	rcv.Release()
	first, _, _ := rcv.Snapshot()

	startServe(t, data, catalog, sink...)
	testbin.Eventually(t, "both events delivered after the restart", func() bool {
		_, kinds, _ := rcv.Snapshot()
		got := map[string]bool{}
		for _, k := range kinds {
			got[k] = true
		}
		return got["latch.completed"] && got["latch.approval_requested"]
	})
	seen, kinds, bad := rcv.Snapshot()
	if bad != 0 {
		t.Errorf("%d deliveries failed signature checks", bad)
	}
	if len(first) != 1 {
		t.Fatalf("before the kill the receiver saw %v, want the one held delivery", first)
	}
	for id := range first {
		if seen[id] != 2 || kinds[id] != "latch.completed" {
			t.Errorf("the held event %s (%s) was seen %d times, want twice (same ID across the kill)", id, kinds[id], seen[id])
		}
	}
	if len(kinds) != 2 {
		t.Errorf("receiver saw IDs %v, want one per event", kinds)
	}
	outList, code := runCLI(t, "events", "list", "--data", data)
	if code != 0 || !strings.Contains(outList, "ops: delivered") || !strings.Contains(outList, "approval_requested") {
		t.Errorf("latch events list: exit %d:\n%s", code, outList)
	}
	outTest, code := runCLI(t, "events", "test", "ops", "--data", data)
	if code != 0 || !strings.Contains(outTest, "answered 204") {
		t.Errorf("latch events test ops: exit %d: %s", code, outTest)
	}
}

// TestEventsAcrossAReplicaFailover: two latch serve replicas on one
// PostgreSQL database, a loopback HTTPS receiver verifying signatures.
// The active is SIGKILLed while the receiver holds a delivery it has
// recorded, with another event still queued behind it; the standby takes
// over and delivers both: the held one again under the same webhook-id,
// every other ID once, nothing sent by the dead replica's successor before
// it held the lease.
func TestEventsAcrossAReplicaFailover(t *testing.T) {
	url := pgtest.URL(t)
	_, target := newTarget(t)
	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(fmt.Sprintf(eventsCatalog, target)), 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := webhooktest.New(t)
	sink := []string{"--event-sink", "ops url=" + rcv.URL + " secret=ops-webhook allow_private=true ca_file=" + rcv.CAFile}
	a, b := startPair(t, url, catalog, sink...)
	var out bytes.Buffer
	if code := Main(context.Background(), &Env{Stdin: strings.NewReader(webhooktest.Secret + "\n"), Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }},
		[]string{"vault", "put", "ops-webhook", "--kind", "bearer", "--data", a.data}); code != 0 {
		t.Fatalf("vault put: exit %d: %s", code, out.String())
	}
	rcv.HoldNext()
	c := client(t, a.data)
	done, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, done.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	select {
	case <-rcv.Held():
	case <-time.After(60 * time.Second):
		t.Fatal("the completed event never reached the receiver")
	}
	gated, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "gated_release", Arguments: []byte(`{"service":"api","version":"2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, gated.GetExecution().GetId(), recordv1.State_STATE_AWAITING_APPROVAL)
	kill(a.p)
	rcv.Release()
	first, _, _ := rcv.Snapshot()

	testbin.Eventually(t, "replica b to take over", func() bool { return serving(b.data) })
	testbin.Eventually(t, "both events delivered by replica b", func() bool {
		_, kinds, _ := rcv.Snapshot()
		got := map[string]bool{}
		for _, k := range kinds {
			got[k] = true
		}
		return got["latch.completed"] && got["latch.approval_requested"]
	})
	seen, kinds, bad := rcv.Snapshot()
	if bad != 0 {
		t.Errorf("%d deliveries failed signature checks", bad)
	}
	if len(first) != 1 {
		t.Fatalf("before the kill the receiver saw %v, want the one held delivery", first)
	}
	for id, n := range seen {
		want := 1
		if first[id] == 1 {
			want = 2 // recorded by the receiver, never recorded delivered by the killed replica
		}
		if n != want {
			t.Errorf("event %s (%s) was seen %d times, want %d", id, kinds[id], n, want)
		}
	}
	if len(kinds) != 2 {
		t.Errorf("receiver saw IDs %v, want one per event", kinds)
	}
	// The receiver has each event before replica b records it delivered.
	testbin.Eventually(t, "latch events list --pending on replica b to show nothing queued", func() bool {
		outList, code := runCLI(t, "events", "list", "--pending", "--data", b.data)
		return code == 0 && strings.Contains(outList, "sinks: ops") && !strings.Contains(outList, "evt_")
	})
}
