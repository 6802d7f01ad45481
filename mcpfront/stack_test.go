package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/httpchannel"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/receipts"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/internal/testing/testlog"
	"github.com/latchhq/latch/mcpfront/auth"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Protocol revisions the tests speak.
const (
	eraSession   = "2025-11-25" // stateful, resumable
	eraStateless = ""           // the Go client's default: 2026-07-28, stateless
)

// effectServer is the HTTP target: it counts requests per path; /slow holds
// each request until release is called.
type effectServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	hits    map[string]int
	authz   []string // Authorization headers received
	gate    chan struct{}
	arrived chan string
}

func newEffectServer(t testing.TB) *effectServer {
	t.Helper()
	e := &effectServer{hits: map[string]int{}, gate: make(chan struct{}), arrived: make(chan string, 100)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.hits[r.URL.Path]++
		if a := r.Header.Get("Authorization"); a != "" {
			e.authz = append(e.authz, a)
		}
		e.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/slow" {
			e.arrived <- r.Header.Get("Idempotency-Key")
			select {
			case <-e.gate:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		status := http.StatusOK
		if r.URL.Path == "/fail" {
			status = http.StatusConflict
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"ok":%t,"key":%q,"request":%s}`, status == http.StatusOK, r.Header.Get("Idempotency-Key"), body)
	}))
	t.Cleanup(func() {
		e.release()
		e.srv.Close()
	})
	return e
}

var releaseOnce sync.Map

func (e *effectServer) release() {
	if _, loaded := releaseOnce.LoadOrStore(e, true); !loaded {
		close(e.gate)
	}
}

func (e *effectServer) count(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hits[path]
}

// testCatalog has one tool of each kind the tests need.
func testCatalog() *tools.Catalog {
	obj := func(s string) json.RawMessage { return json.RawMessage(s) }
	return &tools.Catalog{
		Source: "test",
		Targets: map[string]*tools.Target{
			"effect": {Name: "effect", Channel: tools.ChannelHTTP, HTTPTarget: tools.HTTPTarget{IdempotencyHeader: "Idempotency-Key", AllowPrivate: true}},
		},
		Tools: map[string]*tools.Tool{
			"deploy_release": {
				Name: "deploy_release", Description: "Deploy one version of a service.",
				InputSchema: obj(`{"type":"object","required":["service","version"],"additionalProperties":false,"properties":{"service":{"type":"string"},"version":{"type":"string"},"region":{"type":"string"}}}`),
				Defaults:    map[string]any{"region": "us-east-1"},
				Target:      "effect", HTTPAction: tools.HTTPAction{Request: &tools.Request{Method: http.MethodPost, Path: "/v1/releases", Body: map[string]any{"service": "{{service}}", "version": "{{version}}", "region": "{{region}}"}}},
				Replay: tools.ReplayIdempotencyKey, AttachWindow: 2 * time.Hour, Approval: tools.ApprovalNone,
			},
			"slow_job": {
				Name: "slow_job", Description: "A job that takes a while.",
				InputSchema: obj(`{"type":"object","required":["job"],"additionalProperties":false,"properties":{"job":{"type":"string"}}}`),
				Target:      "effect", HTTPAction: tools.HTTPAction{Request: &tools.Request{Method: http.MethodPost, Path: "/slow", Body: map[string]any{"job": "{{job}}"}}},
				Replay: tools.ReplayReview, AttachWindow: 2 * time.Hour, Approval: tools.ApprovalNone,
			},
			"failing_job": {
				Name: "failing_job", Description: "A job the target refuses.",
				InputSchema: obj(`{"type":"object","properties":{"job":{"type":"string"}}}`),
				Target:      "effect", HTTPAction: tools.HTTPAction{Request: &tools.Request{Method: http.MethodPost, Path: "/fail", Body: map[string]any{"latch/delivery": "{{job}}"}}},
				Replay: tools.ReplayStatusQuery, AttachWindow: 2 * time.Hour, Approval: tools.ApprovalNone,
			},
			"approved_job": {
				Name: "approved_job", Description: "Needs an operator's approval for every call.",
				InputSchema: obj(`{"type":"object","required":["job"],"properties":{"job":{"type":"string"}}}`),
				Target:      "effect", HTTPAction: tools.HTTPAction{Request: &tools.Request{Method: http.MethodPost, Path: "/approved", Body: map[string]any{"job": "{{job}}"}}},
				Replay: tools.ReplayIdempotencyKey, AttachWindow: 2 * time.Hour, Approval: tools.ApprovalEveryCall,
			},
			"read_status": {
				Name: "read_status", Description: "Read the service status.",
				InputSchema: obj(`{"type":"object","properties":{"service":{"type":"string"}}}`),
				Target:      "effect", HTTPAction: tools.HTTPAction{Request: &tools.Request{Method: http.MethodGet, Path: "/status"}},
				Replay: tools.ReplayReadOnly, AttachWindow: time.Minute, Approval: tools.ApprovalNone,
			},
		},
	}
}

type stackOptions struct {
	WaitBound        time.Duration
	PersonWait       time.Duration
	ProgressInterval time.Duration
	AllowedOrigins   []string
	Actors           []string // token holders (default alice, bob)
	Quiet            bool     // log warnings only (benchmarks)
	// Clock and AuthCacheBound drive the front's token cache and the
	// control plane's tokens (nil, 0: the wall clock, the 5 s bound).
	Clock          func() time.Time
	AuthCacheBound time.Duration
	// OAuth, when set, builds the front's JWT verifier for its resource URL
	// (the test server's /mcp).
	OAuth func(t testing.TB, resource string) *auth.JWTVerifier
	// Limits and Metrics go to the front's Config.
	Limits  Limits
	Metrics *Metrics
	// Sessions is the control plane's session rule (zero: not required).
	Sessions engine.SessionConfig
}

// testStack is the whole path an agent's call takes: MCP client → HTTP
// (loopback) → Front → gRPC (bufconn) → control plane → HTTP effect server.
// Assertions go through CP (the public gRPC API) and the effect server's
// counters, so the fake control plane can be swapped for the real one here,
// in newTestStack, without touching the tests.
type testStack struct {
	URL    string
	Front  *Front
	CP     controlplanev1.ControlPlaneClient
	engine *engine.Engine
	store  *store.Store
	Tokens *tokens.Service
	effect *effectServer
	tokens map[string]string // actor → bearer token
	// verifier is the journal's verifier key, for the receipts.
	verifier string
	// callDone receives one value each time a catalog tool handler returned.
	callDone chan struct{}
}

func newTestStack(t testing.TB, opts stackOptions) *testStack {
	t.Helper()
	st := &testStack{effect: newEffectServer(t), tokens: map[string]string{}, callDone: make(chan struct{}, 100)}
	cat := testCatalog()
	cat.Targets["effect"].BaseURL = st.effect.srv.URL

	// The real control plane (Badger in a temp dir, the HTTP channel to the
	// effect server) served over bufconn.
	var cpStore *store.Store
	st.engine, cpStore = startControlPlane(t, cat, opts.Sessions)
	ts, err := tokens.New(tokens.Config{Store: cpStore, Clock: opts.Clock})
	if err != nil {
		t.Fatal(err)
	}
	st.Tokens, st.store = ts, cpStore
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	// Callers are the operator's, as on the control plane's unix socket:
	// stdio sessions name their actor; HTTP calls carry the agent's token,
	// which the control plane authenticates on every Submit.
	skey, vkey, err := journal.GenerateKey("latch.test/mcpfront")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := journal.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	rcpt, err := receipts.New(receipts.Config{Journal: cpStore, Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	st.verifier = vkey
	svc, err := api.New(api.Config{Engine: st.engine, Tokens: ts, Caller: func(context.Context) api.Caller { return api.Caller{Identity: "unix", Operator: true} },
		Receipts: rcpt})
	if err != nil {
		t.Fatal(err)
	}
	svc.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	st.CP = controlplanev1.NewControlPlaneClient(conn)

	actors := opts.Actors
	if len(actors) == 0 {
		actors = []string{"alice", "bob"}
	}
	for _, a := range actors {
		tok, _, err := ts.Create(t.Context(), a, 0)
		if err != nil {
			t.Fatalf("Create(%s): %v", a, err)
		}
		st.tokens[a] = tok
	}
	// The HTTP server starts first so that its URL can be the front's
	// resource URL.
	var handler atomic.Pointer[http.Handler]
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	st.URL = hs.URL + "/mcp"
	var oauth *auth.JWTVerifier
	if opts.OAuth != nil {
		oauth = opts.OAuth(t, st.URL)
	}
	logger := testLogger(t)
	if opts.Quiet {
		logger.SetLevel(hclog.Warn)
	}
	verifier, err := NewControlPlaneTokens(st.CP, opts.AuthCacheBound, opts.Clock)
	if err != nil {
		t.Fatal(err)
	}
	st.Front, err = New(Config{
		Logger:           logger,
		ControlPlane:     st.CP,
		Tokens:           verifier,
		OAuth:            oauth,
		WaitBound:        opts.WaitBound,
		PersonWait:       opts.PersonWait,
		ProgressInterval: opts.ProgressInterval,
		AllowedOrigins:   opts.AllowedOrigins,
		Limits:           opts.Limits,
		Metrics:          opts.Metrics,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := st.Front.Sync(t.Context()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	st.Front.testCallDone = func() {
		select {
		case st.callDone <- struct{}{}:
		default: // nobody counts (benchmarks)
		}
	}
	h := st.Front.HTTPHandler()
	handler.Store(&h)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		_ = st.Front.Close()
		_ = conn.Close()
		gs.Stop()
	})
	return st
}

// startControlPlane runs the real engine on Badger in a temp dir with the
// HTTP channel, and stops it when the test ends.
func startControlPlane(t testing.TB, cat *tools.Catalog, sessions engine.SessionConfig) (*engine.Engine, *store.Store) {
	t.Helper()
	kv, err := badgerkv.Open(t.TempDir(), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.New(store.Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	d, err := httpdispatch.New(httpdispatch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := httpchannel.New(httpchannel.Config{Dispatcher: d})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := fingerprint.GenerateKey()
	fp, _ := fingerprint.New(key)
	e, err := engine.New(engine.Config{
		Store: s, Catalog: cat, Fingerprinter: fp,
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: hc},
		Sessions: sessions,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		s.Close()
		d.Close()
	})
	return e, s
}

// testLogger writes through t.Log.
func testLogger(t testing.TB) hclog.Logger {
	return testlog.New(t, hclog.Debug)
}

// clientOptions shape one MCP client.
type clientOptions struct {
	Era        string // eraSession or eraStateless
	MaxRetries int
	Progress   func(*mcp.ProgressNotificationParams)
	RoundTrip  http.RoundTripper // wraps the bearer transport, e.g. a cutter
	Header     http.Header       // extra headers on every request (e.g. Latch-Run)
	// Capabilities are the client's (e.g. the tasks extension).
	Capabilities *mcp.ClientCapabilities
	// StandaloneSSE opens the session's GET stream (off by default);
	// Logging receives notifications/message.
	StandaloneSSE bool
	Logging       func(*mcp.LoggingMessageParams) //nolint:staticcheck // SA1019: the late results' notification (late.go)
}

// bearer adds the token to every request.
type bearer struct {
	token  string
	header http.Header
	base   http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	for k, v := range b.header {
		r.Header[k] = v
	}
	return b.base.RoundTrip(r)
}

// connect opens an MCP session as actor.
func (st *testStack) connect(t testing.TB, actor string, o clientOptions) *mcp.ClientSession {
	t.Helper()
	var rt http.RoundTripper = bearer{token: st.tokens[actor], header: o.Header, base: http.DefaultTransport}
	if c, ok := o.RoundTrip.(*cutter); ok {
		c.base = rt
		rt = c
	}
	copts := &mcp.ClientOptions{Capabilities: o.Capabilities}
	if o.Progress != nil {
		copts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { o.Progress(r.Params) }
	}
	if o.Logging != nil {
		copts.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) { o.Logging(r.Params) } //nolint:staticcheck // SA1019, see clientOptions.Logging
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "latch-test", Version: "1"}, copts)
	tr := &mcp.StreamableClientTransport{Endpoint: st.URL, HTTPClient: &http.Client{Transport: rt}, MaxRetries: o.MaxRetries, DisableStandaloneSSE: !o.StandaloneSSE}
	var sopts *mcp.ClientSessionOptions
	if o.Era != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: o.Era}
	}
	cs, err := client.Connect(t.Context(), tr, sopts)
	if err != nil {
		t.Fatalf("Connect(%s, era %q): %v", actor, o.Era, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool and decodes its structured content.
func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, CallResult) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s, %v): %v", tool, args, err)
	}
	return res, decodeResult(t, res)
}

func decodeResult(t testing.TB, res *mcp.CallToolResult) CallResult {
	t.Helper()
	var cr CallResult
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &cr); err != nil {
		t.Fatalf("structuredContent %s: %v", raw, err)
	}
	return cr
}

// executions lists actor's executions through the control plane's API.
func (st *testStack) executions(t testing.TB, actor string) []*recordv1.Execution {
	t.Helper()
	l, err := st.CP.List(context.Background(), &controlplanev1.ListRequest{Actor: actor, Limit: 1000})
	if err != nil {
		t.Fatalf("List(%s): %v", actor, err)
	}
	return l.GetExecutions()
}

func (st *testStack) get(t testing.TB, id string) *recordv1.Execution {
	t.Helper()
	g, err := st.CP.Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: id})
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return g.GetExecution()
}

// waitState waits, bounded, for an execution to reach want: delivery is
// recorded off the response path, so it lands a moment after the answer.
func (st *testStack) waitState(t testing.TB, id string, want recordv1.State) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a loaded CI machine's bound, as testbin.Eventually
	for i := 0; i < 6000 && time.Now().Before(deadline); i++ {
		if st.get(t, id).GetState() == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("execution %s state = %v, want %v", id, st.get(t, id).GetState(), want)
}

// waitCallDone waits for one tool handler to return.
func (st *testStack) waitCallDone(t testing.TB) {
	t.Helper()
	select {
	case <-st.callDone:
	case <-time.After(30 * time.Second):
		t.Fatalf("tool handler did not return within 30s")
	}
}

// waitArrived waits for a /slow request to reach the effect server.
func (st *testStack) waitArrived(t testing.TB) string {
	t.Helper()
	select {
	case key := <-st.effect.arrived:
		return key
	case <-time.After(30 * time.Second):
		t.Fatalf("no request reached the effect server within 30s")
		return ""
	}
}

// cutter cuts the SSE response of the first tools/call POST once, right
// after its first event (the priming event that carries an event id), the
// way a proxy or a flaky network does. It records resume GETs.
type cutter struct {
	// after: cut after the first event containing this ("" = any event).
	after   string
	base    http.RoundTripper
	armed   atomic.Bool
	cut     chan struct{}
	resumes atomic.Int64
}

func newCutter(after string) *cutter {
	c := &cutter{after: after, cut: make(chan struct{})}
	c.armed.Store(true)
	return c
}

func (c *cutter) RoundTrip(r *http.Request) (*http.Response, error) {
	isCall := false
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		isCall = bytes.Contains(body, []byte(`"tools/call"`))
	}
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		c.resumes.Add(1)
	}
	resp, err := c.base.RoundTrip(r)
	if err != nil || !isCall || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	if c.armed.CompareAndSwap(true, false) {
		resp.Body = &cutBody{inner: resp.Body, done: c.cut, after: []byte(c.after)}
	}
	return resp, nil
}

type cutBody struct {
	inner io.ReadCloser
	after []byte
	buf   []byte
	cut   bool
	done  chan struct{}
}

var errCut = errors.New("test: stream cut")

// Read passes events through until the first one containing after, then
// fails every later read and closes the connection.
func (b *cutBody) Read(p []byte) (int, error) {
	if b.cut {
		return 0, errCut
	}
	for {
		if i := bytes.Index(b.buf, []byte("\n\n")); i >= 0 {
			event := b.buf[:i+2]
			if bytes.Contains(event, b.after) {
				n := copy(p, event)
				b.buf = nil
				b.cut = true
				b.inner.Close()
				close(b.done)
				return n, nil
			}
			n := copy(p, event)
			b.buf = b.buf[n:]
			return n, nil
		}
		chunk := make([]byte, 4096)
		n, err := b.inner.Read(chunk)
		b.buf = append(b.buf, chunk[:n]...)
		if err != nil && !bytes.Contains(b.buf, []byte("\n\n")) {
			return 0, err
		}
	}
}

func (b *cutBody) Close() error { return b.inner.Close() }

// httputilTransport is a plain transport for proxies (no bearer: the
// proxied client sends its own).
func httputilTransport() http.RoundTripper { return http.DefaultTransport.(*http.Transport).Clone() }
