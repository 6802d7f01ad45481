package admin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/controlplane/vault"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

type fakeTokens struct{ revokeErr error }

func (fakeTokens) Create(_ context.Context, actor string, ttl time.Duration) (string, *recordv1.AgentToken, error) {
	return "latch_x", &recordv1.AgentToken{Id: "tok_1", Actor: actor}, nil
}
func (fakeTokens) List(bool) ([]*recordv1.AgentToken, error) { return nil, nil }
func (f fakeTokens) Revoke(context.Context, string, string) ([]*recordv1.AgentToken, error) {
	return nil, f.revokeErr
}
func (f fakeTokens) CreateOperator(ctx context.Context, name string, ttl time.Duration) (string, *recordv1.AgentToken, error) {
	return "latch_op_x", &recordv1.AgentToken{Id: "tok_2", Actor: name, Operator: true}, nil
}
func (fakeTokens) ListOperators(bool) ([]*recordv1.AgentToken, error) { return nil, nil }
func (f fakeTokens) RevokeOperator(context.Context, string, string) ([]*recordv1.AgentToken, error) {
	return nil, f.revokeErr
}

type fakeCatalog struct{ err error }

func (f fakeCatalog) Reload(context.Context, string) (catalog.Result, error) {
	return catalog.Result{Current: catalog.Current{Catalog: &tools.Catalog{}, Version: "sha256:in-force"}}, f.err
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
