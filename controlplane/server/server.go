// Package server assembles a running control plane from a data directory:
// keys, the Badger store, the engine, the journal checkpointer and the gRPC
// API on a unix socket (and optionally TCP). `latch serve` and `latch dev`
// are thin wrappers around it.
//
// # Data directory
//
//	DATA/db/               Badger: executions, results, journal, checkpoints
//	DATA/keys/fingerprint.key   32-byte HMAC key of intent fingerprints (0600)
//	DATA/keys/journal.key       Ed25519 note signer key of checkpoints (0600)
//	DATA/keys/journal.pub       its verifier key (public; audit verify uses it)
//	DATA/control.sock      the gRPC API (0600; 0666, and DATA 0711, when --operator-uid or
//	                       --front-uid let other uids in: SO_PEERCRED decides)
//	DATA/tokens.json       tokens of earlier versions: imported into the store
//	                       once at start, then renamed tokens.json.migrated
//
// On a PostgreSQL store (--store) the data dir holds only the socket (and
// the vault's key file, wherever --vault-key-file puts it): the keys and the
// vault are in the store, sealed by the vault (keys.go), so any number of
// replicas start from their config and the vault's key alone.
//
// # Who may call what
//
// Every RPC on every listener goes through the authz interceptors: the
// unix socket's callers are identified by their uid, the TCP listener's by
// their verified client certificate (mutual TLS 1.3), and each RPC's class in
// authz's table decides. A TCP listener is refused at start without TLS
// unless loopback, and with TLS but no client CA (nobody could be
// identified).
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/lease"
	"github.com/latchhq/latch/controlplane/receipts"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/backends"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/controlplane/witness"
	"github.com/latchhq/latch/internal/loopback"
	"github.com/latchhq/latch/internal/tracing"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Config configures a control plane.
type Config struct {
	Logger  hclog.Logger
	DataDir string
	// Store selects the backend (backends.Open): empty for Badger in
	// DATA/db, or a PostgreSQL connection string. On Badger the keys and
	// the vault are files in DataDir; on PostgreSQL they are in the store,
	// sealed (keys.go). The API socket is in DataDir either way.
	Store string
	// KV, when set, is the backend already opened (by the caller that
	// needed it first, e.g. for the vault on a PostgreSQL store); Store is
	// then ignored and the server closes KV.
	KV store.KV
	// KeySealer seals the fingerprint and journal keys kept in a
	// PostgreSQL store (keys.go); required there, unused on Badger, whose
	// keys are files in DATA/keys.
	KeySealer KeySealer
	// OnActive, when set, is called on a PostgreSQL store once this
	// replica holds the lease, before it loads any state (the vault
	// re-reads its document from the store there).
	OnActive func(context.Context) error
	// VaultWitness, when set, is called once the state is checked (on the
	// active replica) with the store's witness of the vault document: the
	// vault holds its document against it from then on (the vault's
	// SetWitness).
	VaultWitness func(*store.VaultWitness) error
	// Replica names this process in the PostgreSQL store's lease (default
	// the host name); LeaseTTL is the lease's length (DefaultLeaseTTL).
	Replica  string
	LeaseTTL time.Duration
	// Advertise is the address fronts and operators reach this replica's
	// API at, recorded in the lease while it is active so standbys can
	// name it (default: the bound TCP listener, the host name for a
	// wildcard host; without one, unix:// and the socket's path).
	Advertise string
	// Context bounds start-up work in New (default: no bound). A standby
	// does not wait in New: Run serves as a standby until it holds the
	// lease.
	Context context.Context
	// CatalogSource is where the tool catalog is read from, at start and
	// on every reload (catalog.File, catalog.Fixed).
	CatalogSource catalog.Source
	// StaticTokens are agent credentials known without the store (latch
	// dev's dev token).
	StaticTokens []tokens.Static
	// FrontActors binds front identities to actors (latch serve --front-actor).
	FrontActors api.FrontActors
	// Caller tells the API who made a call (default: the caller the authz
	// interceptors identified; operator certificates and local socket
	// callers may act as any actor).
	Caller api.CallerFunc
	// Socket is the unix socket of the API (default DATA/control.sock).
	Socket string
	// Channels perform executions; a channel kind without an entry refuses
	// its executions with a clear reason.
	Channels map[tools.Channel]engine.Channel
	// Authorizer contributes the first rules of the decision order (nil: only
	// the engine's session and approval rules).
	Authorizer engine.Authorizer
	// CheckpointInterval between signed checkpoints (default 30s).
	CheckpointInterval time.Duration
	// CheckpointCopy, when set, is a file each checkpoint is appended to
	// (JSON lines), kept outside the data dir so truncation is provable.
	CheckpointCopy string
	// WitnessURL and WitnessKey, when set, name a witness
	// (c2sp.org/tlog-witness, package witness) that co-signs every
	// checkpoint: the periodic ones before they are stored and copied,
	// and those signed for receipts.
	WitnessURL, WitnessKey string
	// Recovery tunes the recovery worker.
	Recovery engine.RecoveryConfig
	// Sessions sets the session rule of the decision order.
	Sessions engine.SessionConfig
	// Sealer seals secret arguments at rest (engine.Config.Sealer).
	Sealer engine.Sealer
	// FullStateCheckUpTo is the journal size up to which start-up checks
	// all state against the journal before serving (0: store.SmallStore;
	// negative: never). A larger store is checked for its unsettled
	// executions first and the rest in the background (state.go).
	FullStateCheckUpTo int64
	// Register, when set, is called to add more gRPC services once the
	// state is loaded (in New on Badger, at takeover on PostgreSQL); the
	// server passed in has its Store, Engine, Tokens and Catalog set. Only
	// the API's services (apiServices) may be registered: every listener
	// serves them from the start, a standby with NotActive answers.
	Register func(grpc.ServiceRegistrar, *Server)
	// TCPAddr, when set, also serves the API on TCP (for an MCP front on
	// another host). TLS is then required unless the address is loopback.
	TCPAddr string
	// TLS secures the TCP listener. ClientCAs is required with it (mutual
	// TLS: callers are identified by their certificates); the server forces
	// TLS 1.3 and RequireAndVerifyClientCert.
	TLS *tls.Config
	// Access says who may call which RPC: the uids and certificate
	// identities of fronts and operators (Logger and Journal are the
	// server's; PlaintextLoopbackFronts is set for a loopback TCP listener
	// without TLS).
	Access authz.Config
	// Telemetry, when set, receives the metrics and spans (ops.go).
	Telemetry *telemetry.Telemetry
	// Events, when it has sinks, writes the event outbox with the journal
	// and delivers it from the active replica (events.go); its Store,
	// Logger and Holds are the server's.
	Events *events.Config
}

