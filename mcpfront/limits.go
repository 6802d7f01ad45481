package mcpfront

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchhq/latch/internal/mcpwire"
)

// Default caps (Limits). A session costs the front about 13 KB and a
// goroutine or two until it ends (DELETE, sessionTimeout idle, Close); one
// actor opened 1,500 in 2.2 s before these caps existed.
const (
	DefaultMaxSessionsPerActor = 64
	DefaultMaxSessions         = 4096
	// DefaultMaxStreamsPerActor leaves room for `latch bench` at its
	// highest concurrency (256 calls in flight as the dev actor, each a
	// stream, plus the next calls sent before the previous handlers
	// returned).
	DefaultMaxStreamsPerActor = 512
	DefaultMaxStreams         = 4096
)

// CodeLimit is the JSON-RPC error code of a request refused by a cap
// (Limits); it is in the range JSON-RPC leaves to servers.
const CodeLimit = -32000

// Limits caps what HTTP callers hold open in the front. A session is a
// 2025-11-25 MCP session (Mcp-Session-Id), held from its initialize until
// it ends (DELETE, idle expiry, Close). A stream is an HTTP exchange on /mcp
// in progress (a GET SSE stream, a POST whose response is open: a call
// waiting on its execution); DELETE is never refused. stdio is not capped
// (one session per process). Zero fields take the defaults.
type Limits struct {
	SessionsPerActor int
	Sessions         int
	StreamsPerActor  int
	Streams          int
}

// Flag names of the caps, named in refusals.
const (
	flagSessionsPerActor = "max-sessions-per-actor"
	flagSessions         = "max-sessions"
	flagStreamsPerActor  = "max-streams-per-actor"
	flagStreams          = "max-streams"
)

// Register adds the --max-sessions* and --max-streams* flags to fs (latch-mcp,
// latch dev), with the defaults as their values.
func (l *Limits) Register(fs *flag.FlagSet) {
	fs.IntVar(&l.SessionsPerActor, flagSessionsPerActor, DefaultMaxSessionsPerActor, "most open MCP sessions (Mcp-Session-Id) one actor may hold; an initialize over it is refused with HTTP 429")
	fs.IntVar(&l.Sessions, flagSessions, DefaultMaxSessions, "most open MCP sessions in total; an initialize over it is refused with HTTP 503")
	fs.IntVar(&l.StreamsPerActor, flagStreamsPerActor, DefaultMaxStreamsPerActor, "most open MCP HTTP streams (SSE GET streams and requests in progress, such as waiting calls) one actor may hold; over it: HTTP 429")
	fs.IntVar(&l.Streams, flagStreams, DefaultMaxStreams, "most open MCP HTTP streams in total; over it: HTTP 503")
}

// Validate refuses a negative cap (the commands call it on their flags).
func (l Limits) Validate() error {
	_, err := l.withDefaults()
	return err
}

