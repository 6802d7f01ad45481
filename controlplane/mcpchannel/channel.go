package mcpchannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/egress"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// MetaExecutionID is the _meta key that carries the execution ID on every
// call Latch makes to an upstream.
const MetaExecutionID = "io.latch/execution_id"

// Defaults.
const (
	// DefaultMaxResult caps the stored result (content blocks and
	// structured content, as JSON).
	DefaultMaxResult = 1 << 20
	// DefaultConnectWait bounds how long a catalog load waits for an
	// upstream's first connection.
	DefaultConnectWait = 15 * time.Second
	// DefaultRestartMin and DefaultRestartMax bound the restart backoff of
	// an upstream that exits or cannot be reached.
	DefaultRestartMin = 250 * time.Millisecond
	DefaultRestartMax = 30 * time.Second
)

var (
	// ErrUnknownUpstream is returned for an upstream the catalog does not define.
	ErrUnknownUpstream = errors.New("mcpchannel: unknown upstream")
	// ErrNotConnected is returned when an upstream has no live session.
	ErrNotConnected = errors.New("mcpchannel: upstream not connected")
)

// Credentials looks up a credential_ref. Implemented by *vault.Vault.
type Credentials interface {
	Get(name string) (vault.Credential, error)
}

// Config names the channel's dependencies.
type Config struct {
	Logger hclog.Logger
	// Credentials may be nil when no upstream uses a credential.
	Credentials Credentials
	// MaxResult caps a stored result (default DefaultMaxResult).
	MaxResult int
	// MaxFrame caps a line read from a stdio upstream (default
	// DefaultMaxFrame); a longer answer is stored truncated (frame.go).
	MaxFrame int
	// ConnectWait bounds a catalog load's wait for upstreams (default
	// DefaultConnectWait).
	ConnectWait time.Duration
	// RestartMin and RestartMax bound the restart backoff.
	RestartMin, RestartMax time.Duration
	// BaseEnv is the environment every stdio upstream starts with, before
	// its env: (default: PATH, HOME, LANG and TMPDIR of this process; the
	// control plane's other variables are never passed on).
	BaseEnv []string
	// Version is the client version Latch announces to upstreams.
	Version string
	// Pins keeps the accepted form of each upstream tool (pins.go); nil:
	// the store the catalog manager hands Source (StorePins), and until
	// then none is pinned and only a schema change holds a tool.
	Pins Pins
	// MaxDescription caps an upstream tool's description as agents see it
	// (default DefaultMaxDescription).
	MaxDescription int
	// PidDir keeps a pid file per running stdio upstream process
	// (pidfile.go); New stops the processes an earlier run's files name.
	// Empty: none are kept.
	PidDir string
}

// Channel implements engine.Channel for upstream MCP servers.
type Channel struct {
	cfg Config
	log hclog.Logger

	mu        sync.Mutex
	upstreams map[string]*upstream
	catalog   *tools.Catalog       // the last one Source bound
	parsed    *tools.Catalog       // the same before binding (held tools included)
	reload    func(trigger string) // SetReload
	pinned    map[string]string    // catalog tool -> the pin hash in force (Bind, Accept)
	pins      Pins                 // Config.Pins, or the store's (Source's UseStore)
	pinsFixed bool                 // Config.Pins was set
	closed    bool
}

var _ engine.Channel = (*Channel)(nil)