// Server is a running control plane.
type Server struct {
	cfg    Config
	log    hclog.Logger
	Store  *store.Store
	Engine *engine.Engine
	// Tokens are the agents' bearer tokens; Catalog the tool catalog in force.
	Tokens  *tokens.Service
	Catalog *catalog.Manager
	api     *api.Service
	signer  *journal.Signer
	grpc    *grpc.Server
	tcp     *grpc.Server
	lis     net.Listener
	tcpLis  net.Listener
	authz   *authz.Authorizer
	// console is the API's in-process listener for the operator console
	// (console.go): the same services behind the same interceptors.
	console consoleListener
	local   *localConn // the in-process connection (LocalConn)

	ckptMu   sync.Mutex
	ckptSize int64
	// witness co-signs checkpoints (nil: none configured); witnessed
	// counts its answers by result (ops.go).
	witness   *witness.Client
	witnessed *prometheus.CounterVec

	// kv is the backend Store runs on (Store is nil until the state is
	// loaded: a standby has only kv).
	kv store.KV
	// keys are the fingerprint and journal keys (keys.go); verifier is the
	// journal's verifier key (the signer's public half); beat records this
	// replica in a PostgreSQL store's latch_replicas (replicas.go).
	keys     *keySet
	verifier string
	beat     *replicaBeat
	// pg is the backend as a Leaser (PostgreSQL; nil on a backend with
	// no lease: Badger); holder and lease describe the lease this replica
	// takes on it.
	pg     backend.Leaser
	holder string
	lease  *lease.Keeper
	// active is set once the state is loaded and the engine started: the
	// gate interceptors answer NotActive before. role says more (lease.go).
	active   atomic.Bool
	activeCh chan struct{} // closed when active is set
	role     roleState
	services *lateServices
	health   *health.Server

	// backgroundCheck: start-up checked only the unsettled executions (a
	// large store); Run checks the rest while serving (state.go).
	backgroundCheck bool
	// gate, when set, is the start-up check of the unsettled executions,
	// run while serving (state.go).
	gate *store.StartupGate
	// tokenIndexReady, when set, is closed once the token journal index
	// of a store written before it is built (buildTokenIndex, while serving).
	tokenIndexReady chan struct{}

	ops opsState // ops.go

	// outbox delivers the event outbox (events.go; nil: no sinks).
	outbox *events.Outbox
}

// keyPath is a key file of the data dir (datadir.Key).
func keyPath(data, name string) string { return datadir.Key(data, name) }

