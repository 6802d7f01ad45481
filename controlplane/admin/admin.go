// Package admin serves the Admin gRPC service: the vault (status, unlock,
// lock, put, list), agents' bearer tokens (controlplane/tokens, in the
// store) and catalog reloads (controlplane/catalog). It runs next to the
// ControlPlane service on the control plane's socket; no response ever
// carries a stored secret.
package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/actorname"
	"github.com/latchhq/latch/internal/errinfo"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// ErrNotYourName refuses a console token for an operator name the caller
// is not bound to.
var ErrNotYourName = errors.New("admin: an operator may create console tokens only for its own name")

// Tokens creates, lists and revokes agents' bearer tokens and operators'
// console tokens. Implemented by *tokens.Service.
type Tokens interface {
	Issue(ctx context.Context, in tokens.Issue) (string, *recordv1.AgentToken, error)
	List(all bool) ([]*recordv1.AgentToken, error)
	Revoke(ctx context.Context, idOrActor, by string) ([]*recordv1.AgentToken, error)
	ListOperators(all bool) ([]*recordv1.AgentToken, error)
	RevokeOperator(ctx context.Context, idOrName, by string) ([]*recordv1.AgentToken, error)
}

// Catalog reloads and describes the tool catalog. Implemented by
// *catalog.Manager.
type Catalog interface {
	Reload(ctx context.Context, trigger string) (catalog.Result, error)
	Current() catalog.Current
}

// Config names the service's dependencies.
type Config struct {
	Logger  hclog.Logger
	Vault   *vault.Vault
	Tokens  Tokens
	Catalog Catalog
	// Upstreams lists upstream MCP servers' tools (nil: none configured).
	Upstreams Upstreams
	// Events is the event outbox (events.go).
	Events Events
	// Store is read by ObserveReport (observe.go; nil: unavailable).
	Store *store.Store
}

// Service implements controlplanev1.AdminServer.
type Service struct {
	controlplanev1.UnsafeAdminServer
	log     hclog.Logger
	vault   *vault.Vault
	tokens  Tokens
	catalog Catalog
	ups     Upstreams
	events  Events
	st      *store.Store
}

var _ controlplanev1.AdminServer = (*Service)(nil)

