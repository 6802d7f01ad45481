package admin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

type fakeTokens struct{ revokeErr error }

func (fakeTokens) Issue(_ context.Context, in tokens.Issue) (string, *recordv1.AgentToken, error) {
	if in.Operator {
		return "latch_op_x", &recordv1.AgentToken{Id: "tok_2", Actor: in.Actor, Operator: true}, nil
	}
	return "latch_x", &recordv1.AgentToken{Id: "tok_1", Actor: in.Actor}, nil
}
func (fakeTokens) List(bool) ([]*recordv1.AgentToken, error) { return nil, nil }
func (f fakeTokens) Revoke(context.Context, string, string) ([]*recordv1.AgentToken, error) {
	return nil, f.revokeErr
}
func (fakeTokens) ListOperators(bool) ([]*recordv1.AgentToken, error) { return nil, nil }
func (f fakeTokens) RevokeOperator(context.Context, string, string) ([]*recordv1.AgentToken, error) {
	return nil, f.revokeErr
}

type fakeCatalog struct{ err error }

func (f fakeCatalog) Reload(context.Context, string) (catalog.Result, error) {
	return catalog.Result{Current: catalog.Current{Catalog: &tools.Catalog{}, Version: "sha256:in-force"}}, f.err
}

func (f fakeCatalog) Current() catalog.Current {
	return catalog.Current{Version: "sha256:in-force", Source: "c.yaml", LoadedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Trigger: catalog.TriggerReload,
		Catalog: &tools.Catalog{
			Targets: map[string]*tools.Target{"api": {Name: "api", Channel: tools.ChannelHTTP}},
			Tools:   map[string]*tools.Tool{"b_tool": {Name: "b_tool", Target: "api", Replay: tools.ReplayReview}, "a_tool": {Name: "a_tool", Target: "api", Replay: tools.ReplayIdempotencyKey}},
			Held:    []tools.HeldTool{{Tool: "up.gone", Reason: "upstream up offers no tool gone"}},
		}}
}

// TestCatalogStatus: the catalog in force, its tools sorted with their
// target's channel, and the held tools with why.
func TestCatalogStatus(t *testing.T) {
	s := newService(t, fakeTokens{}, fakeCatalog{})
	got, err := s.CatalogStatus(t.Context(), &controlplanev1.CatalogStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &controlplanev1.CatalogStatusResponse{Version: "sha256:in-force", Source: "c.yaml", Trigger: "reload",
		LoadedAt: timestamppb.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)),
		Tools: []*controlplanev1.CatalogTool{
			{Name: "a_tool", Target: "api", Channel: "http", Replay: "idempotency_key"},
			{Name: "b_tool", Target: "api", Channel: "http", Replay: "review"},
		},
		Held: []*controlplanev1.HeldTool{{Tool: "up.gone", Reason: "upstream up offers no tool gone"}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("CatalogStatus() mismatch (-want +got):\n%s", diff)
	}
}

func newService(t *testing.T, tk Tokens, c Catalog) *Service {
	t.Helper()
	v, err := vault.New(vault.Config{Path: filepath.Join(t.TempDir(), "vault.json")})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Vault: v, Tokens: tk, Catalog: c})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReloadCatalogRefusal(t *testing.T) {
	problems := fmt.Errorf("%w:\nc.yaml:7: tool x: unknown target \"nowhere\"", catalog.ErrInvalid)
	s := newService(t, fakeTokens{}, fakeCatalog{err: problems})
	_, err := s.ReloadCatalog(t.Context(), &controlplanev1.ReloadCatalogRequest{})
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "c.yaml:7:") || !strings.Contains(msg, "sha256:in-force stays in force") {
		t.Errorf("ReloadCatalog(bad) = %v; want InvalidArgument with the file:line problems and the version kept", err)
	}
	s = newService(t, fakeTokens{}, fakeCatalog{err: fmt.Errorf("disk on fire")})
	if _, err := s.ReloadCatalog(t.Context(), &controlplanev1.ReloadCatalogRequest{}); status.Code(err) != codes.Internal || strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("ReloadCatalog(internal failure) = %v; want Internal without the cause", err)
	}
}