// New opens the data dir (creating it on first use) and builds the server.
func New(cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("server: a data dir is required (--data)")
	}
	if cfg.CatalogSource == nil {
		return nil, errors.New("server: a catalog is required (--catalog)")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Socket == "" {
		cfg.Socket = datadir.Socket(cfg.DataDir)
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = 30 * time.Second
	}
	log := cfg.Logger
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	kv := cfg.KV
	if kv == nil {
		var err error
		if kv, err = backends.Open(cfg.Context, cfg.Store, datadir.DB(cfg.DataDir), log); err != nil {
			return nil, err
		}
	}
	// Keys come before the lease: a standby with a vault that cannot open
	// them fails now, not at takeover (keys.go).
	keys, err := loadKeys(cfg.Context, log, cfg, kv)
	if err != nil {
		kv.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, log: log.Named("server"), kv: kv, keys: keys, signer: keys.signer, verifier: keys.verifier, services: &lateServices{}, activeCh: make(chan struct{})}
	s.beat = startBeat(log, cfg, kv)
	// On PostgreSQL the replica loads state only once it is active (Run):
	// it holds the lease, and every commit from then on is fenced by its
	// epoch. Until then it serves as a standby.
	s.pg, _ = kv.(backend.Leaser)
	if s.pg != nil {
		s.holder = lease.HolderName(cfg.Replica)
		s.beat.setHolder(s.holder)
		s.lease = lease.NewKeeper()
		fenced := make(map[tools.Channel]engine.Channel, len(cfg.Channels))
		for kind, ch := range cfg.Channels {
			fenced[kind] = engine.Fenced(ch, s.lease)
		}
		s.cfg.Channels = fenced
		s.role.set(RoleStandby, 0)
	} else {
		s.role.set(RoleSingle, 0)
	}
	if err := s.buildListeners(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.observe(); err != nil {
		s.Close()
		return nil, err
	}
	if s.pg == nil {
		if err := s.load(cfg.Context); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// load reads the state from the store and builds what serves it: the
// Store (and its start-up check against the journal), tokens, the catalog,
// the engine and the API, and binds the API's services. On Badger New
// calls it; on PostgreSQL Run does, once this replica holds the lease.
// On failure the caller closes the store (closeStore).
func (s *Server) load(ctx context.Context) error {
	cfg, log := s.cfg, s.cfg.Logger
	if s.pg != nil {
		s.beat.now() // active now
		if cfg.OnActive != nil {
			if err := cfg.OnActive(ctx); err != nil {
				return err
			}
		}
	}
	st, err := store.New(store.Config{Logger: log, KV: observedKV(cfg.Telemetry, s.kv)})
	if err != nil {
		return err
	}
	s.Store = st
	optIn := s.eventSource(st)
	// The token index first: the state check holds tokens against it.
	if err := s.prepareTokenIndex(ctx, log, st); err != nil {
		return err
	}
	// The session index before the engine decides from sessions (the
	// session rule checks an authorized session against it).
	if err := indexSessions(ctx, log, st); err != nil {
		return err
	}
	scope, gate, err := checkState(log, cfg.DataDir, st, cfg.FullStateCheckUpTo)
	if err != nil {
		return err
	}
	s.backgroundCheck, s.gate = scope == store.CheckUnsettled, gate
	if err := journalCreated(ctx, st, s.keys, cfg.Replica); err != nil {
		return fmt.Errorf("server: journal the keys created: %w", err)
	}
	if err := checkSecrets(ctx, log, st, s.keys); err != nil {
		return err
	}
	if cfg.VaultWitness != nil {
		err := cfg.VaultWitness(st.VaultWitness(cfg.Context, nil))
		switch {
		case errors.Is(err, store.ErrStateMismatch):
			return fmt.Errorf("%w: %w (not serving with a vault the journal did not record)", ErrStateMismatch, err)
		case err != nil:
			return fmt.Errorf("server: hold the vault document against the journal: %w", err)
		}
	}
	if err := observeStore(cfg.Telemetry, st); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	anchor, err := copyAnchor(cfg.CheckpointCopy, s.verifier, st.JournalSize())
	if err != nil {
		return err
	}
	tks, err := tokens.New(tokens.Config{Logger: log, Store: st, Static: cfg.StaticTokens, Verifier: s.verifier, IndexReady: s.tokenIndexReady,
		Anchor: anchor})
	if err != nil {
		return err
	}
	if _, err := tks.Migrate(ctx, datadir.LegacyTokens(cfg.DataDir)); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	// The engine exists only after the first catalog is recorded; the
	// manager hands later ones to it.
	var eng *engine.Engine
	cm, err := catalog.Load(ctx, catalog.Config{Logger: log, Store: st, Source: cfg.CatalogSource, OnChange: func(cat *tools.Catalog, version string) {
		if eng != nil {
			eng.SetCatalog(cat, version)
		}
	}})
	if err != nil {
		return err
	}
	cur := cm.Current()
	eng, err = engine.New(engine.Config{
		Logger: log, Store: st, Catalog: cur.Catalog, CatalogVersion: cur.Version, Fingerprinter: s.keys.fp,
		Channels: cfg.Channels, Authorizer: cfg.Authorizer, Recovery: cfg.Recovery, Sessions: sessionConfig(cfg.Sessions, tks),
		Sealer:   cfg.Sealer,
		Observer: engineObserver(cfg.Telemetry),
	})
	if err != nil {
		return err
	}
	optIn.Store(eng)
	if err := s.buildOutbox(st); err != nil {
		return err
	}
	caller := cfg.Caller
	if caller == nil {
		caller = authzCaller
	}
	if cfg.WitnessURL != "" || cfg.WitnessKey != "" {
		if s.witness, err = witness.New(witness.Config{URL: cfg.WitnessURL, Key: cfg.WitnessKey, Journal: st}); err != nil {
			return fmt.Errorf("server: %w (--witness-url and --witness-key go together)", err)
		}
	}
	rcpt, err := receipts.New(receipts.Config{Journal: st, Signer: s.signer, Witness: s.cosigner(), OnWitnessError: s.witnessFailed})
	if err != nil {
		return err
	}
	svc, err := api.New(api.Config{Logger: log, Engine: eng, Tokens: tks, FrontActors: cfg.FrontActors, Caller: caller, Observer: submitObserver(cfg.Telemetry),
		Receipts: rcpt})
	if err != nil {
		return err
	}
	s.Engine, s.Tokens, s.Catalog, s.api = eng, tks, cm, svc
	svc.Register(s.services)
	if cfg.Register != nil {
		cfg.Register(s.services, s)
	}
	if err := s.services.err(); err != nil {
		return err
	}
	if cps, err := st.Checkpoints(); err == nil && len(cps) > 0 {
		if c, err := journal.OpenCheckpoint(cps[len(cps)-1], s.verifier); err == nil {
			s.ckptSize = c.Size
			s.ops.checkpointed(c.Time)
		}
	}
	return nil
}

// buildListeners makes the gRPC servers of the socket and the TCP listener
// with every API service registered (bound to its implementation by load)
// behind the standby gate, and the authorizer.
func (s *Server) buildListeners() error {
	cfg, log := s.cfg, s.cfg.Logger
	access := cfg.Access
	access.Logger, access.Journal, access.ConsoleSession = log, s, s.console.verify
	var tlsCfg *tls.Config
	if cfg.TCPAddr != "" {
		switch {
		case cfg.TLS == nil && !loopback.HostPort(cfg.TCPAddr):
			return fmt.Errorf("server: refusing to serve the API on %s without TLS (pass --tls-cert, --tls-key and --tls-client-ca, or a loopback address)", cfg.TCPAddr)
		case cfg.TLS == nil:
			// Plaintext on loopback: any local process can connect, so
			// its callers are fronts at most; operators use the socket.
			access.PlaintextLoopbackFronts = true
		case cfg.TLS.ClientCAs == nil:
			return fmt.Errorf("server: --tls-cert without --tls-client-ca: no TCP caller could be identified as a front or an operator; pass --tls-client-ca with the CA that signs the fronts' and operators' client certificates")
		default:
			tlsCfg = cfg.TLS.Clone()
			tlsCfg.MinVersion = tls.VersionTLS13
			tlsCfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	az, err := authz.New(access)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if tlsCfg != nil && !az.HasTLSIdentities() {
		return fmt.Errorf("server: the TCP listener %s would refuse every caller: list the client certificates' identities with --front-identity or --operator-identity (cn:NAME or the certificate's URI SAN)", cfg.TCPAddr)
	}
	s.authz = az
	// The gate comes first: a standby answers NotActive before any
	// authorization (it has no store to journal a refusal in, and what it
	// says, the active's advertised address, every front is configured
	// with anyway). Health passes to show the role.
	unary := []grpc.UnaryServerInterceptor{s.gateUnary, recoverUnary(log), tracing.UnaryServer(), az.UnaryInterceptor(), credentialUnary, logUnary(log)}
	interceptors := func() []grpc.ServerOption {
		return []grpc.ServerOption{
			grpc.ChainUnaryInterceptor(unary...),
			grpc.ChainStreamInterceptor(s.gateStream, recoverStream(log), tracing.StreamServer(), az.StreamInterceptor(), credentialStream),
			// Calls run on long-lived goroutines whose stacks have grown
			// already: a goroutine per call grew its stack from the start
			// on every Submit (argument validation, the journal, the
			// wait), ~30 µs of CPU per call through the MCP front at
			// c=32 (docs/contributing/benchmarks.md, "Where the time of an MCP call goes"). Past
			// streamWorkers calls in flight gRPC starts goroutines again.
			grpc.NumStreamWorkers(streamWorkers),
		}
	}
	s.health = health.NewServer()
	s.health.SetServingStatus(HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	g := grpc.NewServer(append(interceptors(), grpc.Creds(authz.UnixCredentials()))...)
	s.services.registerOn(g, s.Active, s.notActive)
	healthpb.RegisterHealthServer(g, s.health)
	s.grpc = g
	s.console.srv = grpc.NewServer(append(interceptors(), grpc.Creds(authz.ConsoleCredentials()))...)
	s.services.registerOn(s.console.srv, s.Active, s.notActive)
	s.console.lis = bufconn.Listen(consoleBuffer)
	s.local = s.newLocalConn(unary)
	if cfg.TCPAddr != "" {
		opts := append(interceptors(),
			// A connection is re-made (and its certificate checked again)
			// within MaxConnectionAge; the grace outlasts a Submit's
			// longest wait, so no call in flight is cut.
			grpc.KeepaliveParams(keepalive.ServerParameters{
				MaxConnectionAge: tcpMaxConnectionAge, MaxConnectionAgeGrace: tcpMaxConnectionAgeGrace,
				Time: 2 * time.Minute, Timeout: 20 * time.Second,
			}))
		if tlsCfg != nil {
			opts = append(opts, grpc.Creds(&handshakeLog{TransportCredentials: credentials.NewTLS(tlsCfg), log: s.log}))
		}
		s.tcp = grpc.NewServer(opts...)
		s.services.registerOn(s.tcp, s.Active, s.notActive)
		healthpb.RegisterHealthServer(s.tcp, s.health)
	}
	return nil
}

// HealthService is the gRPC health service name that is SERVING only on
// the replica that serves the API (the active one, or a Badger store's
// only one); "" is SERVING while the process serves at all, standby too.
const HealthService = "latch.controlplane.v1.ControlPlane"

// Close releases what New opened, for a server whose Run was not called.
func (s *Server) Close() error {
	s.stopLease()
	s.beat.stop()
	return s.closeStore()
}

// closeStore closes the Store when loaded, else the backend.
func (s *Server) closeStore() error {
	if s.Store != nil {
		return s.Store.Close()
	}
	return s.kv.Close()
}

// Active reports whether this replica serves the API: its state is
// loaded and its engine started. Store, Engine, Tokens and Catalog may
// be read once it is true.
func (s *Server) Active() bool { return s.active.Load() }

// Loaded reports whether Store, Engine, Tokens and Catalog are set: after
// New on Badger, once active on PostgreSQL.
func (s *Server) Loaded() bool { return s.pg == nil || s.Active() }

// ActiveC is closed once the replica serves the API (Active).
func (s *Server) ActiveC() <-chan struct{} { return s.activeCh }

// CatalogManager is the catalog in force, nil before the state is loaded.
func (s *Server) CatalogManager() *catalog.Manager {
	if !s.Active() {
		return nil
	}
	return s.Catalog
}

// maxUnixPath is the longest path a unix socket can bind on Linux
// (sockaddr_un.sun_path holds 108 bytes with the terminating NUL).
const maxUnixPath = 107

// Listen binds the API socket. Run calls it when it was not called before.
func (s *Server) Listen() error {
	if s.lis != nil {
		return nil
	}
	if n := len(s.cfg.Socket); n > maxUnixPath {
		return fmt.Errorf("server: the API socket path %s is %d bytes, and Linux allows at most %d for a unix socket: use a shorter --data path", s.cfg.Socket, n, maxUnixPath)
	}
	if c, err := net.DialTimeout("unix", s.cfg.Socket, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("server: %s is in use: another latch control plane serves this data dir", s.cfg.Socket)
	}
	os.Remove(s.cfg.Socket) // a stale socket from a crash
	lis, err := net.Listen("unix", s.cfg.Socket)
	if err != nil {
		return fmt.Errorf("server: listen on %s: %w", s.cfg.Socket, err)
	}
	mode := os.FileMode(0o600)
	if s.authz.HasSocketGuests() {
		// Other uids are allowed: they must be able to connect; the
		// peer-uid check on every RPC decides what they may call.
		mode = 0o666
		if err := s.openSocketDir(); err != nil {
			lis.Close()
			return err
		}
	}
	if err := os.Chmod(s.cfg.Socket, mode); err != nil {
		lis.Close()
		return fmt.Errorf("server: chmod %s: %w", s.cfg.Socket, err)
	}
	s.lis = lis
	if s.tcp != nil {
		tl, err := net.Listen("tcp", s.cfg.TCPAddr)
		if err != nil {
			lis.Close()
			return fmt.Errorf("server: listen on %s: %w", s.cfg.TCPAddr, err)
		}
		s.tcpLis = tl
	}
	return nil
}

// openSocketDir lets other uids traverse to the socket: the directory
// holding it gets search permission (x) for group and others, never read
// or write. Everything in the data dir stays 0700/0600 (keys, db, vault).
func (s *Server) openSocketDir() error {
	dir := filepath.Dir(s.cfg.Socket)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("server: %s: %w", dir, err)
	}
	if want := fi.Mode().Perm() | 0o011; want != fi.Mode().Perm() {
		if err := os.Chmod(dir, want); err != nil {
			return fmt.Errorf("server: let --operator-uid/--front-uid reach the socket: chmod %s: %w", dir, err)
		}
		s.log.Info("socket directory made traversable for the allowed uids", "dir", dir, "mode", want.String())
	}
	return nil
}

// TCPAddr is the bound TCP address of the API, or "" when it serves only
// on its socket.
func (s *Server) TCPAddr() string {
	if s.tcpLis == nil {
		return ""
	}
	return s.tcpLis.Addr().String()
}

// Run serves until ctx ends, then shuts down cleanly: the API stops, the
// engine stops (in-flight executions stay dispatched and are recovered at the
// next start), a final checkpoint is signed and the store is closed.
//
// On PostgreSQL the listeners serve from the start: as a standby (every
// RPC but health answers NotActive naming the active replica) until this
// replica takes the lease, then it loads the state, starts the engine,
// whose start-up scan recovers everything the previous active left in
// flight, exactly as after a crash, and serves.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		s.Close()
		return err
	}
	s.role.mu.Lock()
	s.role.address = s.advertise()
	s.role.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	if s.pg == nil {
		s.serveActive(gctx, g)
	} else {
		s.log.Info("control plane serving as a standby until it holds the store lease", "socket", s.cfg.Socket, "tcp", s.TCPAddr(), "address", s.Role().Address)
		g.Go(func() error { return s.takeOver(gctx, g) })
	}
	g.Go(func() error { return s.grpc.Serve(s.lis) })
	g.Go(func() error { return s.console.srv.Serve(s.console.lis) })
	s.local.serve()
	if s.tcp != nil {
		g.Go(func() error { return s.tcp.Serve(s.tcpLis) })
	}
	for _, task := range s.ops.tasks {
		g.Go(func() error { return task(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		s.health.Shutdown() // every service NOT_SERVING: clients move on now
		if s.Active() {
			s.api.Drain() // long polls (ListTools) answer now instead of holding GracefulStop
		}
		s.local.stop()
		for _, g := range []*grpc.Server{s.grpc, s.tcp, s.console.srv} {
			if g == nil {
				continue
			}
			stopped := make(chan struct{})
			go func() { g.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				g.Stop()
			}
		}
		return nil
	})
	err := g.Wait()
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	lost := errors.Is(err, ErrLeaseLost)
	if !lost {
		if cerr := s.shutdown(err); cerr != nil && err == nil {
			err = cerr
		}
		return err
	}
	// The lease was lost, often because the database stopped answering:
	// closing the store may wait on a connection stuck in a query, so the
	// process is not kept for it. Nothing is sent any more (the deadline
	// passed); what is left in flight a standby recovers.
	done := make(chan struct{})
	go func() { s.shutdown(err); close(done) }()
	select {
	case <-done:
	case <-time.After(leaseLostShutdown):
		os.Remove(s.cfg.Socket)
		s.log.Warn("stopped without waiting for the store to close: the database does not answer", "waited", leaseLostShutdown)
	}
	return err
}

// leaseLostShutdown bounds the clean-up of a replica that lost its lease.
const leaseLostShutdown = 5 * time.Second

// shutdown stops the engine, signs a final checkpoint (not after the lease
// was lost: it could not commit), hands the lease over and closes the
// store; runErr is why Run ended.
func (s *Server) shutdown(runErr error) error {
	lost := errors.Is(runErr, ErrLeaseLost)
	loaded := s.Engine != nil // g.Wait orders takeOver's writes before this read
	if loaded {
		s.authz.Flush(context.Background())
		s.Engine.Close()
		if !lost {
			if cerr := s.Checkpoint(context.Background()); cerr != nil {
				s.log.Error("final checkpoint failed", "error", cerr)
			}
		}
	}
	held := s.lease.Started()
	s.stopLease()
	s.beat.stop()
	if held && !lost {
		// Hand over at once instead of making a standby wait out the ttl.
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if rerr := s.pg.ReleaseLease(rctx, s.holder); rerr != nil {
			s.log.Warn("could not release the store lease; a standby takes over when it expires", "error", rerr)
		}
		cancel()
	}
	size := int64(-1)
	if s.Store != nil {
		size = s.Store.JournalSize()
	}
	err := s.closeStore()
	os.Remove(s.cfg.Socket)
	s.log.Info("control plane stopped", "journal_size", size)
	return err
}

// takeOver waits for the lease as a standby, then makes this replica the
// active one: renewals start, the state is loaded, the engine starts (its
// start-up scan recovers what the previous active left in flight) and the
// API is served. It returns nil when ctx ends first.
func (s *Server) takeOver(ctx context.Context, g *errgroup.Group) error {
	log := s.cfg.Logger.Named("lease")
	addr := s.Role().Address
	acquired, err := lease.Acquire(ctx, log, s.pg, s.holder, addr, s.cfg.LeaseTTL, s.role.observe)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	start := time.Now()
	s.lease.Start(log, s.pg, s.holder, s.cfg.LeaseTTL, acquired)
	s.role.set(RoleTakingOver, s.pg.Epoch())
	g.Go(func() error {
		select {
		case err := <-s.lease.Lost():
			return err
		case <-ctx.Done():
			return nil
		}
	})
	if err := s.load(ctx); err != nil {
		return fmt.Errorf("server: taking over: %w", err)
	}
	s.serveActive(ctx, g)
	s.log.Info("took over: this replica is the active control plane", "epoch", s.pg.Epoch(), "address", addr, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// serveActive opens the gate: the API answers, health says SERVING, and
// the active's own tasks start.
func (s *Server) serveActive(ctx context.Context, g *errgroup.Group) {
	if s.pg != nil {
		s.role.set(RoleActive, s.pg.Epoch())
	}
	// Health first: once any API call is answered, health says SERVING
	// (the other order let a client that was just answered see
	// NOT_SERVING for a moment).
	s.health.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
	s.active.Store(true)
	close(s.activeCh)
	s.log.Info("control plane ready", "socket", s.cfg.Socket, "tcp", s.TCPAddr(), "journal_size", s.Store.JournalSize())
	// The engine's start-up scan (the unsettled executions to resume) runs
	// while serving: on a large store it takes seconds, and nothing needs
	// it first (an unsettled execution is checked before it is acted on,
	// state.go). Engine.Close runs after g.Wait, so never during Start.
	g.Go(func() error {
		if err := s.Engine.Start(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	})
	g.Go(func() error { return s.checkpointLoop(ctx) })
	if s.outbox != nil {
		g.Go(func() error { return s.outbox.Run(ctx) })
	}
	g.Go(func() error { return s.watchTokens(ctx) })
	g.Go(func() error { return s.watchSessions(ctx) })
	if s.tokenIndexReady != nil {
		g.Go(func() error { return s.buildTokenIndex(ctx) })
	}
	if s.backgroundCheck {
		g.Go(func() error { return s.backgroundChecks(ctx) })
	}
}

// sessionConfig is the session rule's configuration with the anchor an
// authorized session's journal record is proven against: the one tokens
// are proven against.
func sessionConfig(c engine.SessionConfig, tks *tokens.Service) engine.SessionConfig {
	if c.Anchor == nil {
		c.Anchor = tks.Anchor
	}
	return c
}

// gateUnary answers NotActive while this replica does not serve the API
// (a standby, or one still taking over); health always passes.
func (s *Server) gateUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !s.active.Load() && !strings.HasPrefix(info.FullMethod, "/grpc.health.v1.Health/") {
		return nil, s.notActive()
	}
	return h(ctx, req)
}

func (s *Server) gateStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if !s.active.Load() && !strings.HasPrefix(info.FullMethod, "/grpc.health.v1.Health/") {
		return s.notActive()
	}
	return h(srv, ss)
}

func (s *Server) checkpointLoop(ctx context.Context) error {
	t := time.NewTicker(s.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.Checkpoint(ctx); err != nil {
				s.log.Error("checkpoint failed", "error", err)
			}
		}
	}
}

// Checkpoint signs and stores a checkpoint of the journal when it grew
// since the last one, and appends it to the external copy when configured.
func (s *Server) Checkpoint(ctx context.Context) error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	var note []byte
	err := s.Store.Update(ctx, func(tx *store.Tx) error {
		n, root, err := tx.TreeHash()
		if err != nil || n == s.ckptSize {
			return err
		}
		note, err = s.signer.Sign(n, root, time.Now())
		if err != nil {
			return err
		}
		tx.PutCheckpoint(n, note)
		s.ckptSize = n
		return nil
	})
	if err == nil && note != nil {
		s.ops.checkpointed(time.Now())
	}
	if err != nil || note == nil {
		return err
	}
	if s.witness != nil {
		note = s.cosignStored(ctx, note)
	}
	if s.cfg.CheckpointCopy == "" {
		return nil
	}
	return appendCopy(s.cfg.CheckpointCopy, note)
}

// cosignStored has the witness co-sign the stored checkpoint note of size
// s.ckptSize and stores it co-signed; it returns the note to copy (the
// co-signed one, or the note as signed when the witness did not co-sign:
// the failure is logged and counted, the next checkpoint tries again).
func (s *Server) cosignStored(ctx context.Context, note []byte) []byte {
	n := s.ckptSize
	cosigned, err := s.witness.Cosign(ctx, n, note)
	if errors.Is(err, witness.ErrStale) {
		// A receipt's checkpoint, newer than this one, was co-signed.
		s.countWitness("stale")
		return note
	}
	if err != nil {
		s.witnessFailed(err)
		return note
	}
	s.countWitness("cosigned")
	if err := s.Store.Update(ctx, func(tx *store.Tx) error {
		tx.PutCheckpoint(n, cosigned)
		return nil
	}); err != nil {
		s.log.Error("store the witness's cosignature", "size", n, "error", err)
		return note
	}
	return cosigned
}

// cosigner is the witness as receipts.Issuer takes it (nil: none).
func (s *Server) cosigner() receipts.Cosigner {
	if s.witness == nil {
		return nil
	}
	return countingCosigner{s}
}

// countingCosigner counts the receipts' cosignatures with the periodic
// ones.
type countingCosigner struct{ s *Server }

func (c countingCosigner) Cosign(ctx context.Context, size int64, note []byte) ([]byte, error) {
	out, err := c.s.witness.Cosign(ctx, size, note)
	if err == nil {
		c.s.countWitness("cosigned")
	}
	return out, err
}

// witnessFailed logs and counts a witness's failure to co-sign. A fork
// is an error an operator must look at; the others are warnings.
func (s *Server) witnessFailed(err error) {
	switch {
	case errors.Is(err, witness.ErrFork):
		s.countWitness("fork")
		s.log.Error("the witness refuses this journal: it co-signed a checkpoint these records do not extend", "witness", s.witness.Name(), "error", err)
	case errors.Is(err, witness.ErrStale):
		s.countWitness("stale")
	case errors.Is(err, witness.ErrRefused):
		s.countWitness("refused")
		s.log.Warn("the witness refused a checkpoint", "witness", s.witness.Name(), "error", err)
	default:
		s.countWitness("unavailable")
		s.log.Warn("the witness did not co-sign a checkpoint", "witness", s.witness.Name(), "error", err)
	}
}

func appendCopy(path string, note []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("server: checkpoint copy: %w", err)
	}
	line, _ := json.Marshal(map[string]string{"type": "checkpoint", "note": string(note)})
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("server: checkpoint copy: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("server: checkpoint copy: %w", err)
	}
	return f.Close()
}

// streamWorkers is how many goroutines serve gRPC calls (the concurrency
// of the fronts' calls a control plane expects to carry at once).
const streamWorkers = 64

func recoverUnary(log hclog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("panic in handler", "method", info.FullMethod, "panic", p)
				err = status.Error(codes.Internal, "internal error in the control plane; see its log")
			}
		}()
		return h(ctx, req)
	}
}

