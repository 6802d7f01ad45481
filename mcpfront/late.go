package mcpfront

// Late results: an answer that leaves its execution unresolved (a call past
// WaitBound still dispatched, outcome_unknown, needs_review, awaiting a
// person; a status read of one; a 2025-11-25 task) does not end the front's
// interest in it. While the caller's session stays open, the front follows
// the execution to its end through the control plane (followToEnd: Watch,
// and Get again with backoff when a watch ends early, as across a
// control-plane restart or failover) and then tells the session:
//
//   - a task the client created on this session (2025-11-25 tasks utility)
//     gets notifications/tasks/status, the Task as tasks/get answers it, on
//     the session's standalone SSE stream (the GET stream) when one is open;
//   - anything else, and a task whose session has no GET stream open, gets
//     notifications/message (logging, level notice, or warning when the end
//     did nothing or failed at the target; logger "latch") whose data names
//     the execution, its end state and outcome, the note of that end, and
//     how to read the full result (latch_execution_status). A level the
//     client set with logging/setLevel is honoured. On a stateful HTTP
//     session the SDK keeps it in the event store for a GET that resumes.
//
// Only sessions can be told: stdio and 2025-11-25 Streamable HTTP. A
// 2026-07-28 call has no session after its answer, so its note says how to
// read the outcome instead (the note says which, notes.go pushedTail). A push
// is a hint, not a delivery: the stored result reaches the caller when it
// reads it (a status call, tasks/get, an attach), which is what records the
// delivery.
//
// Bounds: at most maxLatePerSession executions per session and
// maxLateWatches in the front (past them the answer's note says how to read
// the outcome, as without a session); each follow ends with its session,
// after lateLifetime, or when the front closes. Each follow is one goroutine
// and one Watch stream.
//
// Where this sits in the SDK (go-sdk v1.8.0): ServerSession.Log sends only
// after the client set a level, and a server can send no notification the
// SDK does not know (its sending table is fixed), so:
//
//   - notifications/message goes through the server's own sending handler,
//     taken by a sending middleware (newServer), with a detached context:
//     the SDK routes it to the session's standalone stream (HTTP) or stdout;
//   - notifications/tasks/status, unknown to the SDK, is written by the front
//     as one SSE event on the session's open GET stream (streamTap, http.go),
//     between the SDK's own events (one per Write) under the same lock. It
//     has no event id, so a resumed stream does not replay it; the task's
//     state is always one tasks/get away.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/mcpwire"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Bounds of the late-result follows.
const (
	maxLatePerSession = 64
	maxLateWatches    = 4096
	lateLifetime      = 24 * time.Hour
	lateSendTimeout   = 10 * time.Second
	// lateLogger is the logger name of the notifications/message pushes.
	lateLogger = "latch"
)

// lateKind is what the session was answered with.
type lateKind int

const (
	lateCall lateKind = iota // a tool result (a call, a status read)
	lateTask                 // a 2025-11-25 task this session created
)

// Notification kinds (the metric's notification label).
const (
	pushMessage    = "message"
	pushTaskStatus = "task_status"
)

// Why a follow ended without a push, or an answer was not followed (the
// metric's reason label).
const (
	lateSessionClosed = "session_closed"
	lateExpired       = "expired"
	lateFrontClosing  = "front_closing"
	lateRefused       = "refused"
	lateSessionFull   = "session_full"
	lateFrontFull     = "front_full"
	lateBelowLevel    = "below_level"
)

// lateSession is one session's follows.
type lateSession struct {
	ctx    context.Context
	cancel context.CancelFunc
	// send is the session's server's sending handler (newServer).
	send  mcp.MethodHandler
	level string // "": the client set none (an MCP logging level)
	execs map[string]lateKind
}

// lateRegistry remembers, per session and bounded, the executions the
// front follows for it.
type lateRegistry struct {
	mu         sync.Mutex
	perSession int
	total      int
	watching   int
	closed     bool
	sessions   map[*mcp.ServerSession]*lateSession
}

func newLateRegistry(perSession, total int) *lateRegistry {
	return &lateRegistry{perSession: perSession, total: total, sessions: map[*mcp.ServerSession]*lateSession{}}
}

