package httpchannel

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/testbin"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const testCatalog = `
targets:
  api:
    channel: http
    base_url: "%s"
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/v1/releases/by-key/{execution_id}"}
    credential: deploy-token
  bare: {channel: http, base_url: "%s", allow_private: true}
tools:
  deploy_release:
    description: Deploy.
    input_schema: {type: object, required: [service, version, region], properties: {service: {type: string}, version: {type: string}, region: {type: string}}}
    target: api
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}", region: "{{region}}"}}
    replay: idempotency_key
  look:
    description: Look.
    target: bare
    request: {method: GET, path: /v1/releases/x}
    replay: read_only
`

type creds struct {
	locked bool
}

func (c creds) Get(name string) (vault.Credential, error) {
	if c.locked {
		return vault.Credential{}, vault.ErrLocked
	}
	return vault.Credential{Kind: vault.KindBearer, Fields: vault.Fields{"token": "tok-0123456789"}}, nil
}

func setup(t *testing.T, c creds) (*Channel, *demotarget.Server, *tools.Catalog) {
	demo := demotarget.New(demotarget.Config{Logger: hclog.NewNullLogger()})
	ts := httptest.NewServer(demo)
	t.Cleanup(ts.Close)
	cat, err := tools.Parse("c.yaml", []byte(fmt.Sprintf(testCatalog, ts.URL, ts.URL)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := httpdispatch.New(httpdispatch.Config{DefaultTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ch, err := New(Config{Dispatcher: d, Credentials: c})
	if err != nil {
		t.Fatal(err)
	}
	return ch, demo, cat
}

func callFor(cat *tools.Catalog, tool, id string, args map[string]any) engine.Call {
	tl := cat.Tools[tool]
	return engine.Call{Execution: &recordv1.Execution{Id: id}, Tool: tl, Target: cat.Targets[tl.Target], Arguments: args}
}

func TestDispatchAndQuery(t *testing.T) {
	ch, demo, cat := setup(t, creds{})
	ctx := context.Background()
	c := callFor(cat, "deploy_release", "act_1", map[string]any{"service": "api", "version": "1", "region": "eu"})
	if a := ch.Query(ctx, c); a.Class != engine.Absent {
		t.Errorf("Query before dispatch = %+v, want Absent (the target has no record)", a)
	}
	a := ch.Dispatch(ctx, c)
	if a.Class != engine.Observed || a.Outcome != recordv1.Outcome_OUTCOME_SUCCEEDED || a.Result.GetStatus() != 201 {
		t.Fatalf("Dispatch = %+v, want observed 201 succeeded", a)
	}
	if strings.Contains(string(a.Result.GetBody()), "tok-0123456789") {
		t.Error("the credential leaked into the stored result")
	}
	// A re-send under the same key (recovery) gets the stored answer.
	c.Recovery = true
	if a := ch.Dispatch(ctx, c); a.Class != engine.Observed || a.Result.GetStatus() != 201 {
		t.Errorf("replay with the same key = %+v, want the stored 201", a)
	}
	if a := ch.Query(ctx, c); a.Class != engine.Observed {
		t.Errorf("Query after dispatch = %+v, want Observed", a)
	}
	if demo.Effects(demotarget.KindRelease) != 1 {
		t.Errorf("effects = %d, want 1", demo.Effects(demotarget.KindRelease))
	}
	if a := ch.Query(ctx, callFor(cat, "look", "act_2", nil)); a.Class != engine.Unsupported {
		t.Errorf("Query on a target without a status endpoint = %+v, want Unsupported", a)
	}
}

func TestLockedVaultSendsNothing(t *testing.T) {
	ch, demo, cat := setup(t, creds{locked: true})
	a := ch.Dispatch(context.Background(), callFor(cat, "deploy_release", "act_3", map[string]any{"service": "api", "version": "1", "region": "eu"}))
	if a.Class != engine.NotSent || !strings.HasPrefix(a.Reason, "vault_locked") {
		t.Errorf("Dispatch with a locked vault = %+v, want NotSent vault_locked", a)
	}
	if demo.Requests() != 0 {
		t.Errorf("the target saw %d requests", demo.Requests())
	}
}

func TestInFlightReplayIsNotAnOutcome(t *testing.T) {
	ch, demo, cat := setup(t, creds{})
	demo.Hold() // the first request stays in flight until Release
	c := callFor(cat, "deploy_release", "act_4", map[string]any{"service": "api", "version": "2", "region": "eu"})
	done := make(chan engine.Attempt, 1)
	go func() { done <- ch.Dispatch(context.Background(), c) }()
	testbin.Eventually(t, "the first request to reach the target", func() bool { return demo.InFlight() > 0 })
	c.Recovery = true
	if a := ch.Dispatch(context.Background(), c); a.Class != engine.Unknown {
		t.Errorf("replay while the first is in flight = %+v, want Unknown (409 is no outcome)", a)
	}
	demo.Release()
	if a := <-done; a.Class != engine.Observed {
		t.Errorf("first dispatch = %+v", a)
	}
}

// TestSendEndsByItsRecordedTime: the exchange ends by the recorded send
// time plus the timeout (Call.Budget), which the settle point counts on: a
// send that starts after that sends nothing, one that starts late is cut
// short, whatever the dispatcher's own timeout.
func TestSendEndsByItsRecordedTime(t *testing.T) {
	ch, demo, cat := setup(t, creds{})
	c := callFor(cat, "deploy_release", "act_5", map[string]any{"service": "api", "version": "3", "region": "eu"})
	timeout := c.Tool.DispatchTimeout(c.Target)
	c.Delay = timeout
	if a := ch.Dispatch(context.Background(), c); a.Class != engine.NotSent || demo.Requests() != 0 {
		t.Fatalf("a send starting at its timeout = %+v with %d requests, want NotSent and none", a, demo.Requests())
	}
	demo.Hold()
	defer demo.Release()
	c.Delay = timeout - 200*time.Millisecond
	if a := ch.Dispatch(context.Background(), c); a.Class != engine.Unknown {
		t.Errorf("a late send the target holds = %+v, want Unknown once what is left of its timeout runs out", a)
	}
}
