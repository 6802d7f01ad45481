// Package mcpfront is the MCP server agents talk to: it serves the control
// plane's catalog tools as MCP tools (ListTools, followed as the catalog
// version changes: tools.go), authenticates callers to actors through the
// control plane (AuthenticateAgent, cached briefly: agentauth.go), submits
// each call to the control plane with the agent's credential (the control
// plane decides whether it is a new execution or the same one again) and
// waits on the execution, streaming progress, until it rests.
//
// It serves Streamable HTTP in both protocol eras on one path (stateful
// 2025-11-25 with resumable streams, stateless 2026-07-28) and stdio. It never
// decides an execution's fate: a disconnect only stops the wait; only an
// explicit cancel reaches ControlPlane.Cancel.
//
// It talks to the control plane only through controlplanev1.ControlPlaneClient.
// Imported by the latch-mcp and latch commands.
package mcpfront

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchhq/latch/internal/mcpwire"
	"github.com/latchhq/latch/internal/tracing"
	"github.com/latchhq/latch/mcpfront/auth"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// Defaults.
const (
	DefaultWaitBound        = 50 * time.Second
	DefaultProgressInterval = 10 * time.Second
	// MaxProgressInterval keeps clients with a 60 s timeout (most of them)
	// well fed even if one notification is lost.
	MaxProgressInterval = 15 * time.Second
	// DefaultLoopbackActor is the actor of unauthenticated loopback callers
	// when no TokenVerifier is configured.
	DefaultLoopbackActor = "local"
	// sessionTimeout closes idle 2025-11-25 sessions and their stored events.
	sessionTimeout = 30 * time.Minute
)

var (
	// ErrBadConfig is returned by New for a missing dependency or bad bound.
	ErrBadConfig = errors.New("mcpfront: bad configuration")
)

// TokenVerifier maps a bearer token to an actor. Implemented by
// *ControlPlaneTokens (the control plane's tokens, asked over the API).
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (actor string, tokenID string, err error)
}

// CredentialForwarder is implemented by verifiers whose tokens the control
// plane authenticates itself (*ControlPlaneTokens): the front sends such a
// token with every Submit, and the control plane takes the actor from it.
// A verifier that authenticates agents in the front (JWT) forwards nothing:
// its actor reaches Submit as the actor field, which the control plane
// accepts only from a front bound to that actor (latch serve --front-actor).
type CredentialForwarder interface {
	ForwardCredential(token string) bool
}

// Config names the front's dependencies.
type Config struct {
	Logger       hclog.Logger
	ControlPlane controlplanev1.ControlPlaneClient
	// Tokens authenticates HTTP callers. Nil (and OAuth nil): no
	// authentication, every HTTP caller is LoopbackActor; the binary allows
	// that only on loopback.
	Tokens TokenVerifier
	// OAuth, when set, makes the front an OAuth 2.1 resource server
	// (oauth.go): it publishes protected-resource metadata and accepts JWT
	// access tokens for its resource URL; bearer tokens that are not JWTs
	// still go to Tokens.
	OAuth *auth.JWTVerifier
	// LoopbackActor is the actor when Tokens and OAuth are nil (default
	// "local").
	LoopbackActor string
	// WaitBound is how long one tools/call waits for an execution to rest
	// before answering "still running" (default 50s).
	WaitBound time.Duration
	// ProgressInterval is the longest gap between progress notifications
	// when the client sent a progress token (default 10s, at most 15s).
	ProgressInterval time.Duration
	// AllowedOrigins are the browser origins allowed besides loopback ones
	// (e.g. "https://console.example.com"); compared parsed and normalised
	// (origin.go). New refuses an entry that is not an http(s) origin.
	AllowedOrigins []string
	// Version is reported as the server version (default "dev").
	Version string
	// Metrics, when set, receives the front's metrics (observe.go).
	Metrics *Metrics
	// Tracer makes the tools/call spans (nil: none).
	Tracer trace.TracerProvider
	// PersonWait bounds a call without a task whose execution waits for a
	// person (approval, session authorization): it answers then with the
	// operator command (default 5s; tasks_person.go).
	PersonWait time.Duration
	// Limits caps the sessions and streams HTTP callers hold open, per
	// actor and in total (limits.go; zero fields: the defaults).
	Limits Limits
	// NoReceipts leaves receipts out of the answers (receipts.go); they
	// are on by default.
	NoReceipts bool
	// StateDir, when set, is where the front keeps the delivery reports the
	// control plane has not taken yet, so a front stopped while the control
	// plane is away sends them when it starts again (deliveryqueue.go). One
	// front per dir. "": in memory only.
	StateDir string
}

