// Package stack is the control plane's composition root: it builds the
// store, vault, keys, engine channels and server from one Config, for
// latch serve and latch dev alike. Only commands (controlplane/cli) and
// tests import it.
package stack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/latchhq/latch/controlplane/admin"
	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/mcpchannel"
	"github.com/latchhq/latch/controlplane/policy"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/backends"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/buildinfo"
)

// Config is what serve and dev share.
type Config struct {
	Logger   hclog.Logger
	DataDir  string
	Store    string
	Replica  string
	LeaseTTL time.Duration
	// Advertise is the address the replica's API is reached at (server.Config.Advertise).
	Advertise string
	// Context bounds start-up waits (a standby waiting for the lease).
	Context        context.Context
	Catalog        catalog.Source
	CheckpointCopy string
	// WitnessURL and WitnessKey name the witness that co-signs the
	// checkpoints (server.Config).
	WitnessURL, WitnessKey string
	// CheckpointInterval between signed checkpoints (0: the server's 30s).
	CheckpointInterval time.Duration
	// VaultPath defaults to DATA/vault.json.
	VaultPath string
	// VaultKeyFile unlocks the vault at start; when no vault exists yet, it
	// is created keyed by this file (and the file too when absent).
	VaultKeyFile string
	// VaultPassphraseFile unlocks a passphrase vault at start with the
	// file's first line; when no vault exists yet, it is created with it.
	VaultPassphraseFile string
	DevVault            bool
	Recovery            engine.RecoveryConfig
	// Actors are known without a token (stdio actors, the dev actor).
	Actors []string
	// Trusted actors' sessions need no authorization.
	Trusted []string
	// OpenSessions turns the session rule off (every session authorized).
	OpenSessions bool
	// BindRuns binds a run id's session to the MCP session (else token)
	// that named it (engine.SessionConfig.BindRuns).
	BindRuns bool
	// FrontActors binds front identities to the actors they may act as
	// without an agent credential (--front-actor).
	FrontActors api.FrontActors
	// StaticTokens are credentials known without the store (the dev token).
	StaticTokens []tokens.Static
	// CommandArgs are appended to the operator commands the engine logs
	// for pending sessions and approvals ("--data DIR").
	CommandArgs string
	// UpstreamMaxDescription caps upstream tool descriptions as agents
	// see them (0: mcpchannel.DefaultMaxDescription).
	UpstreamMaxDescription int
	// TCPAddr and TLS serve the API on TCP too (server.Config).
	TCPAddr string
	TLS     *tls.Config
	// Access says who may call which RPC (server.Config.Access).
	Access authz.Config
	// Telemetry receives the control plane's metrics and spans (nil: none).
	Telemetry *telemetry.Telemetry
	// Version is the build's version, told to upstream MCP servers.
	Version string
	// Events configures the event sinks (server.Config.Events; nil or no
	// sinks: none). Their signing secrets are read from the vault: the
	// token of the bearer credential a sink's secret= names.
	Events *events.Config
}

// Defaults of the flags that set Config fields.
const (
	// DefaultLeaseTTL is Config.LeaseTTL's default (server.DefaultLeaseTTL).
	DefaultLeaseTTL = server.DefaultLeaseTTL
	// DefaultMaxDescription is Config.UpstreamMaxDescription's default
	// (mcpchannel.DefaultMaxDescription).
	DefaultMaxDescription = mcpchannel.DefaultMaxDescription
)