// New builds the service.
func New(cfg Config) (*Service, error) {
	if cfg.Vault == nil || cfg.Tokens == nil || cfg.Catalog == nil {
		return nil, errors.New("admin: Config.Vault, Config.Tokens and Config.Catalog are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Service{log: cfg.Logger.Named("admin"), vault: cfg.Vault, tokens: cfg.Tokens, catalog: cfg.Catalog, ups: cfg.Upstreams, events: cfg.Events, st: cfg.Store}, nil
}

// Register adds the service to a gRPC server.
func (s *Service) Register(g grpc.ServiceRegistrar) { controlplanev1.RegisterAdminServer(g, s) }

func (s *Service) status() *controlplanev1.VaultStatusResponse {
	st := s.vault.Status()
	return &controlplanev1.VaultStatusResponse{Locked: st.Locked, Initialized: st.Initialized, Epoch: st.Epoch, Names: int32(st.Names), Path: st.Path, Method: st.Method}
}

func (s *Service) VaultStatus(context.Context, *controlplanev1.VaultStatusRequest) (*controlplanev1.VaultStatusResponse, error) {
	return s.status(), nil
}

func (s *Service) VaultUnlock(_ context.Context, req *controlplanev1.VaultUnlockRequest) (*controlplanev1.VaultUnlockResponse, error) {
	if (len(req.GetPassphrase()) == 0) == (req.GetKeyFile() == "") {
		return nil, status.Error(codes.InvalidArgument, "give either a passphrase or a key file")
	}
	var err error
	switch {
	case req.GetKeyFile() != "":
		err = s.vault.UnlockWithKeyFile(req.GetKeyFile())
	case req.GetInit() && !s.vault.Status().Initialized:
		err = s.vault.Init(req.GetPassphrase())
	default:
		err = s.vault.Unlock(req.GetPassphrase())
	}
	if err != nil {
		return nil, vaultStatus(err)
	}
	s.log.Info("vault unlocked")
	return &controlplanev1.VaultUnlockResponse{Status: s.status()}, nil
}

func (s *Service) VaultLock(context.Context, *controlplanev1.VaultLockRequest) (*controlplanev1.VaultLockResponse, error) {
	s.vault.Lock()
	s.log.Info("vault locked")
	return &controlplanev1.VaultLockResponse{Status: s.status()}, nil
}

func (s *Service) VaultPut(_ context.Context, req *controlplanev1.VaultPutRequest) (*controlplanev1.VaultPutResponse, error) {
	fields, err := putFields(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	c := vault.Credential{Kind: vault.Kind(req.GetKind()), Fields: fields}
	if err := c.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.vault.Put(req.GetName(), c); err != nil {
		return nil, vaultStatus(err)
	}
	s.log.Info("credential stored", "name", req.GetName(), "kind", req.GetKind())
	return &controlplanev1.VaultPutResponse{}, nil
}

func (s *Service) VaultList(context.Context, *controlplanev1.VaultListRequest) (*controlplanev1.VaultListResponse, error) {
	names, err := s.vault.List()
	if err != nil {
		return nil, vaultStatus(err)
	}
	return &controlplanev1.VaultListResponse{Names: names}, nil
}

func (s *Service) CreateToken(ctx context.Context, req *controlplanev1.CreateTokenRequest) (*controlplanev1.CreateTokenResponse, error) {
	if err := actorname.CheckIssued(req.GetActor()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateToken: %v", err)
	}
	ttl := time.Duration(req.GetTtlSeconds()) * time.Second
	if req.GetTtlSeconds() < 0 || req.GetTtlSeconds() > int64(tokens.MaxTTL/time.Second) {
		return nil, status.Errorf(codes.InvalidArgument, "ttl must be positive and at most %s (or none: until revoked)", tokens.MaxTTL)
	}
	caller, known := authz.CallerFrom(ctx)
	var by string
	if known {
		by = caller.String()
	}
	if req.GetOperator() {
		if err := mayName(caller, req.GetActor()); err != nil {
			s.log.Warn("operator token refused", "operator", req.GetActor(), "caller", caller.String(), "transport", caller.Transport)
			return nil, tokenStatus(s, err)
		}
	}
	secret, t, err := s.tokens.Issue(ctx, tokens.Issue{Actor: req.GetActor(), TTL: ttl, Operator: req.GetOperator(),
		CreatedBy: by, CreatedVia: caller.Transport})
	if err != nil {
		return nil, tokenStatus(s, err)
	}
	return &controlplanev1.CreateTokenResponse{Token: secret, Actor: t.GetActor(), Id: t.GetId(), ExpiresAt: rfc3339(t.GetExpiresAt())}, nil
}

func (s *Service) ListTokens(_ context.Context, req *controlplanev1.ListTokensRequest) (*controlplanev1.ListTokensResponse, error) {
	list := s.tokens.List
	if req.GetOperator() {
		list = s.tokens.ListOperators
	}
	ts, err := list(req.GetAll())
	if err != nil {
		return nil, tokenStatus(s, err)
	}
	out := &controlplanev1.ListTokensResponse{}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, &controlplanev1.TokenInfo{
			Id: t.GetId(), Actor: t.GetActor(), CreatedAt: rfc3339(t.GetCreatedAt()), ExpiresAt: rfc3339(t.GetExpiresAt()),
			LastUsedAt: rfc3339(t.GetLastUsedAt()), RevokedAt: rfc3339(t.GetRevokedAt()), Origin: t.GetOrigin(), Operator: t.GetOperator(),
			CreatedBy: t.GetCreatedBy(), CreatedVia: t.GetCreatedVia(),
		})
	}
	return out, nil
}

func (s *Service) RevokeToken(ctx context.Context, req *controlplanev1.RevokeTokenRequest) (*controlplanev1.RevokeTokenResponse, error) {
	if req.GetIdOrActor() == "" {
		return nil, status.Error(codes.InvalidArgument, "id_or_actor is required")
	}
	revoke := s.tokens.Revoke
	if req.GetOperator() {
		revoke = s.tokens.RevokeOperator
	}
	by := "operator"
	if c, ok := authz.CallerFrom(ctx); ok {
		by = c.String()
	}
	ts, err := revoke(ctx, req.GetIdOrActor(), by)
	if err != nil {
		return nil, tokenStatus(s, err)
	}
	return &controlplanev1.RevokeTokenResponse{Revoked: int32(len(ts))}, nil
}

func (s *Service) ReloadCatalog(ctx context.Context, _ *controlplanev1.ReloadCatalogRequest) (*controlplanev1.ReloadCatalogResponse, error) {
	r, err := s.catalog.Reload(ctx, catalog.TriggerReload)
	switch {
	case errors.Is(err, catalog.ErrInvalid), errors.Is(err, catalog.ErrUnreadable):
		return nil, status.Errorf(codes.InvalidArgument, "%v\nnothing changed: catalog %s stays in force", err, r.Version)
	case err != nil:
		s.log.Error("catalog reload failed", "error", err)
		return nil, status.Errorf(codes.Internal, "catalog reload failed; nothing changed (catalog %s stays in force); see the control plane's log", r.Version)
	}
	resp := &controlplanev1.ReloadCatalogResponse{Version: r.Version, Previous: r.Previous, Changed: r.Changed, Source: r.Source, Tools: int32(len(r.Catalog.Tools))}
	for _, h := range r.Catalog.Held {
		resp.Held = append(resp.Held, &controlplanev1.HeldTool{Tool: h.Tool, Reason: h.Reason})
	}
	for _, w := range r.Catalog.Warnings {
		resp.Warnings = append(resp.Warnings, w.String())
	}
	return resp, nil
}

// CatalogStatus describes the catalog in force and its held tools.
func (s *Service) CatalogStatus(context.Context, *controlplanev1.CatalogStatusRequest) (*controlplanev1.CatalogStatusResponse, error) {
	return CatalogStatusOf(s.catalog.Current()), nil
}

// CatalogStatusOf is the CatalogStatus answer for cur (the console shows
// the same).
func CatalogStatusOf(cur catalog.Current) *controlplanev1.CatalogStatusResponse {
	resp := &controlplanev1.CatalogStatusResponse{Version: cur.Version, Source: cur.Source, Trigger: cur.Trigger}
	if !cur.LoadedAt.IsZero() {
		resp.LoadedAt = timestamppb.New(cur.LoadedAt)
	}
	if cur.Catalog == nil {
		return resp
	}
	for _, name := range cur.Catalog.ToolNames() {
		t := cur.Catalog.Tools[name]
		ct := &controlplanev1.CatalogTool{Name: name, Target: t.Target, Replay: string(t.Replay), Mode: string(t.Mode)}
		if tg := cur.Catalog.Targets[t.Target]; tg != nil {
			ct.Channel = string(tg.Channel)
		}
		resp.Tools = append(resp.Tools, ct)
	}
	for _, h := range cur.Catalog.Held {
		resp.Held = append(resp.Held, &controlplanev1.HeldTool{Tool: h.Tool, Reason: h.Reason})
	}
	return resp
}

// mayName reports whether caller may create a console token for the
// operator named name. A console session acts under its token's name, so
// that name must be one the creator answers for: a local operator (the
// unix socket, trusted by uid) may name anyone, and its token records say
// so (created_by); an operator certificate only the name it is bound to
// (authz.Caller.OperatorName: NAME of --operator-identity NAME=IDENTITY,
// else NAME for cn:NAME). Anything else, a caller the interceptors did not
// identify included, is refused.
func mayName(caller authz.Caller, name string) error {
	if caller.Role == authz.RoleLocal {
		return nil
	}
	bound, ok := caller.OperatorName()
	switch {
	case caller.Role != authz.RoleOperator:
		who := caller.String()
		if caller.Identity == "" {
			who = "an unidentified caller"
		}
		return fmt.Errorf("%w: %s is not an operator; create the token with the operator certificate (cn:NAME) of that name, or on the control plane's unix socket as a local operator", ErrNotYourName, who)
	case !ok:
		return fmt.Errorf("%w: the certificate %s is bound to no operator name (list it as --operator-identity NAME=IDENTITY to bind it; a cn:NAME certificate is bound to NAME); create a console token for %q on the control plane's unix socket as a local operator", ErrNotYourName, caller.Identity, name)
	case bound != name:
		return fmt.Errorf("%w: the certificate %s is bound to the operator %q, not %q; create a token for %q, or have a local operator on the control plane's unix socket create one for %q", ErrNotYourName, caller.Identity, bound, name, bound, name)
	}
	return nil
}

func tokenStatus(s *Service, err error) error {
	switch {
	case errors.Is(err, ErrNotYourName):
		return permissionDenied(err)
	case errors.Is(err, tokens.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, tokens.ErrBadActor), errors.Is(err, tokens.ErrBadTTL):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, "control plane is shutting down; retry against the restarted instance")
	}
	s.log.Error("token operation failed", "error", err)
	return status.Error(codes.Internal, "token operation failed; see the control plane's log")
}