// logUnary logs every call at debug level: method, code and duration
// (never the request: it may carry arguments and passphrases).
func logUnary(log hclog.Logger) grpc.UnaryServerInterceptor {
	log = log.Named("grpc")
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		if log.IsDebug() {
			log.Debug("call", "method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start))
		}
		return resp, err
	}
}

func recoverStream(log hclog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("panic in handler", "method", info.FullMethod, "panic", p)
				err = status.Error(codes.Internal, "internal error in the control plane; see its log")
			}
		}()
		return h(srv, ss)
	}
}

// Bounds of a TCP connection's life (see New).
const (
	tcpMaxConnectionAge      = time.Hour
	tcpMaxConnectionAgeGrace = 15 * time.Minute
)

// RecordRefusal journals a refused RPC (authz.Journal): kind
// "access_denied", the caller's identity as the actor, the RPC and the
// reason in the reason. Never a request's content.
func (s *Server) RecordRefusal(ctx context.Context, r authz.Refusal) error {
	if !s.Active() {
		// Only health reaches authorization on a standby; with no state
		// loaded there is no journal to write to: the refusal is logged.
		s.log.Warn("refused a call on a standby (not journaled: no state loaded)", "caller", r.Caller.Identity, "reason", r.JournalReason())
		return nil
	}
	return s.Store.Update(ctx, func(tx *store.Tx) error {
		_, err := tx.Append(&recordv1.JournalEntry{
			Time: timestamppb.New(r.Time), EntryKind: authz.JournalKind,
			Actor: r.Caller.Identity, Reason: r.JournalReason(),
		})
		return err
	})
}

