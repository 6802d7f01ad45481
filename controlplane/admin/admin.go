// Package admin serves the Admin gRPC service: the vault (status, unlock,
// lock, put, list) and bearer tokens for agents. It runs next to the
// ControlPlane service on the control plane's socket; no response ever
// carries a stored secret.
package admin

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/mcpfront/auth"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// Tokens creates, lists and revokes bearer tokens for actors. Implemented
// by mcpfront/auth's TokenStore.
type Tokens interface {
	Create(actor string) (string, error)
	List() ([]auth.Token, error)
	Revoke(idOrActor string) (int, error)
}

// Config names the service's dependencies.
type Config struct {
	Logger hclog.Logger
	Vault  *vault.Vault
	// Tokens may be nil when no MCP front uses this control plane.
	Tokens Tokens
}

// Service implements controlplanev1.AdminServer.
type Service struct {
	controlplanev1.UnsafeAdminServer
	log    hclog.Logger
	vault  *vault.Vault
	tokens Tokens
}

var _ controlplanev1.AdminServer = (*Service)(nil)

// New builds the service.
func New(cfg Config) (*Service, error) {
	if cfg.Vault == nil {
		return nil, errors.New("admin: Config.Vault is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Service{log: cfg.Logger.Named("admin"), vault: cfg.Vault, tokens: cfg.Tokens}, nil
}

// Register adds the service to a gRPC server.
func (s *Service) Register(g *grpc.Server) { controlplanev1.RegisterAdminServer(g, s) }

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
	c := vault.Credential{
		Kind: vault.Kind(req.GetKind()), Token: req.GetToken(), Username: req.GetUsername(), Password: req.GetPassword(),
		Header: req.GetHeader(), Value: req.GetValue(), PrivateKey: req.GetPrivateKey(),
		AccessKeyID: req.GetAccessKeyId(), SecretAccessKey: req.GetSecretAccessKey(), SessionToken: req.GetSessionToken(),
		Region: req.GetRegion(), Service: req.GetService(),
		TokenURL: req.GetTokenUrl(), ClientID: req.GetClientId(), ClientSecret: req.GetClientSecret(),
		Scopes: req.GetScopes(), Audience: req.GetAudience(),
	}
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

var actorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$`)

func (s *Service) CreateToken(_ context.Context, req *controlplanev1.CreateTokenRequest) (*controlplanev1.CreateTokenResponse, error) {
	if s.tokens == nil {
		return nil, status.Error(codes.FailedPrecondition, "this control plane has no token store (run the MCP front with --tokens)")
	}
	if !actorName.MatchString(req.GetActor()) {
		return nil, status.Error(codes.InvalidArgument, "actor name must be 1-128 characters of letters, digits, _ . @ -")
	}
	tok, err := s.tokens.Create(req.GetActor())
	if err != nil {
		s.log.Error("create token failed", "actor", req.GetActor(), "error", err)
		return nil, status.Error(codes.Internal, "cannot store the token; see the control plane's log")
	}
	s.log.Info("token created", "actor", req.GetActor())
	return &controlplanev1.CreateTokenResponse{Token: tok, Actor: req.GetActor()}, nil
}

func (s *Service) ListTokens(context.Context, *controlplanev1.ListTokensRequest) (*controlplanev1.ListTokensResponse, error) {
	if s.tokens == nil {
		return nil, status.Error(codes.FailedPrecondition, "this control plane has no token store")
	}
	ts, err := s.tokens.List()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	out := &controlplanev1.ListTokensResponse{}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, &controlplanev1.TokenInfo{Id: t.ID, Actor: t.Actor, CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339)})
	}
	return out, nil
}

func (s *Service) RevokeToken(_ context.Context, req *controlplanev1.RevokeTokenRequest) (*controlplanev1.RevokeTokenResponse, error) {
	if s.tokens == nil {
		return nil, status.Error(codes.FailedPrecondition, "this control plane has no token store")
	}
	if req.GetIdOrActor() == "" {
		return nil, status.Error(codes.InvalidArgument, "id_or_actor is required")
	}
	n, err := s.tokens.Revoke(req.GetIdOrActor())
	if errors.Is(err, auth.ErrNotFound) {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	s.log.Info("tokens revoked", "id_or_actor", req.GetIdOrActor(), "count", n)
	return &controlplanev1.RevokeTokenResponse{Revoked: int32(n)}, nil
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