// withDefaults fills zero fields and refuses negative ones.
func (l Limits) withDefaults() (Limits, error) {
	for _, f := range []struct {
		v    *int
		def  int
		flag string
	}{
		{&l.SessionsPerActor, DefaultMaxSessionsPerActor, flagSessionsPerActor},
		{&l.Sessions, DefaultMaxSessions, flagSessions},
		{&l.StreamsPerActor, DefaultMaxStreamsPerActor, flagStreamsPerActor},
		{&l.Streams, DefaultMaxStreams, flagStreams},
	} {
		switch {
		case *f.v < 0:
			return l, fmt.Errorf("%w: --%s is %d; it must be a positive count", ErrBadConfig, f.flag, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	return l, nil
}

// limiter counts what actors hold open against a per-actor and a total cap.
type limiter struct {
	kind      string // "sessions" or "streams": the metric's limit label
	perActor  int
	total     int
	actorFlag string
	totalFlag string
	advice    string           // what a refused caller can do, besides the flag
	gauge     prometheus.Gauge // slots held (nil: no metrics)

	mu      sync.Mutex
	n       int
	byActor map[string]int
}

func newLimiter(kind string, perActor, total int, actorFlag, totalFlag, advice string, gauge prometheus.Gauge) *limiter {
	return &limiter{kind: kind, perActor: perActor, total: total, actorFlag: actorFlag, totalFlag: totalFlag,
		advice: advice, gauge: gauge, byActor: map[string]int{}}
}

// limitError is a refusal by a limiter.
type limitError struct {
	kind   string // sessions, streams
	reason string // actor, total
	cap    int
	flag   string
	msg    string
}

// acquire takes one slot for actor, or refuses. release is idempotent.
func (l *limiter) acquire(actor string) (release func(), refused *limitError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byActor[actor] >= l.perActor {
		return nil, &limitError{kind: l.kind, reason: "actor", cap: l.perActor, flag: l.actorFlag,
			msg: fmt.Sprintf("too many open MCP %s for actor %q: the cap is %d per actor (--%s). %s, or ask the operator to raise --%s",
				l.kind, actor, l.perActor, l.actorFlag, l.advice, l.actorFlag)}
	}
	if l.n >= l.total {
		return nil, &limitError{kind: l.kind, reason: "total", cap: l.total, flag: l.totalFlag,
			msg: fmt.Sprintf("the front holds its most open MCP %s: the cap is %d in total (--%s). %s and retry later, or ask the operator to raise --%s",
				l.kind, l.total, l.totalFlag, l.advice, l.totalFlag)}
	}
	l.n++
	l.byActor[actor]++
	if l.gauge != nil {
		l.gauge.Inc()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.n--
			if l.gauge != nil {
				l.gauge.Dec()
			}
			if l.byActor[actor]--; l.byActor[actor] <= 0 {
				delete(l.byActor, actor)
			}
		})
	}, nil
}

// open is the number of slots held.
func (l *limiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// httpActor is the actor of an authenticated HTTP request ("" if none).
func (f *Front) httpActor(r *http.Request) string {
	if ti := sdkauth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	if !f.authRequired() {
		return f.cfg.LoopbackActor
	}
	return ""
}

// refuse answers a request over a cap: HTTP 429 for a per-actor cap, 503
// with Retry-After for the total one, and a JSON-RPC error whose message
// says which cap, its value and what to do (the go-sdk client surfaces it).
func (f *Front) refuse(w http.ResponseWriter, r *http.Request, le *limitError) {
	if m := f.cfg.Metrics; m != nil {
		m.refusals.WithLabelValues(le.kind, le.reason).Inc()
	}
	f.log.Debug("refused over a cap", "limit", le.kind, "reason", le.reason, "cap", le.cap, "peer", r.RemoteAddr)
	var id json.RawMessage = []byte("null")
	if v := r.Header.Get(HeaderJSONRPCID); v != "" {
		id = json.RawMessage(v) // JSON text, set by serveObserved from the body
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": &jsonrpc.Error{
		Code: CodeLimit, Message: le.msg,
		Data: mustJSON(map[string]any{"limit": le.kind, "reason": le.reason, "cap": le.cap, "flag": "--" + le.flag}),
	}})
	if err != nil {
		http.Error(w, le.msg, http.StatusServiceUnavailable)
		return
	}
	code := http.StatusTooManyRequests
	if le.reason == "total" {
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "5")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with maps of strings and ints
	}
	return b
}

// serveLimited serves one /mcp request under the stream cap and, for a
// request that may create a session (a stateful POST without
// Mcp-Session-Id), under the session cap; next serves it.
func (f *Front) serveLimited(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request), newSession bool) {
	if r.Method == http.MethodDelete { // ending a session frees a slot
		next(w, r)
		return
	}
	actor := f.httpActor(r)
	releaseStream, le := f.streams.acquire(actor)
	if le != nil {
		f.refuse(w, r, le)
		return
	}
	defer releaseStream()
	if !newSession {
		next(w, r)
		return
	}
	releaseSession, le := f.sessions.acquire(actor)
	if le != nil {
		f.refuse(w, r, le)
		return
	}
	next(w, r)
	f.holdSession(w.Header().Get(mcpwire.HeaderSessionID), releaseSession)
}

// holdSession keeps a session slot until the session id names ends (DELETE,
// idle expiry, Close all end in ServerSession.Wait returning); an id that
// names no open session (a failed initialize, a request that was not an
// initialize: the SDK closes those at once) releases it now.
func (f *Front) holdSession(id string, release func()) {
	var ss *mcp.ServerSession
	if id != "" {
		for s := range f.server.Sessions() {
			if s.ID() == id {
				ss = s
				break
			}
		}
	}
	if ss == nil {
		release()
		return
	}
	go func() {
		defer release()
		_ = ss.Wait()
	}()
}