// Services lists the gRPC services of the API and their methods (the
// same on every listener).
func (s *Server) Services() map[string]grpc.ServiceInfo { return s.grpc.GetServiceInfo() }

// handshakeLog logs refused TLS handshakes (no client certificate, one
// from another CA, an old TLS version): they never reach an RPC, so they
// are not journaled (unauthenticated network noise must not be able to
// grow the audit journal), but an operator sees them, at most one line
// per handshakeLogEvery with the count in between.
type handshakeLog struct {
	credentials.TransportCredentials
	log hclog.Logger

	mu      sync.Mutex
	last    time.Time
	dropped int
}

const handshakeLogEvery = 10 * time.Second

func (h *handshakeLog) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := h.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		h.mu.Lock()
		now := time.Now()
		if now.Sub(h.last) < handshakeLogEvery {
			h.dropped++
			h.mu.Unlock()
			return c, info, err
		}
		dropped := h.dropped
		h.last, h.dropped = now, 0
		h.mu.Unlock()
		h.log.Warn("TLS handshake refused", "peer", conn.RemoteAddr().String(), "error", err, "refused_since_last_line", dropped)
	}
	return c, info, err
}

func (h *handshakeLog) Clone() credentials.TransportCredentials {
	return &handshakeLog{TransportCredentials: h.TransportCredentials.Clone(), log: h.log}
}

// authzCaller is the API's view of the caller the authz interceptors
// identified: operators (certificate or local socket) may act as any actor;
// a front is named by its identity (uid:N, its certificate's URI SAN or
// cn:NAME), which --front-actor binds to actors.
func authzCaller(ctx context.Context) api.Caller {
	c, ok := authz.CallerFrom(ctx)
	if !ok {
		return api.Caller{}
	}
	return api.Caller{Identity: c.Identity, Operator: c.Role >= authz.RoleOperator}
}