func TestTokenRequests(t *testing.T) {
	s := newService(t, fakeTokens{revokeErr: fmt.Errorf("%w: nobody", tokens.ErrNotFound)}, fakeCatalog{})
	for _, req := range []*controlplanev1.CreateTokenRequest{{Actor: ""}, {Actor: "a b"}, {Actor: "ok", TtlSeconds: -1}, {Actor: "ok", TtlSeconds: int64(tokens.MaxTTL/time.Second) + 1}} {
		if _, err := s.CreateToken(t.Context(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("CreateToken(%v) = %v, want InvalidArgument", req, err)
		}
	}
	if r, err := s.CreateToken(t.Context(), &controlplanev1.CreateTokenRequest{Actor: "alice"}); err != nil || r.GetId() != "tok_1" || r.GetExpiresAt() != "" {
		t.Errorf("CreateToken(alice) = %v, %v", r, err)
	}
	if _, err := s.RevokeToken(t.Context(), &controlplanev1.RevokeTokenRequest{IdOrActor: "nobody"}); status.Code(err) != codes.NotFound {
		t.Errorf("RevokeToken(unknown) = %v, want NotFound", err)
	}
	if _, err := s.RevokeToken(t.Context(), &controlplanev1.RevokeTokenRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("RevokeToken(empty) = %v, want InvalidArgument", err)
	}
}

// newTokenService is a real tokens.Service over an in-memory store, for the
// tests that read back what was journaled.
func newTokenService(t *testing.T) (*tokens.Service, *store.Store) {
	t.Helper()
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tk, err := tokens.New(tokens.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return tk, st
}

// tokenRecords are the journal's token_created records.
func tokenRecords(t *testing.T, st *store.Store) []*recordv1.JournalEntry {
	t.Helper()
	var out []*recordv1.JournalEntry
	for i := range st.JournalSize() {
		b, err := st.JournalEntry(i)
		if err != nil {
			t.Fatal(err)
		}
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		if lifecycle.EntryKindOf(e) == tokens.KindCreated {
			out = append(out, e)
		}
	}
	return out
}

// TestOperatorTokenNames: a console token signs in under its name, so an
// operator certificate may create one only for the name it is bound to; a
// local operator may name anyone, and the token's record says who created
// it and how.
func TestOperatorTokenNames(t *testing.T) {
	alice := authz.Caller{Role: authz.RoleOperator, Identity: "cn:alice", Transport: authz.TransportTLS}
	spiffe := authz.Caller{Role: authz.RoleOperator, Identity: "spiffe://example.org/ops/alice", Transport: authz.TransportTLS}
	bound := authz.Caller{Role: authz.RoleOperator, Identity: "spiffe://example.org/ops/alice", Transport: authz.TransportTLS, Operator: "alice"}
	front := authz.Caller{Role: authz.RoleFront, Identity: "cn:alice", Transport: authz.TransportTLS}
	local := authz.Caller{Role: authz.RoleLocal, Identity: "uid:0", Transport: authz.TransportUnix}
	for _, tc := range []struct {
		name      string
		caller    *authz.Caller // nil: no caller in the context
		actor     string
		operator  bool
		wantCode  codes.Code
		createdBy string
	}{
		{name: "remote operator for another name", caller: &alice, actor: "root", operator: true, wantCode: codes.PermissionDenied},
		{name: "remote operator for its own name", caller: &alice, actor: "alice", operator: true, wantCode: codes.OK, createdBy: "operator cn:alice"},
		{name: "URI certificate names no operator", caller: &spiffe, actor: "alice", operator: true, wantCode: codes.PermissionDenied},
		{name: "URI certificate bound to alice, for alice", caller: &bound, actor: "alice", operator: true, wantCode: codes.OK, createdBy: "operator spiffe://example.org/ops/alice"},
		{name: "URI certificate bound to alice, for root", caller: &bound, actor: "root", operator: true, wantCode: codes.PermissionDenied},
		{name: "front", caller: &front, actor: "alice", operator: true, wantCode: codes.PermissionDenied},
		{name: "no caller", actor: "alice", operator: true, wantCode: codes.PermissionDenied},
		{name: "local operator for anyone", caller: &local, actor: "root", operator: true, wantCode: codes.OK, createdBy: "local operator uid:0"},
		{name: "agent token stays any actor's", caller: &alice, actor: "bot", wantCode: codes.OK, createdBy: "operator cn:alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk, st := newTokenService(t)
			s := newService(t, tk, fakeCatalog{})
			ctx := t.Context()
			if tc.caller != nil {
				ctx = authz.WithCaller(ctx, *tc.caller)
			}
			r, err := s.CreateToken(ctx, &controlplanev1.CreateTokenRequest{Actor: tc.actor, Operator: tc.operator})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("CreateToken(%q) as %v = %v, want %v", tc.actor, tc.caller, err, tc.wantCode)
			}
			recs := tokenRecords(t, st)
			if tc.wantCode != codes.OK {
				msg := status.Convert(err).Message()
				if !strings.Contains(msg, "unix socket") {
					t.Errorf("CreateToken(%q) refusal %q does not say what to do instead", tc.actor, msg)
				}
				var info *errdetails.ErrorInfo
				for _, d := range status.Convert(err).Details() {
					if i, ok := d.(*errdetails.ErrorInfo); ok {
						info = i
					}
				}
				if info.GetReason() != "OPERATOR_NAME_NOT_BOUND" || info.GetDomain() != "latch.dev" {
					t.Errorf("CreateToken(%q) refusal details = %v, want ErrorInfo OPERATOR_NAME_NOT_BOUND", tc.actor, status.Convert(err).Details())
				}
				if len(recs) != 0 {
					t.Errorf("refused CreateToken(%q) journaled %v", tc.actor, recs)
				}
				return
			}
			if r.GetActor() != tc.actor {
				t.Errorf("CreateToken(%q) = %v", tc.actor, r)
			}
			if len(recs) != 1 {
				t.Fatalf("journal has %d token_created records, want 1", len(recs))
			}
			got := recs[0]
			if got.GetToken().GetCreatedBy() != tc.createdBy || got.GetToken().GetCreatedVia() != tc.caller.Transport {
				t.Errorf("token_created record's creator = %q over %q, want %q over %q", got.GetToken().GetCreatedBy(), got.GetToken().GetCreatedVia(), tc.createdBy, tc.caller.Transport)
			}
			if want := "by " + tc.createdBy + " over " + tc.caller.Transport; !strings.Contains(got.GetReason(), want) {
				t.Errorf("token_created reason = %q, want it to say %q", got.GetReason(), want)
			}
			stored, err := st.Token(r.GetId())
			if err != nil || stored.GetCreatedBy() != tc.createdBy {
				t.Errorf("stored token = %v, %v; want created_by %q", stored, err, tc.createdBy)
			}
			l, err := s.ListTokens(ctx, &controlplanev1.ListTokensRequest{Operator: tc.operator})
			if err != nil || len(l.GetTokens()) != 1 || l.GetTokens()[0].GetCreatedBy() != tc.createdBy || l.GetTokens()[0].GetCreatedVia() != tc.caller.Transport {
				t.Errorf("ListTokens = %v, %v; want the token created by %q over %q", l, err, tc.createdBy, tc.caller.Transport)
			}
		})
	}
}