// open returns ss's record, made with a context from parent when new
// (made); a closed registry makes none.
func (g *lateRegistry) open(parent context.Context, ss *mcp.ServerSession, send mcp.MethodHandler) (ls *lateSession, made bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ls, ok := g.sessions[ss]; ok {
		return ls, false
	}
	if g.closed {
		return nil, false
	}
	ctx, cancel := context.WithCancel(parent)
	ls = &lateSession{ctx: ctx, cancel: cancel, send: send, execs: map[string]lateKind{}}
	g.sessions[ss] = ls
	return ls, true
}

// add records that ss waits on execution id. watching: the outcome will be
// pushed; start: no follow runs for it yet, and onStart ran (under the
// lock, so a Close that comes after sees it). full names the bound that
// refused it ("" when none did).
func (g *lateRegistry) add(ss *mcp.ServerSession, id string, kind lateKind, onStart func()) (watching, start bool, full string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ls, ok := g.sessions[ss]
	if !ok || g.closed || ls.ctx.Err() != nil {
		return false, false, ""
	}
	if _, ok := ls.execs[id]; ok {
		return true, false, ""
	}
	switch {
	case len(ls.execs) >= g.perSession:
		return false, false, lateSessionFull
	case g.watching >= g.total:
		return false, false, lateFrontFull
	}
	ls.execs[id] = kind
	g.watching++
	if onStart != nil {
		onStart()
	}
	return true, true, ""
}

// remove forgets execution id of ss (its follow ended).
func (g *lateRegistry) remove(ss *mcp.ServerSession, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ls, ok := g.sessions[ss]
	if !ok {
		return
	}
	if _, ok := ls.execs[id]; ok {
		delete(ls.execs, id)
		g.watching--
	}
}

// end forgets ss (it closed) and stops its follows.
func (g *lateRegistry) end(ss *mcp.ServerSession) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ls, ok := g.sessions[ss]
	if !ok {
		return
	}
	ls.cancel()
	g.watching -= len(ls.execs)
	delete(g.sessions, ss)
}

// close refuses new follows (the front is closing); the running ones end
// with the front's context.
func (g *lateRegistry) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

// setLevel records the level ss's client asked for (logging/setLevel).
func (g *lateRegistry) setLevel(ss *mcp.ServerSession, level string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ls, ok := g.sessions[ss]; ok {
		ls.level = level
	}
}

func (g *lateRegistry) levelOf(ss *mcp.ServerSession) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ls, ok := g.sessions[ss]; ok {
		return ls.level
	}
	return ""
}

// counts are the follows running and the sessions known.
func (g *lateRegistry) counts() (watching, sessions int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.watching, len(g.sessions)
}

// logLevels are the MCP logging levels, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// belowLevel reports whether a message at level l is under the client's
// threshold min (an unknown min lets everything through).
func belowLevel(l, min string) bool {
	i, j := slices.Index(logLevels, l), slices.Index(logLevels, min)
	return j >= 0 && i < j
}

// lateSendKey carries the session's server's sending handler from the
// receiving middleware to the handlers.
type lateSendKey struct{}

// lateMiddleware is every server's receiving middleware for late results:
// it hands the handlers the server's sending handler, and records the
// level a client sets.
func (f *Front) lateMiddleware(send mcp.MethodHandler) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/call":
				ctx = context.WithValue(ctx, lateSendKey{}, send)
			case "logging/setLevel":
				res, err := next(ctx, method, req)
				p, ok := req.GetParams().(*mcp.SetLoggingLevelParams) //nolint:staticcheck // SA1019: served for the session eras' clients (front.go)
				if ss, isSS := req.GetSession().(*mcp.ServerSession); err == nil && ok && p != nil && isSS {
					f.lateOpen(ss, send)
					f.late.setLevel(ss, string(p.Level))
				}
				return res, err
			}
			return next(ctx, method, req)
		}
	}
}

// lateOpen returns ss's record; a new one is forgotten when ss closes (or
// the front does).
func (f *Front) lateOpen(ss *mcp.ServerSession, send mcp.MethodHandler) *lateSession {
	ls, made := f.late.open(f.closingCtx, ss, send)
	if made {
		done := f.sessionDone(ss)
		go func() {
			select {
			case <-done:
			case <-f.closing:
			}
			f.late.end(ss)
			f.lateGauge()
		}()
	}
	return ls
}

