package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/controlplane/tokens"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const testCatalog = `
targets:
  api: {channel: http, base_url: "http://127.0.0.1:1", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  look:
    description: Look.
    input_schema: {type: object, properties: {what: {type: string}}}
    target: api
    request: {method: GET, path: /look}
    replay: read_only
  deploy:
    description: Deploy.
    input_schema: {type: object, properties: {v: {type: string}}}
    target: api
    request: {method: POST, path: /deploy}
    replay: idempotency_key
`

// answering is an HTTP channel whose target answers 200 to everything.
type answering struct{}

func (answering) Dispatch(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Result: &recordv1.Result{Status: 200}, Reason: "200"}
}

func (answering) Query(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Unsupported, Reason: "no status endpoint"}
}

func (answering) Identity(_ *tools.Tool, t *tools.Target) engine.Identity {
	return engine.Identity{Target: t.BaseURL}
}

type fixture struct {
	svc    *Service
	eng    *engine.Engine
	tokens *tokens.Service
	caller Caller
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := tools.Parse("c.yaml", []byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := fingerprint.New(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: st, Catalog: cat, CatalogVersion: "sha256:one", Fingerprinter: fp,
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: answering{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	ts, err := tokens.New(tokens.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{eng: e, tokens: ts}
	f.svc, err = New(Config{Engine: e, Tokens: ts, Caller: func(context.Context) Caller { return f.caller },
		FrontActors: FrontActors{"spiffe://latch/front-a": {"alice"}, "spiffe://latch/jwt-front": {"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSubmitActor: Submit's actor comes from the agent's credential, or
// from a caller allowed to act as the actor it names; never from a free
// string.
func TestSubmitActor(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	bob, bt, err := f.tokens.Create(ctx, "bob", 0)
	if err != nil {
		t.Fatal(err)
	}
	gone, _, _ := f.tokens.Create(ctx, "carol", 0)
	if _, err := f.tokens.Revoke(ctx, "carol", "test"); err != nil {
		t.Fatal(err)
	}
	anonymous := Caller{}
	operator := Caller{Identity: "unix", Operator: true}
	frontA := Caller{Identity: "spiffe://latch/front-a"}
	jwtFront := Caller{Identity: "spiffe://latch/jwt-front"}
	tests := []struct {
		name       string
		caller     Caller
		actor      string
		credential string
		wantActor  string
		wantCode   codes.Code
	}{
		{"token names the actor", anonymous, "", bob, "bob", codes.OK},
		{"token and the same actor", frontA, "bob", bob, "bob", codes.OK},
		{"token and another actor", operator, "alice", bob, "", codes.PermissionDenied},
		{"revoked token", operator, "", gone, "", codes.Unauthenticated},
		{"unknown token", operator, "", "latch_nope", "", codes.Unauthenticated},
		{"operator names an actor", operator, "dave", "", "dave", codes.OK},
		{"front bound to the actor", frontA, "alice", "", "alice", codes.OK},
		{"front bound to another actor", frontA, "bob", "", "", codes.PermissionDenied},
		{"front trusted for any actor (JWT)", jwtFront, "erin", "", "erin", codes.OK},
		{"anonymous caller names an actor", anonymous, "alice", "", "", codes.PermissionDenied},
		{"nothing at all", operator, "", "", "", codes.Unauthenticated},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.caller = tt.caller
			resp, err := f.svc.Submit(ctx, &controlplanev1.SubmitRequest{
				Actor: tt.actor, Credential: tt.credential, Tool: "look", Arguments: []byte(`{"what":"` + string(rune('a'+i)) + `"}`),
				Evidence: &recordv1.Evidence{TokenId: "tok_forged"},
			})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("Submit = %v, want %v", err, tt.wantCode)
			}
			if err != nil {
				return
			}
			x := resp.GetExecution()
			if x.GetActor() != tt.wantActor {
				t.Errorf("execution actor = %q, want %q", x.GetActor(), tt.wantActor)
			}
			wantToken := "tok_forged" // no credential: the caller's evidence, as sent
			if tt.credential != "" {
				wantToken = bt.GetId()
			}
			if x.GetEvidence().GetTokenId() != wantToken {
				t.Errorf("evidence token_id = %q, want %q", x.GetEvidence().GetTokenId(), wantToken)
			}
			if x.GetCatalogVersion() != "sha256:one" {
				t.Errorf("catalog_version = %q, want sha256:one", x.GetCatalogVersion())
			}
		})
	}
}

func TestAuthenticateAgent(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	tok, tk, _ := f.tokens.Create(ctx, "bob", time.Hour)
	r, err := f.svc.AuthenticateAgent(ctx, &controlplanev1.AuthenticateAgentRequest{Credential: tok})
	if err != nil || r.GetActor() != "bob" || r.GetTokenId() != tk.GetId() || !r.GetExpiresAt().AsTime().Equal(tk.GetExpiresAt().AsTime()) {
		t.Fatalf("AuthenticateAgent = %v, %v; want bob, %s, its expiry", r, err, tk.GetId())
	}
	for _, cred := range []string{"", "latch_unknown", tok + "x"} {
		if _, err := f.svc.AuthenticateAgent(ctx, &controlplanev1.AuthenticateAgentRequest{Credential: cred}); status.Code(err) != codes.Unauthenticated && status.Code(err) != codes.InvalidArgument {
			t.Errorf("AuthenticateAgent(%q) = %v, want a refusal", cred, err)
		}
	}
}

func TestListTools(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	r, err := f.svc.ListTools(ctx, &controlplanev1.ListToolsRequest{})
	if err != nil || r.GetCatalogVersion() != "sha256:one" || len(r.GetTools()) != 2 {
		t.Fatalf("ListTools = %v, %v; want 2 tools under sha256:one", r, err)
	}
	deploy, look := r.GetTools()[0], r.GetTools()[1]
	if deploy.GetName() != "deploy" || !deploy.GetSideEffecting() || deploy.GetReplay() != "idempotency_key" || !bytes.Contains(deploy.GetInputSchema(), []byte(tools.RepeatOfArgument)) {
		t.Errorf("deploy = %v; want side-effecting idempotency_key with repeat_of in its schema", deploy)
	}
	if look.GetSideEffecting() || look.GetDescription() != "Look." || bytes.Contains(look.GetInputSchema(), []byte(tools.RepeatOfArgument)) {
		t.Errorf("look = %v; want read-only, its description, no repeat_of", look)
	}
	if r, err := f.svc.ListTools(ctx, &controlplanev1.ListToolsRequest{KnownVersion: "sha256:one"}); err != nil || !r.GetUnchanged() || len(r.GetTools()) != 0 {
		t.Errorf("ListTools(known current) = %v, %v; want unchanged", r, err)
	}
	if _, err := f.svc.ListTools(ctx, &controlplanev1.ListToolsRequest{WaitMs: 61_000}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("ListTools(wait 61s) = %v, want InvalidArgument", err)
	}
	// A long poll answers when the version changes.
	got := make(chan *controlplanev1.ListToolsResponse, 1)
	go func() {
		r, _ := f.svc.ListTools(ctx, &controlplanev1.ListToolsRequest{KnownVersion: "sha256:one", WaitMs: 60_000})
		got <- r
	}()
	cat, _ := tools.Parse("c.yaml", []byte(testCatalog[:len(testCatalog)-len("  deploy:\n    description: Deploy.\n    input_schema: {type: object, properties: {v: {type: string}}}\n    target: api\n    request: {method: POST, path: /deploy}\n    replay: idempotency_key\n")]))
	f.eng.SetCatalog(cat, "sha256:two")
	if r := <-got; r.GetCatalogVersion() != "sha256:two" || len(r.GetTools()) != 1 || r.GetUnchanged() {
		t.Errorf("long poll = %v, want sha256:two with 1 tool", r)
	}
}

func TestPeerCaller(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		want Caller
	}{
		{"no peer", context.Background(), Caller{}},
		{"unix socket", peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Net: "unix", Name: "/x.sock"}}), Caller{Identity: "unix", Operator: true}},
		{"plain TCP", peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9}}), Caller{}},
	}
	for _, tt := range tests {
		if got := PeerCaller(tt.ctx); got != tt.want {
			t.Errorf("PeerCaller(%s) = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestParseFrontActor(t *testing.T) {
	tests := []struct {
		in, id, actor string
		ok            bool
	}{
		{"spiffe://latch/front=alice", "spiffe://latch/front", "alice", true},
		{"CN=front,O=x=bob", "CN=front,O=x", "bob", true},
		{"front=*", "front", "*", true},
		{"front=", "", "", false},
		{"=alice", "", "", false},
		{"front=has space", "", "", false},
		{"noequals", "", "", false},
	}
	for _, tt := range tests {
		id, actor, err := ParseFrontActor(tt.in)
		if (err == nil) != tt.ok || id != tt.id || actor != tt.actor {
			t.Errorf("ParseFrontActor(%q) = %q, %q, %v; want %q, %q, ok %v", tt.in, id, actor, err, tt.id, tt.actor, tt.ok)
		}
	}
}

// TestReadActor: agent-facing reads and cancels see only the agent's own
// executions unless the caller is the operator.
func TestReadActor(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	bob, _, _ := f.tokens.Create(ctx, "bob", 0)
	f.caller = Caller{Identity: "unix", Operator: true}
	mine, err := f.svc.Submit(ctx, &controlplanev1.SubmitRequest{Credential: bob, Tool: "look", Arguments: []byte(`{"what":"bob"}`)})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := f.svc.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "look", Arguments: []byte(`{"what":"alice"}`)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		caller     Caller
		actor      string
		credential string
		id         string
		want       codes.Code
	}{
		{"agent reads its own", Caller{}, "", bob, mine.GetExecution().GetId(), codes.OK},
		{"agent reads another's", Caller{}, "", bob, theirs.GetExecution().GetId(), codes.NotFound},
		{"agent claims another actor", Caller{}, "alice", bob, theirs.GetExecution().GetId(), codes.PermissionDenied},
		{"operator reads any", Caller{Identity: "unix", Operator: true}, "", "", theirs.GetExecution().GetId(), codes.OK},
		{"bound front reads its actor's", Caller{Identity: "spiffe://latch/front-a"}, "alice", "", theirs.GetExecution().GetId(), codes.OK},
		{"bound front reads without an actor", Caller{Identity: "spiffe://latch/front-a"}, "", "", theirs.GetExecution().GetId(), codes.PermissionDenied},
		{"anonymous names an actor", Caller{}, "alice", "", theirs.GetExecution().GetId(), codes.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.caller = tt.caller
			_, err := f.svc.Get(ctx, &controlplanev1.GetRequest{ExecutionId: tt.id, Actor: tt.actor, Credential: tt.credential})
			if status.Code(err) != tt.want {
				t.Errorf("Get = %v, want %v", err, tt.want)
			}
			l, err := f.svc.List(ctx, &controlplanev1.ListRequest{Actor: tt.actor, Credential: tt.credential, Limit: 10})
			if tt.want == codes.PermissionDenied {
				if status.Code(err) != codes.PermissionDenied {
					t.Errorf("List = %v, want PermissionDenied", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("List = %v", err)
			}
			for _, x := range l.GetExecutions() {
				if tt.credential != "" && x.GetActor() != "bob" {
					t.Errorf("List with bob's token shows %s's execution", x.GetActor())
				}
			}
		})
	}
}

// TestPeerCallerTLS: a TLS caller is named by its verified client
// certificate (URI SAN first, else subject CN); an unverified one is
// anonymous.
func TestPeerCallerTLS(t *testing.T) {
	u, _ := url.Parse("spiffe://latch/front-a")
	withURI := &x509.Certificate{URIs: []*url.URL{u}, Subject: pkix.Name{CommonName: "ignored"}}
	withCN := &x509.Certificate{Subject: pkix.Name{CommonName: "front-b"}}
	ctxOf := func(c *x509.Certificate, verified bool) context.Context {
		st := tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
		if verified {
			st.VerifiedChains = [][]*x509.Certificate{{c}}
		}
		return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 7400}, AuthInfo: credentials.TLSInfo{State: st}})
	}
	tests := []struct {
		name string
		ctx  context.Context
		want Caller
	}{
		{"URI SAN", ctxOf(withURI, true), Caller{Identity: "spiffe://latch/front-a"}},
		{"subject CN", ctxOf(withCN, true), Caller{Identity: "cn:front-b"}},
		{"unverified certificate", ctxOf(withURI, false), Caller{}},
	}
	for _, tt := range tests {
		if got := PeerCaller(tt.ctx); got != tt.want {
			t.Errorf("PeerCaller(%s) = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestDrainEndsLongPolls: a graceful stop is not held up by a ListTools
// long poll.
func TestDrainEndsLongPolls(t *testing.T) {
	f := newFixture(t)
	got := make(chan *controlplanev1.ListToolsResponse, 1)
	go func() {
		r, _ := f.svc.ListTools(t.Context(), &controlplanev1.ListToolsRequest{KnownVersion: "sha256:one", WaitMs: 60_000})
		got <- r
	}()
	f.svc.Drain()
	if r := <-got; !r.GetUnchanged() {
		t.Errorf("drained long poll = %v, want unchanged", r)
	}
	if r, err := f.svc.ListTools(t.Context(), &controlplanev1.ListToolsRequest{KnownVersion: "sha256:one", WaitMs: 60_000}); err != nil || !r.GetUnchanged() {
		t.Errorf("long poll after Drain = %v, %v; want an immediate unchanged", r, err)
	}
}

// TestActorNameRule: an actor a front names (a JWT front trusted for any
// actor, or an operator) must pass the actor-name rule the front applies:
// a name with invisible characters, or not in NFC, is refused before it is
// filed or read under, and so is a --front-actor binding to one.
func TestActorNameRule(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	for _, caller := range []Caller{{Identity: "spiffe://latch/jwt-front"}, {Identity: "unix", Operator: true}} {
		f.caller = caller
		for _, name := range []string{"dev\u200b", "dev\u00a0", "a\u202eb", "\u0085x", "e\u0301"} {
			_, err := f.svc.Submit(ctx, &controlplanev1.SubmitRequest{Actor: name, Tool: "look", Arguments: []byte(`{"what":"x"}`)})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "actor name") {
				t.Errorf("Submit(actor %q) by %s = %v, want InvalidArgument naming the actor-name rule", name, caller.Identity, err)
			}
			if _, err := f.svc.List(ctx, &controlplanev1.ListRequest{Actor: name}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("List(actor %q) by %s = %v, want InvalidArgument", name, caller.Identity, err)
			}
			if _, _, err := ParseFrontActor("spiffe://latch/front=" + name); err == nil {
				t.Errorf("ParseFrontActor(spiffe://latch/front=%q) = nil error", name)
			}
		}
	}
	f.caller = Caller{Identity: "spiffe://latch/jwt-front"}
	if _, err := f.svc.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "oauth:jos\u00e9", Tool: "look", Arguments: []byte(`{"what":"y"}`)}); err != nil {
		t.Errorf("Submit(actor oauth:josé, NFC) = %v, want it accepted", err)
	}
}

// TestCancelOperator: only an operator caller may name the operator of a
// cancellation (it is journaled as that operator's decision).
func TestCancelOperator(t *testing.T) {
	f := newFixture(t)
	f.caller = Caller{Identity: "spiffe://latch/front-a"}
	_, err := f.svc.Cancel(t.Context(), &controlplanev1.CancelRequest{ExecutionId: "act_01J00000000000000000000000", Actor: "alice", Operator: "mallory"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Cancel naming an operator from a front = %v, want PermissionDenied", err)
	}
	f.caller = Caller{Identity: "unix", Operator: true}
	_, err = f.svc.Cancel(t.Context(), &controlplanev1.CancelRequest{ExecutionId: "act_01J00000000000000000000000", Operator: "erin"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Cancel of no execution naming an operator from an operator = %v, want NotFound", err)
	}
}

func TestCancelReason(t *testing.T) {
	for _, tt := range []struct{ op, reason, want string }{
		{"erin", "wrong service", "cancelled by erin: wrong service"},
		{"erin", "", "cancelled by erin"},
	} {
		if got := cancelReason(tt.op, tt.reason); got != tt.want {
			t.Errorf("cancelReason(%q, %q) = %q, want %q", tt.op, tt.reason, got, tt.want)
		}
	}
}