// Front is the MCP front. Build it with New.
type Front struct {
	log       hclog.Logger
	cfg       Config
	tracer    trace.Tracer
	origins   originPolicy
	server    *mcp.Server
	stateful  *mcp.StreamableHTTPHandler
	stateless *mcp.StreamableHTTPHandler
	events    *mcp.MemoryEventStore
	bg        sync.WaitGroup
	// closing ends the watchers of open MCP sessions (see endOnClose).
	closing   chan struct{}
	closeOnce sync.Once
	// closingCtx ends with closing, for waits that take a context.
	closingCtx    context.Context
	cancelClosing context.CancelFunc
	// metadataURL is the RFC 9728 metadata URL, "" without OAuth.
	metadataURL string
	// watched holds the MCP session ids whose end is being watched;
	// ended a channel per session closed when it ends (sessionDone).
	watched sync.Map
	ended   sync.Map
	// sessions and streams enforce Config.Limits (limits.go).
	sessions *limiter
	streams  *limiter

	// pending holds the ids of completed executions whose results were
	// handed to the SDK and not yet seen written. Only these ids are taken
	// from delivery markers: a target's JSON body, embedded raw in a result,
	// cannot mark another execution delivered.
	pendingMu sync.Mutex
	pending   map[string]struct{}
	// opArgs (a string) is what an operator adds to a latch command to
	// reach the control plane, from its last ListTools answer.
	opArgs atomic.Value
	// deliverQ holds the delivery reports not yet taken by the control
	// plane (queuedBytes: their encoded size); delivering is true while
	// sendDeliveries runs; queue is the state dir's file (nil without
	// one) and onDisk whether it holds reports now (delivery.go).
	deliverMu   sync.Mutex
	deliverQ    []*controlplanev1.DeliveryReport
	queuedBytes int
	delivering  bool
	queue       *diskQueue
	onDisk      bool

	// late remembers the unresolved executions followed for open sessions,
	// and taps their standalone SSE streams by session id (late.go).
	late *lateRegistry
	taps sync.Map

	// testCallDone, when set (tests only), runs after every catalog tool
	// handler returned.
	testCallDone func()

	// toolsMu guards the catalog the front serves and the MCP servers it
	// is installed in (the HTTP one and one per stdio session).
	toolsMu sync.Mutex
	version string
	tools   map[string]*controlplanev1.Tool
	servers map[*mcp.Server]string // → the server's fixed actor
}