// New builds the channel. It starts nothing (Configure, or Source's Load,
// starts the upstreams a catalog defines); it stops the stdio upstreams an
// earlier run left running (Config.PidDir).
func New(cfg Config) (*Channel, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = DefaultMaxResult
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.MaxDescription <= 0 {
		cfg.MaxDescription = DefaultMaxDescription
	}
	if cfg.ConnectWait <= 0 {
		cfg.ConnectWait = DefaultConnectWait
	}
	if cfg.RestartMin <= 0 {
		cfg.RestartMin = DefaultRestartMin
	}
	if cfg.RestartMax < cfg.RestartMin {
		cfg.RestartMax = max(DefaultRestartMax, cfg.RestartMin)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.BaseEnv == nil {
		cfg.BaseEnv = BaseEnv()
	}
	c := &Channel{cfg: cfg, log: cfg.Logger.Named("mcpchannel"), upstreams: map[string]*upstream{}, pinned: map[string]string{}}
	c.pins, c.pinsFixed = cfg.Pins, cfg.Pins != nil
	stopOrphans(cfg.PidDir, c.log)
	return c, nil
}

// Configure starts the upstreams cat defines and stops those it no longer
// does; an upstream whose definition is unchanged keeps running (and its
// session). It does not wait for connections.
func (c *Channel) Configure(cat *tools.Catalog) {
	var stopped []*upstream
	defer func() {
		// Outside the lock: a stopping upstream may be reporting held tools.
		for _, u := range stopped {
			u.stop()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for name, u := range c.upstreams {
		spec := cat.Upstreams[name]
		if spec == nil || !sameSpec(spec, &u.spec) {
			stopped = append(stopped, u)
			delete(c.upstreams, name)
		}
	}
	for name, spec := range cat.Upstreams {
		if _, ok := c.upstreams[name]; !ok {
			c.upstreams[name] = c.startUpstream(*spec)
		}
	}
}

// SetReload names what reloads the catalog (the control plane's catalog
// manager). It is called, once per upstream, when an upstream that could not
// be reached when the catalog was loaded connects: its tools were held only
// for want of a schema, and come into force with a catalog_loaded record
// (trigger upstream_reached); and after an operator accepts an upstream
// tool's change (trigger upstream_tool_accepted). A change at the upstream
// is never brought into force by a reload: pins.go.
func (c *Channel) SetReload(fn func(trigger string)) {
	c.mu.Lock()
	c.reload = fn
	c.mu.Unlock()
}

// Close stops every upstream (stdio processes get their stdin closed, then
// SIGTERM, then SIGKILL).
func (c *Channel) Close() {
	c.mu.Lock()
	c.closed = true
	ups := maps.Clone(c.upstreams)
	c.upstreams = map[string]*upstream{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range ups {
		wg.Go(u.stop)
	}
	wg.Wait()
}

func (c *Channel) upstream(name string) (*upstream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.upstreams[name]
	if u == nil {
		return nil, fmt.Errorf("%w %q: it is not in the catalog this control plane loaded (latch catalog reload)", ErrUnknownUpstream, name)
	}
	return u, nil
}

// Identity is the upstream and its tool in the canonical intent record: for
// http the endpoint URL and the upstream's tool name; for stdio the
// upstream's name and tool name with the command and cwd that run it.
func (c *Channel) Identity(tool *tools.Tool, target *tools.Target) engine.Identity {
	c.mu.Lock()
	var spec *tools.Upstream
	if c.catalog != nil {
		spec = c.catalog.Upstreams[target.Name]
	}
	if spec == nil {
		if u := c.upstreams[target.Name]; u != nil {
			spec = &u.spec
		}
	}
	c.mu.Unlock()
	if spec == nil {
		return engine.Identity{Method: "tools/call", Target: "mcp:" + target.Name + "#" + tool.UpstreamTool}
	}
	if spec.Transport == tools.TransportHTTP {
		return engine.Identity{Method: "tools/call", Target: spec.URL + "#" + tool.UpstreamTool}
	}
	return engine.Identity{Method: "tools/call", Target: "stdio:" + spec.Name + "#" + tool.UpstreamTool, Command: spec.Command, Cwd: spec.Cwd}
}

// Dispatch calls the upstream tool once under the execution ID.
func (c *Channel) Dispatch(ctx context.Context, call engine.Call) engine.Attempt {
	id := call.Execution.GetId()
	// The wait ends by the recorded send time plus the timeout, as the
	// other channels' do; too late, nothing is written.
	timeout := call.Budget(call.Tool.DispatchTimeout(call.Target))
	if timeout <= 0 {
		return call.TooLate(call.Tool.DispatchTimeout(call.Target))
	}
	u, err := c.upstream(call.Target.Name)
	if err != nil {
		return engine.Attempt{Class: engine.NotSent, Reason: err.Error()}
	}
	if held := u.heldReason(call.Tool); held != "" {
		return engine.Attempt{Class: engine.NotSent, Final: true, Reason: held}
	}
	sess, err := u.session()
	if err != nil {
		return engine.Attempt{Class: engine.NotSent, Reason: err.Error()}
	}
	args := maps.Clone(call.Arguments)
	if args == nil {
		args = map[string]any{}
	}
	if a := call.Tool.IdempotencyArgument; a != "" && !call.Observed() {
		// Observed calls go as they came: the upstream dedupes nothing it
		// did not dedupe before Latch. The execution ID still travels in
		// _meta, which is how this channel tells a written request from
		// one that never left (executionIDIn).
		args[a] = id
	}
	tr := u.track(id)
	defer u.untrack(id, tr)
	// An upstream that takes this tool as a task is called task-augmented
	// (tasks.go): its task ID is recorded before Latch waits for the end.
	tp, tapErr := u.tapNow()
	if tapErr == nil {
		caps := tp.capsNow()
		if ok, _ := taskCapable(caps, call.Tool.UpstreamTool); ok {
			return c.dispatchTask(ctx, u, tp, caps, call, args, tr, timeout)
		}
	}
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	// The call runs on a context that is never cancelled: cancelling it
	// would make the SDK send notifications/cancelled, and a call Latch has
	// written runs to its observed outcome. Only the waiting stops.
	callCtx := context.WithoutCancel(ctx)
	go func() {
		res, err := sess.CallTool(callCtx, &mcp.CallToolParams{
			Name: call.Tool.UpstreamTool, Arguments: args,
			Meta: mcp.Meta{MetaExecutionID: id},
		})
		done <- answer{res, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-done:
		if tp != nil {
			if o := tp.takeOversize(id); o != nil {
				return c.oversized(u, call, o)
			}
		}
		return c.classify(u, call, tr, a.res, a.err)
	case <-timer.C:
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: no answer to tools/call %s within %s after the request was handed to the transport", u.spec.Name, call.Tool.UpstreamTool, timeout)}
	case <-ctx.Done():
		if !tr.isWritten() {
			// The write may still go out: it is not provably unsent.
			return engine.Attempt{Class: engine.Unknown, Reason: "the control plane stopped while the call was being sent to upstream " + u.spec.Name}
		}
		return engine.Attempt{Class: engine.Unknown, Reason: "the control plane stopped while upstream " + u.spec.Name + " held the call"}
	}
}

// codeRejectedByTransport is the JSON-RPC code the go-sdk gives errors of
// its own HTTP transport (jsonrpc2.ErrRejected): a failed exchange on
// Latch's side (a connection cut after the request was written, a refused
// dial), not an answer of the upstream. classify judges it by what was
// written, like any transport error; an upstream that sends this code
// itself is judged the same way, the safe side.
const codeRejectedByTransport = -32005

func (c *Channel) classify(u *upstream, call engine.Call, tr *attemptTrack, res *mcp.CallToolResult, err error) engine.Attempt {
	name := u.spec.Name + "." + call.Tool.UpstreamTool
	if err == nil {
		return c.observed(u, name, res, "")
	}
	if errors.Is(err, egress.ErrRedirect) || errors.Is(err, egress.ErrCrossOrigin) {
		// The upstream answered with a redirect Latch does not follow
		// (another origin, or a request with a body): the tool did not run
		// at the configured URL and nothing went elsewhere. The SDK wraps
		// such transport errors in a JSON-RPC error (-32005), so this is
		// checked first. Sending again would be redirected again.
		return engine.Attempt{Class: engine.NotSent, Final: true, Reason: fmt.Sprintf("upstream %s: %v; nothing was sent to the redirect's target (fix the upstream's url)", name, err)}
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && werr.Code != codeRejectedByTransport {
		switch werr.Code {
		case jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
			return engine.Attempt{Class: engine.NotSent, Final: true, Reason: fmt.Sprintf("upstream %s refused the call before running it (JSON-RPC %d: %s)", name, werr.Code, clip(werr.Message, 300))}
		}
		return c.rpcErrorResult(u, name, werr, "")
	}
	if errors.Is(err, mcp.ErrSessionMissing) {
		// The server answered 404 for the session: it refuses every request
		// of a session it does not know, before running anything (the
		// Streamable HTTP transport's rule).
		return engine.Attempt{Class: engine.NotSent, Reason: fmt.Sprintf("upstream %s no longer knows Latch's session (it restarted) and refused the call before running it; sending again on a new session", name)}
	}
	if tr.isWritten() {
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: the request was written and no answer came: %v", name, err)}
	}
	return engine.Attempt{Class: engine.NotSent, Reason: fmt.Sprintf("upstream %s: nothing was sent: %v", name, err)}
}

// oversized is an answer over the frame cap (frame.go): observed, stored as
// its first MaxResult bytes (the raw JSON-RPC frame, redacted), truncated,
// with the reason.
func (c *Channel) oversized(u *upstream, call engine.Call, o *oversize) engine.Attempt {
	name := u.spec.Name + "." + call.Tool.UpstreamTool
	body, _ := c.capBody(u, o.head)
	why := fmt.Sprintf("its answer was %d bytes, over the %d-byte frame cap: read, stored truncated to its first %d bytes", o.size, c.cfg.MaxFrame, len(body))
	outcome, reason := recordv1.Outcome_OUTCOME_SUCCEEDED, "upstream "+name+" answered; "+why
	switch {
	case o.rpcErr:
		outcome, reason = recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, "upstream "+name+" answered with a JSON-RPC error; "+why
	case o.isError:
		outcome, reason = recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, "upstream "+name+" answered with isError; "+why
	}
	u.log.Warn("upstream answer over the frame cap; stored truncated", "tool", name, "bytes", o.size, "frame_cap", c.cfg.MaxFrame)
	return engine.Attempt{
		Class: engine.Observed, Outcome: outcome, Reason: reason,
		Result: &recordv1.Result{Body: body, BodyTruncated: true, Summary: clip("answer over the frame cap: "+why, 200)},
	}
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage("null")
	}
	return b
}

// storedResult is the JSON body of an upstream tool's stored result.
type storedResult struct {
	Content           []mcp.Content `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
}

func (c *Channel) result(u *upstream, res *mcp.CallToolResult) *recordv1.Result {
	content := res.Content
	if content == nil {
		content = []mcp.Content{}
	}
	body, err := json.Marshal(storedResult{Content: content, StructuredContent: res.StructuredContent, IsError: res.IsError})
	if err != nil {
		body, _ = json.Marshal(map[string]string{"error": "the upstream's result does not encode as JSON: " + err.Error()})
	}
	body, cut := c.capBody(u, body)
	var summary string
	for _, b := range res.Content {
		if t, ok := b.(*mcp.TextContent); ok {
			summary = clip(u.scrub([]byte(t.Text)), 200)
			break
		}
	}
	return &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT, Body: body, BodyTruncated: cut, Summary: summary}
}

// capBody redacts the upstream's credential from body (a JSON document,
// which stays one: redact.JSON) and cuts it at MaxResult.
func (c *Channel) capBody(u *upstream, body []byte) ([]byte, bool) {
	body = []byte(u.redactor().JSON(string(body)))
	if len(body) <= c.cfg.MaxResult {
		return body, false
	}
	return body[:c.cfg.MaxResult], true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Query asks the upstream about the task its dispatch recorded (tasks/get,
// then the result); without a recorded task ID it answers Unsupported (see
// the package doc).
func (c *Channel) Query(ctx context.Context, call engine.Call) engine.Attempt {
	return c.queryTask(ctx, call)
}