// watchLate follows exec for the session of req when its answer leaves it
// unresolved, and reports whether its outcome will be pushed there.
func (f *Front) watchLate(ctx context.Context, req *mcp.CallToolRequest, cc callContext, exec *recordv1.Execution, kind lateKind) bool {
	if !cc.stateful || req == nil || req.Session == nil || exec.GetId() == "" || resolved(exec.GetState()) || ctx.Err() != nil {
		return false
	}
	send, _ := ctx.Value(lateSendKey{}).(mcp.MethodHandler)
	if send == nil {
		return false
	}
	ss := req.Session
	ls := f.lateOpen(ss, send)
	if ls == nil {
		return false // the front is closing
	}
	watching, _, full := f.late.add(ss, exec.GetId(), kind, func() {
		f.bg.Add(1)
		go f.followLate(ls, ss, cc, exec, kind)
	})
	if full != "" {
		f.log.Debug("not following an unresolved execution for its session: too many followed", "execution_id", exec.GetId(), "bound", full)
		f.lateUnpushed(full)
	}
	f.lateGauge()
	return watching
}

// followLate follows exec to its end and tells the session.
func (f *Front) followLate(ls *lateSession, ss *mcp.ServerSession, cc callContext, exec *recordv1.Execution, kind lateKind) {
	defer f.bg.Done()
	defer f.lateGauge()
	defer f.late.remove(ss, exec.GetId())
	log := f.log.With("execution_id", exec.GetId(), "mcp_session_id", ss.ID())
	ctx, cancel := context.WithTimeoutCause(ls.ctx, lateLifetime, errLateExpired)
	defer cancel()
	end, _, err := f.followToEnd(ctx, cc, exec, nil)
	if err == nil && ls.ctx.Err() == nil {
		f.pushLate(ls, ss, end, kind)
		return
	}
	why := lateRefused
	switch {
	case f.closingCtx.Err() != nil:
		why = lateFrontClosing
	case ls.ctx.Err() != nil:
		why = lateSessionClosed
	case errors.Is(context.Cause(ctx), errLateExpired):
		why = lateExpired
	}
	log.Debug("late result not pushed", "reason", why, "error", err)
	f.lateUnpushed(why)
}

// errLateExpired ends a follow that reached lateLifetime.
var errLateExpired = errors.New("mcpfront: late-result follow reached its lifetime")

// pushLate tells ss that exec resolved.
func (f *Front) pushLate(ls *lateSession, ss *mcp.ServerSession, exec *recordv1.Execution, kind lateKind) {
	log := f.log.With("execution_id", exec.GetId(), "mcp_session_id", ss.ID(), "state", lifecycle.Name(exec.GetState()))
	if kind == lateTask {
		if f.pushTaskStatus(ss, exec) {
			log.Debug("late result pushed", "notification", mcpwire.NotificationTasksStatus)
			f.latePushed(pushTaskStatus, true)
			return
		}
		// No GET stream open: the message below is kept for one.
	}
	note, isErr := lateNote(exec)
	level := "notice"
	if isErr {
		level = "warning"
	}
	if min := f.late.levelOf(ss); belowLevel(level, min) {
		log.Debug("late result not pushed: below the client's log level", "level", level, "client_level", min)
		f.lateUnpushed(lateBelowLevel)
		return
	}
	data := map[string]any{
		"execution_id": exec.GetId(),
		"state":        lifecycle.Name(exec.GetState()),
		"note":         note,
		"read_with":    map[string]any{"tool": ToolExecutionStatus, "arguments": map[string]any{"execution_id": exec.GetId()}},
	}
	if o := outcomeName(exec.GetOutcome()); o != "" {
		data["outcome"] = o
	}
	if s := exec.GetTargetStatus(); s != 0 && lifecycle.Observed(exec.GetState()) {
		data["target_status"] = s
	}
	meta := mcp.Meta{metaLateExecution: exec.GetId()}
	if kind == lateTask {
		meta[MetaRelatedTask] = map[string]any{"taskId": exec.GetId()}
	}
	ctx, cancel := context.WithTimeout(ls.ctx, lateSendTimeout)
	defer cancel()
	//nolint:staticcheck // SA1019: logging is deprecated as of 2026-07-28, whose calls have no session to push to; the session eras' clients handle it
	params := &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(level), Logger: lateLogger, Data: data, Meta: meta}
	_, err := ls.send(ctx, "notifications/message", &mcp.ServerRequest[*mcp.LoggingMessageParams]{Session: ss, Params: params}) //nolint:staticcheck // SA1019, see above
	if err != nil {
		log.Debug("late result not pushed", "error", err)
		f.latePushed(pushMessage, false)
		return
	}
	log.Debug("late result pushed", "notification", "notifications/message")
	f.latePushed(pushMessage, true)
}