// New validates cfg and fills defaults. The front serves no catalog tool
// until Sync fetched the catalog from the control plane; Follow keeps it
// current.
func New(cfg Config) (*Front, error) {
	if cfg.ControlPlane == nil {
		return nil, fmt.Errorf("%w: ControlPlane is nil", ErrBadConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.WaitBound <= 0 {
		cfg.WaitBound = DefaultWaitBound
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.ProgressInterval > MaxProgressInterval {
		return nil, fmt.Errorf("%w: ProgressInterval %s is above %s; clients time out at 60s without progress", ErrBadConfig, cfg.ProgressInterval, MaxProgressInterval)
	}
	if cfg.PersonWait <= 0 {
		cfg.PersonWait = DefaultPersonWait
	}
	if cfg.LoopbackActor == "" {
		cfg.LoopbackActor = DefaultLoopbackActor
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	limits, err := cfg.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Limits = limits
	f := &Front{
		log:     cfg.Logger.Named("mcpfront"),
		cfg:     cfg,
		pending: make(map[string]struct{}),
		closing: make(chan struct{}),
		tracer:  tracing.OrNoop(cfg.Tracer).Tracer("github.com/latchhq/latch/mcpfront"),
		tools:   map[string]*controlplanev1.Tool{},
		servers: map[*mcp.Server]string{},
		late:    newLateRegistry(maxLatePerSession, maxLateWatches),
	}
	f.closingCtx, f.cancelClosing = context.WithCancel(context.Background())
	var sessionGauge, streamGauge prometheus.Gauge
	if m := cfg.Metrics; m != nil {
		sessionGauge, streamGauge = m.sessions, m.streams
	}
	f.sessions = newLimiter("sessions", limits.SessionsPerActor, limits.Sessions, flagSessionsPerActor, flagSessions,
		"Close sessions you no longer use (HTTP DELETE with their Mcp-Session-Id; idle ones end after "+sessionTimeout.String()+")", sessionGauge)
	f.streams = newLimiter("streams", limits.StreamsPerActor, limits.Streams, flagStreamsPerActor, flagStreams,
		"Close SSE streams you do not read and let calls in progress answer before sending more", streamGauge)
	origins, err := newOriginPolicy(cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	f.origins = origins
	if cfg.OAuth != nil {
		u, err := ResourceMetadataURL(cfg.OAuth.Resource())
		if err != nil {
			return nil, err
		}
		f.metadataURL = u
	}
	f.server = f.newServer("")
	f.events = mcp.NewMemoryEventStore(nil)
	get := func(*http.Request) *mcp.Server { return f.server }
	f.stateful = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		EventStore: f.events,
		// Idle sessions (no request in flight) are closed after this; a
		// client that comes back later re-initializes, and its re-sent call
		// attaches by fingerprint.
		SessionTimeout: sessionTimeout,
		// Our own Origin/Host rules run first (wrapHTTP); the SDK's
		// DNS-rebinding check stays on as a second line.
	})
	f.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// In 2026-07-28 a dropped response stream cancels the *request*: the
		// handler's ctx ends with the HTTP request's, so the wait stops at
		// once instead of holding the handler until WaitBound. It never
		// cancels the *execution* (interrupted() only forwards an explicit
		// notifications/cancelled, which this era has no session to carry).
		PropagateRequestCancellation: true,
	})
	// Last, so that nothing after it fails with the state dir locked.
	if cfg.StateDir != "" {
		q, kept, note, err := openDiskQueue(cfg.StateDir)
		if err != nil {
			return nil, err
		}
		if note != "" {
			f.log.Warn("delivery queue moved aside", "problem", note)
		}
		f.deliverMu.Lock()
		f.queue = q
		if len(kept) > 0 {
			f.queueLocked(kept, false)
			f.onDisk = true
			f.log.Info("sending the delivery reports kept from before this start", "reports", len(f.deliverQ), "state_dir", cfg.StateDir)
			f.startSenderLocked()
		}
		f.deliverMu.Unlock()
	}
	return f, nil
}

// newServer builds an MCP server with the built-ins and the catalog tools
// the front serves now, and keeps it current until dropServer.
// fixedActor is the actor of every call (stdio); "" means "from the token".
func (f *Front) newServer(fixedActor string) *mcp.Server {
	opts := &mcp.ServerOptions{
		Instructions: "Latch gives every side-effecting call an execution identity. " +
			"Never retry a call whose outcome is unknown: check latch_execution_status. " +
			"To repeat an action on purpose, pass repeat_of with the execution id you are repeating.",
	}
	// The SDK answers prompts/list and resources/list (empty: Latch serves
	// tools only) whether or not they are declared, and a server must
	// declare every capability it serves (server/discover and initialize),
	// so both are declared; their lists never change.
	opts.Capabilities = &mcp.ServerCapabilities{
		// Deprecated as of 2026-07-28, still the SDK's default and served
		// (logging/setLevel) for the earlier eras' clients.
		Logging:   &mcp.LoggingCapabilities{}, //nolint:staticcheck // SA1019, see above
		Prompts:   &mcp.PromptCapabilities{},
		Resources: &mcp.ResourceCapabilities{},
	}
	if fixedActor == "" { // tasks are served on HTTP only (tasks.go)
		opts.Capabilities.AddExtension(ExtensionTasks, nil)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "latch", Version: f.cfg.Version}, opts)
	if f.cfg.Metrics != nil {
		srv.AddReceivingMiddleware(f.cfg.Metrics.countRequests)
	}
	if fixedActor == "" {
		srv.AddReceivingMiddleware(f.taskMiddleware)
	}
	// The server's own sending handler, for the late results (late.go);
	// added last, so it runs first and the task middleware sees it.
	var send mcp.MethodHandler
	srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler { send = next; return next })
	srv.AddReceivingMiddleware(f.lateMiddleware(send))
	f.addBuiltins(srv, fixedActor)
	f.toolsMu.Lock()
	defer f.toolsMu.Unlock()
	for _, name := range sortedNames(f.tools) {
		f.addTool(srv, f.tools[name], fixedActor)
	}
	f.servers[srv] = fixedActor
	return srv
}

// dropServer stops keeping srv current (its session ended).
func (f *Front) dropServer(srv *mcp.Server) {
	f.toolsMu.Lock()
	defer f.toolsMu.Unlock()
	delete(f.servers, srv)
}

