package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/latchhq/latch/controlplane/admin"
	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/httpchannel"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/policy"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/tools"
)

// stackConfig is what serve and dev share.
type stackConfig struct {
	Logger   hclog.Logger
	DataDir  string
	Store    string
	Replica  string
	LeaseTTL time.Duration
	// Context bounds start-up waits (a standby waiting for the lease).
	Context        context.Context
	Catalog        catalog.Source
	CheckpointCopy string
	// VaultPath defaults to DATA/vault.json.
	VaultPath string
	// VaultKeyFile unlocks the vault at start; when no vault exists yet, it
	// is created keyed by this file (and the file too when absent).
	VaultKeyFile string
	DevVault     bool
	Recovery     engine.RecoveryConfig
	// Actors are known without a token (stdio actors, the dev actor).
	Actors []string
	// Trusted actors' sessions need no authorization.
	Trusted []string
	// OpenSessions turns the session rule off (every session authorized).
	OpenSessions bool
	// FrontActors binds front identities to the actors they may act as
	// without an agent credential (--front-actor).
	FrontActors api.FrontActors
	// StaticTokens are credentials known without the store (the dev token).
	StaticTokens []tokens.Static
	// CommandArgs are appended to the operator commands the engine logs
	// for pending sessions and approvals ("--data DIR").
	CommandArgs string
	// TCPAddr and TLS serve the API on TCP too (server.Config).
	TCPAddr string
	TLS     *tls.Config
	// Access says who may call which RPC (server.Config.Access).
	Access authz.Config
	// Telemetry receives the control plane's metrics and spans (nil: none).
	Telemetry *telemetry.Telemetry
}

// actorSet knows the configured actors (--actor, --trusted-actor, the
// actors of --front-actor) and every actor with a live token. A front bound
// to "*" authenticates agents itself, so every actor is known.
type actorSet struct {
	fixed  map[string]bool
	any    bool
	tokens *tokens.Service // set once the server (and its store) exists
}

func (a *actorSet) Known(actor string) bool {
	if a.any || a.fixed[actor] {
		return true
	}
	return a.tokens != nil && a.tokens.HasActor(actor)
}

func setOf(names ...[]string) map[string]bool {
	m := map[string]bool{}
	for _, l := range names {
		for _, n := range l {
			m[n] = true
		}
	}
	return m
}

// stack is a control plane with its vault, tokens and channels.
type stack struct {
	srv   *server.Server
	vault *vault.Vault
	http  *httpdispatch.Dispatcher
	// closeHost closes the host-agent connections and the SSH pool.
	closeHost func()
	// closeUpstreams stops the upstream MCP servers (mcpchannel).
	closeUpstreams func()
}

// close releases the channels' connections (after the server stopped).
func (s *stack) close() {
	s.http.Close()
	s.closeHost()
	s.closeUpstreams()
}

func newStack(cfg stackConfig) (*stack, error) {
	log := cfg.Logger
	if cfg.VaultPath == "" {
		cfg.VaultPath = filepath.Join(cfg.DataDir, "vault.json")
	}
	if err := ensureDir(cfg.DataDir); err != nil {
		return nil, err
	}
	// A vault lock or unlock voids pending approvals (DESIGN §9). The engine
	// exists only later, hence the indirection.
	var eng atomic.Pointer[engine.Engine]
	var lastEpoch atomic.Uint64
	onChange := func(st vault.Status) {
		prev := lastEpoch.Load()
		if st.Epoch <= prev || !lastEpoch.CompareAndSwap(prev, st.Epoch) {
			return
		}
		if e := eng.Load(); e != nil {
			why := "the vault was unlocked"
			if st.Locked {
				why = "the vault was locked"
			}
			e.VoidApprovals(context.Background(), why)
			if !st.Locked {
				e.ResumeSealed() // executions whose sealed secret arguments waited for the key
			}
		}
	}
	v, err := vault.New(vault.Config{Path: cfg.VaultPath, Logger: log, OnChange: onChange})
	if err != nil {
		return nil, err
	}
	if cfg.DevVault && cfg.VaultKeyFile == "" {
		cfg.VaultKeyFile = filepath.Join(cfg.DataDir, "keys", "vault.key")
	}
	if cfg.VaultKeyFile != "" {
		if !v.Status().Initialized {
			err = v.InitWithKeyFile(cfg.VaultKeyFile)
		} else {
			err = v.UnlockWithKeyFile(cfg.VaultKeyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("vault: %w", err)
		}
	}
	hd, err := httpdispatch.New(httpdispatch.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	hc, err := httpchannel.New(httpchannel.Config{Logger: log, Dispatcher: hd, Credentials: v})
	if err != nil {
		return nil, err
	}
	channels := map[tools.Channel]engine.Channel{tools.ChannelHTTP: hc}
	closeHost, err := addHostChannels(channels, cfg, log, v)
	if err != nil {
		return nil, err
	}
	upstreams, err := addUpstreamChannel(channels, &cfg, log, v)
	if err != nil {
		closeHost()
		return nil, err
	}
	trusted := setOf(cfg.Trusted)
	actors := &actorSet{fixed: setOf(cfg.Actors, cfg.Trusted)}
	for _, as := range cfg.FrontActors {
		for _, a := range as {
			actors.fixed[a] = true
			actors.any = actors.any || a == "*"
		}
	}
	srv, err := server.New(server.Config{
		Logger: log, DataDir: cfg.DataDir, Store: cfg.Store, Replica: cfg.Replica, LeaseTTL: cfg.LeaseTTL, Context: cfg.Context, CatalogSource: cfg.Catalog, CheckpointCopy: cfg.CheckpointCopy,
		Channels: channels, Recovery: cfg.Recovery,
		Authorizer:   &policy.Policy{Vault: v, Actors: actors},
		Sessions:     engine.SessionConfig{Required: !cfg.OpenSessions, Trusted: func(a string) bool { return trusted[a] }, CommandArgs: cfg.CommandArgs},
		StaticTokens: cfg.StaticTokens, FrontActors: cfg.FrontActors,
		Register: func(g *grpc.Server, s *server.Server) {
			adm, err := admin.New(admin.Config{Logger: log, Vault: v, Tokens: s.Tokens, Catalog: s.Catalog, Upstreams: upstreams})
			if err != nil {
				panic(err) // every dependency is set: a bug, not an input
			}
			adm.Register(g)
		},
		TCPAddr: cfg.TCPAddr, TLS: cfg.TLS, Access: cfg.Access,
		Sealer:    v.ArgumentSealer(),
		Telemetry: cfg.Telemetry,
	})
	if err != nil {
		hd.Close()
		closeHost()
		upstreams.Close()
		return nil, err
	}
	eng.Store(srv.Engine)
	upstreams.SetReload(func() {
		if _, err := srv.Catalog.Reload(context.Background(), "upstream_reached"); err != nil {
			log.Warn("catalog reload after an upstream was reached failed; latch catalog reload retries it", "error", err)
		}
	})
	actors.tokens = srv.Tokens
	return &stack{srv: srv, vault: v, http: hd, closeHost: closeHost, closeUpstreams: upstreams.Close}, nil
}