// metaLateExecution names the execution a late-result notification is
// about, in its _meta.
const metaLateExecution = "latch/execution_id"

// pushTaskStatus writes notifications/tasks/status for exec's task on ss's
// open GET stream, and reports whether it was written.
func (f *Front) pushTaskStatus(ss *mcp.ServerSession, exec *recordv1.Execution) bool {
	v, ok := f.taps.Load(ss.ID())
	if !ok {
		return false
	}
	params := f.newWireTask(exec, false).fields()
	params["_meta"] = map[string]any{MetaRelatedTask: map[string]any{"taskId": exec.GetId()}}
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": mcpwire.NotificationTasksStatus, "params": params})
	if err != nil {
		return false
	}
	return v.(*streamTap).inject(msg)
}

func (f *Front) latePushed(notification string, sent bool) {
	if m := f.cfg.Metrics; m != nil {
		result := "sent"
		if !sent {
			result = "failed"
		}
		m.latePushed.WithLabelValues(notification, result).Inc()
	}
}

func (f *Front) lateUnpushed(reason string) {
	if m := f.cfg.Metrics; m != nil {
		m.lateUnpushed.WithLabelValues(reason).Inc()
	}
}

func (f *Front) lateGauge() {
	if m := f.cfg.Metrics; m != nil {
		n, _ := f.late.counts()
		m.lateWatches.Set(float64(n))
	}
}

// streamTap is a session's standalone SSE stream (a GET without
// Last-Event-ID, or one resuming the standalone stream) as the front sees
// it: the SDK writes its events through it, and inject adds one between
// them. Every Write of the SDK is one whole event (mcp/event.go
// writeEvent), so holding mu across each keeps events whole.
type streamTap struct {
	http.ResponseWriter
	mu      sync.Mutex
	started bool // the SDK sent the headers
	open    bool // ... of an SSE stream (200, text/event-stream)
	closed  bool // the exchange ended: nothing may be written
}

func (t *streamTap) startLocked(code int) {
	if t.started {
		return
	}
	t.started = true
	t.open = code == http.StatusOK && strings.HasPrefix(t.Header().Get("Content-Type"), "text/event-stream")
}

func (t *streamTap) WriteHeader(code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.startLocked(code)
	t.ResponseWriter.WriteHeader(code)
}

func (t *streamTap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.startLocked(http.StatusOK)
	return t.ResponseWriter.Write(p)
}

func (t *streamTap) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.startLocked(http.StatusOK)
	_ = http.NewResponseController(t.ResponseWriter).Flush()
}

func (t *streamTap) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// inject writes msg (one JSON-RPC message) as an SSE event, without an
// event id, and reports whether it was written and flushed.
func (t *streamTap) inject(msg []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.open || t.closed {
		return false
	}
	b := make([]byte, 0, len(msg)+32)
	b = append(b, "event: message\ndata: "...)
	b = append(b, msg...)
	b = append(b, "\n\n"...)
	if _, err := t.ResponseWriter.Write(b); err != nil {
		return false
	}
	return http.NewResponseController(t.ResponseWriter).Flush() == nil
}

func (t *streamTap) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
}

// standaloneGET reports whether r opens (or resumes) a session's standalone
// SSE stream: a GET with Mcp-Session-Id whose Last-Event-ID, if any, is of
// the standalone stream (the SDK's event ids are "<stream>_<n>", and the
// standalone stream's id is "").
func standaloneGET(r *http.Request) (sessionID string, ok bool) {
	if r.Method != http.MethodGet {
		return "", false
	}
	sid := r.Header.Get(mcpwire.HeaderSessionID)
	last := r.Header.Get(mcpwire.HeaderLastEventID)
	if sid == "" || (last != "" && !strings.HasPrefix(last, "_")) {
		return "", false
	}
	return sid, true
}

// tapStream wraps w when r opens a standalone stream, and registers it
// for pushTaskStatus until done is called. One stream per session is
// registered (the SDK serves one at a time).
func (f *Front) tapStream(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	sid, ok := standaloneGET(r)
	if !ok {
		return w, func() {}
	}
	t := &streamTap{ResponseWriter: w}
	if _, taken := f.taps.LoadOrStore(sid, t); taken {
		return w, func() {}
	}
	return t, func() {
		t.end()
		f.taps.CompareAndDelete(sid, t)
	}
}