// HTTPHandler serves Streamable HTTP at /mcp in both protocol eras.
//
// Routing (one path, two SDK handlers): the SDK speaks 2026-07-28 only on a
// handler with Stateless set, and a stateful handler answers a 2026-07-28 call
// with "unsupported protocol version". A 2026-07-28 client sends
// `MCP-Protocol-Version: 2026-07-28` (or later) on every request, including
// its first one (server/discover; there is no initialize), so a request whose
// header is >= 2026-07-28 goes to the stateless handler. Everything else (no
// header: an initialize or a pre-2025-06-18 client; an older version: a
// session request) goes to the stateful handler, which creates sessions,
// keeps events in the event store and resumes GET + Last-Event-ID. The Go
// client's Connect tries server/discover at 2026-07-28 first and so lands on
// the stateless handler unless it asks for 2025-11-25 explicitly.
func (f *Front) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.wrapHTTP(http.HandlerFunc(f.route)))
	if f.cfg.OAuth != nil {
		f.registerOAuth(mux)
	}
	return mux
}

func (f *Front) route(w http.ResponseWriter, r *http.Request) {
	modern := isModernEra(r.Header.Get(mcpwire.HeaderProtocolVersion))
	// A stateful POST without Mcp-Session-Id makes a session (an
	// initialize; the SDK closes at once one that is not).
	newSession := !modern && r.Method == http.MethodPost && r.Header.Get(mcpwire.HeaderSessionID) == ""
	f.serveLimited(w, r, func(w http.ResponseWriter, r *http.Request) {
		if f.interceptTasks(w, r) { // tasks/* never reach the SDK (tasks.go)
			return
		}
		if modern {
			f.stateless.ServeHTTP(w, r)
			return
		}
		f.stateful.ServeHTTP(w, r)
	}, newSession)
}

// modernEra is the first protocol revision without sessions.
const modernEra = mcpwire.Era20260728

// isModernEra compares protocol revisions, which are ISO dates, as strings.
func isModernEra(v string) bool { return mcpwire.Modern(v) }

// ServeStdio serves one MCP session over stdin/stdout until ctx ends or the
// client closes stdin. Every call is made as actor.
func (f *Front) ServeStdio(ctx context.Context, actor string) error {
	if actor == "" {
		return fmt.Errorf("%w: stdio needs an actor (--actor NAME)", ErrBadConfig)
	}
	return f.serveTransport(ctx, actor, &mcp.StdioTransport{})
}

// serveTransport serves one session over t as actor (stdio, tests).
func (f *Front) serveTransport(ctx context.Context, actor string, t mcp.Transport) error {
	srv := f.newServer(actor)
	defer f.dropServer(srv)
	return srv.Run(ctx, &deliveringTransport{inner: t, front: f})
}

// sessionDone is closed when ss ends (DELETE, idle expiry, its transport
// closing): one waiter per session serves every watcher of it (endOnClose,
// the late results).
func (f *Front) sessionDone(ss *mcp.ServerSession) <-chan struct{} {
	ch := make(chan struct{})
	if v, loaded := f.ended.LoadOrStore(ss, ch); loaded {
		return v.(chan struct{})
	}
	go func() {
		_ = ss.Wait()
		close(ch)
		f.ended.Delete(ss)
	}()
	return ch
}

// endOnClose tells the control plane when an MCP session closes (DELETE,
// idle timeout), so its sessions journal records the end and any executions
// the session never received (orphaned). It starts on a session's first tool
// call, where the actor is known (the initialized notification carries no
// token). Sessionless transports have no end.
func (f *Front) endOnClose(ss *mcp.ServerSession, actor string) {
	if ss == nil || ss.ID() == "" || actor == "" {
		return
	}
	if _, seen := f.watched.LoadOrStore(ss.ID(), true); seen {
		return
	}
	id := ss.ID()
	ended := f.sessionDone(ss)
	go func() {
		select {
		case <-f.closing:
			return
		case <-ended:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		defer f.watched.Delete(id)
		resp, err := f.cfg.ControlPlane.EndSession(ctx, &controlplanev1.EndSessionRequest{Actor: actor, McpSessionId: id})
		if err != nil {
			f.log.Debug("session end not recorded", "mcp_session_id", id, "error", err)
			return
		}
		if n := len(resp.GetOrphanedExecutions()); n > 0 {
			f.log.Info("MCP session ended with results it never received", "mcp_session_id", id, "actor", actor, "executions", n)
		}
	}()
}