// DevRecovery is latch dev's Config.Recovery: it resolves unknowns quickly
// so the demo's story is short.
func DevRecovery() engine.RecoveryConfig {
	return engine.RecoveryConfig{Interval: 500 * time.Millisecond, MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second}
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

// Stack is a control plane with its vault, tokens and channels.
type Stack struct {
	Server *server.Server
	Vault  *vault.Vault
	// closeChannels releases the channels' connections: HTTP, host
	// agents and SSH, upstream MCP servers.
	closeChannels func()
	closeOnce     sync.Once
}

// Go adds a subsystem to Run: it runs with the server's own tasks under one
// errgroup, and the first of them to fail cancels the rest. Call it before
// Run (the ops listener, the console's streams).
func (s *Stack) Go(task func(context.Context) error) { s.Server.Go(task) }

// Run serves until ctx ends or a subsystem fails, then releases the
// channels' connections.
func (s *Stack) Run(ctx context.Context) error {
	defer s.Close()
	return s.Server.Run(ctx)
}

// Close releases the channels' connections (after the server stopped); a
// stack that never ran is closed with it too. Close may be called again.
func (s *Stack) Close() {
	s.closeOnce.Do(func() {
		s.closeChannels()
	})
}

// New fills cfg's defaults (the vault in the data dir, latch dev's vault
// key file) and builds the control plane: the store's backend, the vault,
// the channels and the server. Close it, or Run it.
func New(cfg Config) (*Stack, error) {
	log := cfg.Logger
	if cfg.VaultPath == "" {
		cfg.VaultPath = datadir.Vault(cfg.DataDir)
	}
	if err := ensureDir(cfg.DataDir); err != nil {
		return nil, err
	}
	// A vault lock or unlock voids pending approvals (docs/design §9). The engine
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
	// The embedded default (DATA/db) is opened by the server; any other
	// --store value is opened here, so that a store that keeps the vault
	// (backend.VaultRow: PostgreSQL, next to the keys it seals, for every
	// replica) gives its document to the vault before the vault opens.
	var kv store.KV
	var storage vault.Storage
	if cfg.Store != "" {
		ctx := cfg.Context
		if ctx == nil {
			ctx = context.Background()
		}
		var err error
		if kv, err = backends.Open(ctx, cfg.Store, datadir.DB(cfg.DataDir), log); err != nil {
			return nil, err
		}
		if vr, ok := kv.(backend.VaultRow); ok {
			storage = vr.VaultDocument()
			if err := importVaultFile(log, cfg.VaultPath, storage); err != nil {
				kv.Close()
				return nil, err
			}
		}
	}
	closeKV := func() {
		if kv != nil {
			kv.Close()
		}
	}
	v, err := vault.New(vault.Config{Path: cfg.VaultPath, Storage: storage, Logger: log, OnChange: onChange})
	if err != nil {
		closeKV()
		return nil, err
	}
	if cfg.DevVault && cfg.VaultKeyFile == "" {
		cfg.VaultKeyFile = datadir.DevVaultKey(cfg.DataDir)
	}
	if err := unlockAtStart(v, cfg.VaultKeyFile, cfg.VaultPassphraseFile); err != nil {
		closeKV()
		return nil, err
	}
	// Every channel kind of the registry (channels.BuiltIn); the mcp
	// channel also binds every catalog load to the upstreams' schemas.
	chans, err := channels.Default().Build(channels.Deps{Logger: log, Vault: v, TrustOnFirstUse: cfg.DevVault, DataDir: cfg.DataDir, Version: buildinfo.Read().Version, UpstreamMaxDescription: cfg.UpstreamMaxDescription})
	if err != nil {
		closeKV()
		return nil, err
	}
	upstreams := chans.Upstreams()
	cfg.Catalog = upstreams.Source(cfg.Catalog)
	trusted := setOf(cfg.Trusted)
	actors := &actorSet{fixed: setOf(cfg.Actors, cfg.Trusted)}
	for _, as := range cfg.FrontActors {
		for _, a := range as {
			actors.fixed[a] = true
			actors.any = actors.any || a == "*"
		}
	}
	srv, err := server.New(server.Config{
		Logger: log, DataDir: cfg.DataDir, Store: cfg.Store, KV: kv, KeySealer: v.KeySealer(), OnActive: func(context.Context) error {
			// The replica active before this one may have changed the
			// credentials since this one read the vault.
			return v.Reload()
		},
		VaultWitness: func(w *store.VaultWitness) error { return v.SetWitness(w) },
		Replica:      cfg.Replica, LeaseTTL: cfg.LeaseTTL, Advertise: cfg.Advertise, Context: cfg.Context, CatalogSource: cfg.Catalog, CheckpointCopy: cfg.CheckpointCopy,
		CheckpointInterval: cfg.CheckpointInterval, WitnessURL: cfg.WitnessURL, WitnessKey: cfg.WitnessKey,
		Channels: chans.Channels, Recovery: cfg.Recovery,
		Authorizer:   &policy.Policy{Vault: v, Actors: actors},
		Sessions:     engine.SessionConfig{Required: !cfg.OpenSessions, Trusted: func(a string) bool { return trusted[a] }, CommandArgs: cfg.CommandArgs, BindRuns: cfg.BindRuns},
		StaticTokens: cfg.StaticTokens, FrontActors: cfg.FrontActors,
		// Called once the state is loaded (at takeover on PostgreSQL).
		Register: func(g grpc.ServiceRegistrar, s *server.Server) {
			adm, err := admin.New(admin.Config{Logger: log, Vault: v, Tokens: s.Tokens, Catalog: s.Catalog, Upstreams: upstreams,
				Events: admin.Events{Store: s.Store, Outbox: s.Outbox()}, Store: s.Store})
			if err != nil {
				panic(err) // every dependency is set: a bug, not an input
			}
			adm.Register(g)
			eng.Store(s.Engine)
			actors.tokens = s.Tokens
		},
		TCPAddr: cfg.TCPAddr, TLS: cfg.TLS, Access: cfg.Access,
		Sealer:    v.ArgumentSealer(),
		Telemetry: cfg.Telemetry,
		Events:    eventsConfig(cfg.Events, v),
	})
	if err != nil {
		chans.Close()
		return nil, err
	}
	upstreams.SetReload(func(trigger string) {
		// A standby has no catalog loaded yet: it reads the catalog, and
		// reaches its upstreams, when it takes over.
		m := srv.CatalogManager()
		if m == nil {
			return
		}
		if _, err := m.Reload(context.Background(), trigger); err != nil {
			log.Warn("catalog reload after an upstream was reached failed; latch catalog reload retries it", "error", err)
		}
	})
	return &Stack{Server: srv, Vault: v, closeChannels: chans.Close}, nil
}

// unlockAtStart unlocks the vault with a key file or a passphrase file,
// creating the vault (and an absent key file) when there is none yet. A
// replica that loses the race to create it in a shared store reads the
// winner's and unlocks that.
func unlockAtStart(v *vault.Vault, keyFile, passFile string) error {
	if keyFile != "" && passFile != "" {
		return errors.New("--vault-key-file and --vault-passphrase-file both unlock the vault: give one")
	}
	var initFn, unlockFn func() error
	switch {
	case keyFile != "":
		initFn = func() error { return v.InitWithKeyFile(keyFile) }
		unlockFn = func() error { return v.UnlockWithKeyFile(keyFile) }
	case passFile != "":
		b, err := os.ReadFile(passFile)
		if err != nil {
			return fmt.Errorf("vault: --vault-passphrase-file: %w", err)
		}
		pass := []byte(strings.TrimRight(strings.SplitN(string(b), "\n", 2)[0], "\r"))
		clear(b)
		defer clear(pass)
		if len(pass) == 0 {
			return fmt.Errorf("vault: --vault-passphrase-file %s: the first line is empty", passFile)
		}
		initFn = func() error { return v.Init(pass) }
		unlockFn = func() error { return v.Unlock(pass) }
	default:
		return nil
	}
	var err error
	if !v.Status().Initialized {
		err = initFn()
		if errors.Is(err, vault.ErrExists) {
			// Another replica created it first: open that one.
			if err = v.Reload(); err == nil {
				err = unlockFn()
			}
		}
	} else {
		err = unlockFn()
	}
	switch {
	case errors.Is(err, vault.ErrWrongPassphrase) && keyFile != "":
		return fmt.Errorf("--vault-key-file %s does not open the vault in %s (%w): give every replica the key file the vault was created with", keyFile, v.Status().Path, err)
	case errors.Is(err, vault.ErrWrongPassphrase):
		return fmt.Errorf("--vault-passphrase-file %s does not open the vault in %s (%w)", passFile, v.Status().Path, err)
	case err != nil:
		return fmt.Errorf("vault: %w", err)
	}
	return nil
}

// importVaultFile copies a vault file into a PostgreSQL store that has no
// vault yet (a single node moving to PostgreSQL keeps its credentials);
// once the store has one, the file is not read.
func importVaultFile(log hclog.Logger, path string, dst vault.Storage) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vault: read %s to import it into the store: %w", path, err)
	}
	if _, err := dst.Load(); err == nil {
		log.Warn("ignoring the vault file: on a PostgreSQL store the vault is the one in the store", "file", path)
		return nil
	}
	err = dst.Create(data)
	switch {
	case errors.Is(err, os.ErrExist):
		log.Warn("ignoring the vault file: another replica put a vault in the store first", "file", path)
		return nil
	case err != nil:
		return fmt.Errorf("vault: import %s into the store: %w", path, err)
	}
	log.Info("imported the vault file into the PostgreSQL store; every replica now opens that one and the file is no longer read", "file", path)
	return nil
}

func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", dir, err)
	}
	return nil
}

// eventsConfig is c with the sinks' secrets read from v.
func eventsConfig(c *events.Config, v *vault.Vault) *events.Config {
	if c == nil {
		return nil
	}
	out := *c
	out.Secret = func(name string) (string, error) {
		cred, err := v.Get(name)
		if err != nil {
			return "", err
		}
		if t := cred.Get("token"); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("credential %s holds no token: store the whsec_ secret with latch vault put %s --kind bearer", name, name)
	}
	return &out
}