// permissionDenied is the PermissionDenied status of an ErrNotYourName.
func permissionDenied(err error) error {
	return errinfo.Error(codes.PermissionDenied, err.Error(), controlplanev1.ErrorReason_ERROR_REASON_OPERATOR_NAME_NOT_BOUND)
}

func rfc3339(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

func vaultStatus(err error) error {
	switch {
	case errors.Is(err, vault.ErrWrongPassphrase):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, vault.ErrLocked):
		return status.Error(codes.FailedPrecondition, err.Error()+" (latch vault unlock)")
	case errors.Is(err, vault.ErrNotInitialized):
		return status.Error(codes.FailedPrecondition, err.Error()+" (latch vault unlock --init creates it)")
	case errors.Is(err, vault.ErrInvalidName), errors.Is(err, vault.ErrInvalidCredential), errors.Is(err, vault.ErrWrongMethod):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// putFields are the credential fields of req: every field of the request
// set besides name, kind and fields, under its proto name (which is the
// kind's field name: token, private_key, scopes, ...), and the fields map
// for the fields no message field names. Which belong to the kind is
// Validate's question, so nothing here knows a kind.
func putFields(req *controlplanev1.VaultPutRequest) (vault.Fields, error) {
	out := vault.Fields{}
	var err error
	req.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(fd.Name())
		switch {
		case name == "name" || name == "kind" || name == "fields":
		case fd.IsList():
			items := make([]string, v.List().Len())
			for i := range items {
				items[i] = v.List().Get(i).String()
			}
			out[name] = vault.JoinList(items)
		case fd.Kind() == protoreflect.BytesKind:
			out[name] = string(v.Bytes())
		default:
			out[name] = v.String()
		}
		return true
	})
	for name, v := range req.GetFields() {
		if _, dup := out[name]; dup {
			err = fmt.Errorf("vault: field %s is given twice (as a request field and in fields)", name)
		}
		out[name] = v
	}
	return out, err
}
