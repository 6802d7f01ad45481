// Package hostchannel connects the engine to SSH and local targets. Targets
// with a hostagent_socket are driven through the host agent's HostAgent gRPC
// service (Run, Wait, Output, Status), reached over the agent's unix socket
// (local targets) or over SSH direct-streamlocal (ssh targets, via sshdial);
// the agent's durable marker answers for a command's fate after any drop.
// Plain SSH targets (no hostagent_socket) run their argv with sshdial's Exec
// and cannot be asked afterwards: the catalog forces replay review for them.
//
// LocalKind and SSHKind (kind.go) are the channels' catalog kinds as the
// control plane loads them: tools' kinds plus what only this machine can
// check (a local target's socket exists; a remote one is a warning).
//
// Only the control plane imports this package.
package hostchannel

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/sshdial"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/client"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Defaults for Config fields left zero.
const (
	DefaultWaitSlice   = 10 * time.Second
	DefaultOutputCap   = 64 << 10
	DefaultCallTimeout = 30 * time.Second
	DefaultMaxWait     = 10 * time.Minute
)

const (
	// maxOutputChunk is the most the agent returns per Output call.
	maxOutputChunk = 1 << 20
	// agentStartTimeout is how long the agent's Run may wait for the shim to
	// report the command started (the agent's StartTimeout default); Run's
	// deadline is CallTimeout plus this.
	agentStartTimeout = 30 * time.Second
)

// Credentials looks up a credential_ref. Implemented by *vault.Vault.
type Credentials interface {
	Get(name string) (vault.Credential, error)
}

// Config names the channel's dependencies.
type Config struct {
	Logger hclog.Logger
	// Credentials holds the SSH keys of ssh targets; nil refuses them.
	Credentials Credentials
	// SSH dials ssh targets; nil refuses them (local targets still work).
	SSH *sshdial.Pool
	// TrustOnFirstUse accepts an ssh target without a pinned host_key.
	// `latch dev` only; never in production.
	TrustOnFirstUse bool
	// WaitSlice is how long one Wait RPC blocks (default 10s).
	WaitSlice time.Duration
	// OutputCap bounds the result body taken from the command's output
	// (default 64 KiB).
	OutputCap int
	// CallTimeout bounds every RPC other than Wait, and the extra time a
	// Wait may take over its slice (default 30s).
	CallTimeout time.Duration
	// MaxWait bounds how long Dispatch waits for a command that has no
	// timeout of its own (default 10m); a command with a timeout is waited
	// for that long plus one minute. After that Dispatch returns Unknown and
	// the engine's recovery asks the agent.
	MaxWait time.Duration
}

// Channel implements engine.Channel for tools.ChannelSSH and
// tools.ChannelLocal targets. It is safe for concurrent use.
type Channel struct {
	cfg   Config
	log   hclog.Logger
	creds Credentials
	pool  *sshdial.Pool

	mu     sync.Mutex
	closed bool
	conns  map[string]*slot // by target name
}

var _ engine.Channel = (*Channel)(nil)

// slot holds the live agent connection of one target; sem is held while
// dialling (a ctx-aware mutex).
type slot struct {
	sem  chan struct{}
	conn *agentConn
}

// agentConn is one HostAgent gRPC connection.
type agentConn struct {
	ident  string
	key    string // fingerprint of the SSH client key it was dialled with ("" for local)
	client hostagentv1.HostAgentClient
	closer io.Closer
	cc     *grpc.ClientConn // nil when the closer is not a ClientConn
	ssh    *sshdial.Client  // nil for local targets

	// Guarded by Channel.mu: calls in progress on it, and whether it was
	// replaced (it closes when the last call ends).
	busy     int
	retiring bool
}

// healthy reports whether the connection can carry a call now. Only Ready
// counts: a call on a connection that must first reconnect could fail
// without our knowing whether it was sent.
func (a *agentConn) healthy() bool {
	if a.ssh != nil && a.ssh.Err() != nil {
		return false
	}
	return a.cc == nil || a.cc.GetState() == connectivity.Ready
}

// New builds the channel.
func New(cfg Config) (*Channel, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.WaitSlice <= 0 {
		cfg.WaitSlice = DefaultWaitSlice
	}
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	return &Channel{
		cfg: cfg, log: cfg.Logger.Named("hostchannel"), creds: cfg.Credentials, pool: cfg.SSH,
		conns: map[string]*slot{},
	}, nil
}

// Close closes the cached host agent connections. The SSH pool belongs to
// the caller and is not closed.
func (c *Channel) Close() error {
	c.mu.Lock()
	c.closed = true
	var closers []io.Closer
	for _, s := range c.conns {
		if s.conn != nil {
			closers = append(closers, s.conn.closer)
		}
	}
	c.mu.Unlock()
	for _, cl := range closers {
		_ = cl.Close()
	}
	return nil
}

// Dispatch runs the tool's command once under the execution's ID and waits
// for its exit. A re-dispatch of the same ID starts nothing: the agent
// returns the existing marker.
func (c *Channel) Dispatch(ctx context.Context, call engine.Call) engine.Attempt {
	if a, ok := checkCall(call); !ok {
		return a
	}
	if plainSSH(call.Target) {
		return c.execPlain(ctx, call)
	}
	id := call.Execution.GetId()
	log := c.log.With("execution_id", id, "target", call.Target.Name)
	argv, cwd, env, err := call.Tool.RenderCommand(call.Arguments)
	if err != nil {
		return engine.Attempt{Class: engine.NotSent, Reason: "command template: " + err.Error()}
	}
	ac, err := c.conn(ctx, call.Target)
	if err != nil {
		return notConnected(err)
	}
	defer c.release(ac)
	timeout := commandTimeout(call)
	// The Run request reaches the agent by the recorded send time plus
	// runBound, which is what this channel's absences report (InFlight).
	budget := call.Budget(c.runBound())
	if budget <= 0 {
		return call.TooLate(c.runBound())
	}
	rctx, cancel := context.WithTimeout(ctx, budget)
	secretNames := secretEnv(call.Tool, env)
	resp, err := ac.client.Run(rctx, &hostagentv1.RunRequest{
		ExecutionId: id, Argv: argv, Cwd: cwd, Env: env, TimeoutMs: timeout.Milliseconds(),
		SecretEnv: secretNames, SecretValues: secretValues(call, env, secretNames),
	})
	cancel()
	if err != nil {
		if status.Code(err) == codes.InvalidArgument {
			// validateRun refuses before the marker is written.
			return engine.Attempt{Class: engine.NotSent, Reason: "the host agent refused the command (nothing ran): " + status.Convert(err).Message()}
		}
		c.drop(call.Target.Name, ac)
		log.Warn("run outcome unknown", "error", err)
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf(
			"the run request may have reached the host agent on %s (%v); not re-sent: recovery asks the agent for the marker", call.Target.Name, ac.describe(err))}
	}
	m := resp.GetMarker()
	log.Debug("run answered", "started", resp.GetStarted(), "state", m.GetState().String())
	if !resp.GetStarted() && m.GetArgv() != nil && !slices.Equal(m.GetArgv(), argv) {
		// The marker answers for what ran under this ID, not for today's
		// rendering (the catalog may have changed since).
		log.Warn("existing marker ran a different argv than the tool renders now; reporting the marker", "marker_argv0", m.GetArgv()[0])
	}
	if call.Recovery {
		// The engine's recovery worker asks many executions in turn: answer
		// now, never block it on a long command. The marker answers as it
		// does a query: not_started is then durable absence.
		return c.classify(ctx, ac, call.Target.Name, m, true)
	}
	maxWait := c.cfg.MaxWait
	if timeout > 0 {
		maxWait = timeout + time.Minute
	}
	m, a, ok := c.wait(ctx, ac, call.Target.Name, m, maxWait)
	if !ok {
		log.Warn("stopped waiting; outcome unknown", "reason", a.Reason)
		return a
	}
	return c.classify(ctx, ac, call.Target.Name, m, false)
}

// secretEnv names the rendered env entries that carry a secret argument,
// for the agent to redact from the output it keeps on the host. The bare
// secret values go with them (RunRequest.secret_values, tools.SecretValues),
// so an entry whose template puts other text around the secret ("Bearer
// {{token}}") has the secret redacted when it is printed alone too.
func secretEnv(tool *tools.Tool, env map[string]string) []string {
	var out []string
	for _, k := range tool.SecretEnv() {
		if _, ok := env[k]; ok { // an optional entry may be left out
			out = append(out, k)
		}
	}
	return out
}

// secretValues is what the call's secret arguments look like inside the
// rendered env entries names lists (tools.SecretValues), keeping only the
// forms that occur there: the agent redacts exactly those.
func secretValues(call engine.Call, env map[string]string, names []string) []string {
	if len(names) == 0 {
		return nil
	}
	var out []string
	for _, v := range call.Tool.SecretValues(call.Arguments) {
		if v != "" && slices.ContainsFunc(names, func(k string) bool { return strings.Contains(env[k], v) }) {
			out = append(out, v)
		}
	}
	return out
}

// notConnected is the attempt of a dispatch that could not connect: nothing
// was sent. A failure that stays until someone fixes it (sshdial.Retryable
// false: the host key, the login) is Final, so the engine does not spend its
// dispatch retries repeating it.
func notConnected(err error) engine.Attempt {
	return engine.Attempt{Class: engine.NotSent, Final: !sshdial.Retryable(err), Reason: err.Error()}
}

// Query asks the host agent for the execution's marker, without acting.
//
// Only the agent's marker proves that nothing ran: a not_started marker is
// durable absence (the agent never runs that ID afterwards). An agent that
// has no marker, or refuses the ID, answers Absent without Durable: a Run
// still on its way would create the marker, so the engine counts it only
// after the settle point, with the Run deadline as the in-flight bound.
// Anything that is not the agent's answer (no SSH pool or key, a failed
// dial, a refused streamlocal channel, a missing socket, an RPC error, a
// marker state this control plane does not know) is Unknown: no evidence.
func (c *Channel) Query(ctx context.Context, call engine.Call) engine.Attempt {
	if a, ok := checkCall(call); !ok {
		return a
	}
	if plainSSH(call.Target) {
		return engine.Attempt{Class: engine.Unsupported, Reason: "target " + call.Target.Name +
			" is plain SSH (no hostagent_socket): it keeps no marker, so nothing can tell whether the command ran; an operator decides (latch exec resolve)"}
	}
	ac, err := c.conn(ctx, call.Target)
	if err != nil {
		// A query that did not go out proves nothing.
		return engine.Attempt{Class: engine.Unknown, Reason: "cannot ask the host agent yet: " + err.Error()}
	}
	defer c.release(ac)
	qctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	resp, err := ac.client.Status(qctx, &hostagentv1.StatusRequest{ExecutionId: call.Execution.GetId()})
	cancel()
	switch {
	case status.Code(err) == codes.NotFound:
		return engine.Attempt{Class: engine.Absent, InFlight: c.runBound(), Reason: "the host agent on " + call.Target.Name +
			" has no marker for this execution ID (a run request still on its way would create one)"}
	case status.Code(err) == codes.InvalidArgument:
		// Run refuses such an ID before writing a marker, so nothing can
		// run under it; still, the answer is not a marker.
		return engine.Attempt{Class: engine.Absent, InFlight: c.runBound(), Reason: "the host agent on " + call.Target.Name +
			" refuses this execution ID, as its Run would (no marker can exist for it): " + status.Convert(err).Message()}
	case err != nil:
		c.drop(call.Target.Name, ac)
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("status query to the host agent on %s failed (%v); will ask again", call.Target.Name, describe(err))}
	}
	return c.classify(ctx, ac, call.Target.Name, resp.GetMarker(), true)
}

// Identity is the target and action in the canonical intent record: the
// target's name, account and pinned host key fingerprint, and the command's
// argv template and cwd.
func (c *Channel) Identity(tool *tools.Tool, target *tools.Target) engine.Identity {
	return engine.Identity{
		Target:  target.Name + ":" + target.User + "@" + hostKeyID(target.HostKey),
		Command: tool.Command,
		Cwd:     tool.Cwd,
	}
}

// hostKeyID is the SHA256 fingerprint of a pinned host key, or the text as
// given when it does not parse (the catalog validator refuses those anyway).
func hostKeyID(authorizedKey string) string {
	if authorizedKey == "" {
		return ""
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorizedKey))
	if err != nil {
		sum := sha256.Sum256([]byte(authorizedKey))
		return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
	}
	return ssh.FingerprintSHA256(pk)
}

// runBound is how long after it was sent a Run request may still reach the
// agent and write a marker: its RPC deadline.
func (c *Channel) runBound() time.Duration { return c.cfg.CallTimeout + agentStartTimeout }

func checkCall(call engine.Call) (engine.Attempt, bool) {
	switch {
	case call.Execution == nil || call.Execution.GetId() == "":
		return engine.Attempt{Class: engine.NotSent, Reason: "hostchannel: call has no execution ID"}, false
	case call.Tool == nil || call.Target == nil:
		return engine.Attempt{Class: engine.NotSent, Reason: "hostchannel: call has no tool or target"}, false
	case call.Target.Channel != tools.ChannelSSH && call.Target.Channel != tools.ChannelLocal:
		return engine.Attempt{Class: engine.NotSent, Reason: fmt.Sprintf("hostchannel: target %s has channel %q; this channel serves ssh and local targets", call.Target.Name, call.Target.Channel)}, false
	case call.Target.Channel == tools.ChannelLocal && call.Target.HostagentSocket == "":
		return engine.Attempt{Class: engine.NotSent, Reason: "hostchannel: local target " + call.Target.Name + " has no hostagent_socket; set it in the catalog"}, false
	}
	return engine.Attempt{}, true
}

func plainSSH(t *tools.Target) bool {
	return t.Channel == tools.ChannelSSH && t.HostagentSocket == ""
}

// commandTimeout is the tool's timeout, else the target's (0: none).
func commandTimeout(call engine.Call) time.Duration {
	if call.Tool.Timeout > 0 {
		return call.Tool.Timeout
	}
	return call.Target.Timeout
}

// open reports whether the marker may still change (the host agent's
// marker table, hostagent.MarkerOpen).
func open(s hostagentv1.MarkerState) bool { return hostagent.MarkerOpen(s) }

// wait blocks in Wait slices until the marker leaves starting/running, ctx
// ends or maxWait passes. ok is false when the outcome is unknown; the
// Attempt then says why.
func (c *Channel) wait(ctx context.Context, ac *agentConn, target string, m *hostagentv1.Marker, maxWait time.Duration) (*hostagentv1.Marker, engine.Attempt, bool) {
	id := m.GetExecutionId()
	deadline := time.Now().Add(maxWait)
	slices := int(maxWait/c.cfg.WaitSlice) + 2
	for range slices {
		if !open(m.GetState()) {
			return m, engine.Attempt{}, true
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		slice := min(left, c.cfg.WaitSlice)
		wctx, cancel := context.WithTimeout(ctx, slice+c.cfg.CallTimeout)
		resp, err := ac.client.Wait(wctx, &hostagentv1.WaitRequest{ExecutionId: id, TimeoutMs: max(slice.Milliseconds(), 1)})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf(
					"stopped waiting for the command on %s (%v); it runs on under the host agent, which keeps its outcome", target, ctx.Err())}, false
			}
			c.drop(target, ac)
			return nil, engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf(
				"the command was started on %s (marker %s%s) and the connection to the host agent broke while waiting (%v); not re-sent: recovery asks the agent",
				target, stateName(m.GetState()), pidNote(m), ac.describe(err))}, false
		}
		m = resp.GetMarker()
	}
	if !open(m.GetState()) {
		return m, engine.Attempt{}, true
	}
	return nil, engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf(
		"the command on %s is still %s%s after %s; recovery asks the agent again later", target, stateName(m.GetState()), pidNote(m), maxWait)}, false
}

// classify turns a marker into an Attempt. query says the marker answers a
// Query (not_started is then Absent rather than NotSent).
func (c *Channel) classify(ctx context.Context, ac *agentConn, target string, m *hostagentv1.Marker, query bool) engine.Attempt {
	reason := m.GetReason()
	if reason != "" {
		reason = ": " + reason
	}
	switch m.GetState() {
	case hostagentv1.MarkerState_MARKER_STATE_EXITED:
		a := exited(m)
		body, truncated, err := c.output(ctx, ac, m)
		if err != nil {
			// The exit status is the outcome; the output is only detail.
			a.Reason += fmt.Sprintf("; its output could not be read (%v): read it on the host under the agent's data directory", describe(err))
			truncated = true
		}
		a.Result.Body, a.Result.BodyTruncated = body, truncated
		return a
	case hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED:
		if query {
			return engine.Attempt{Class: engine.Absent, Durable: true, Reason: "the host agent's marker on " + target + " says not_started: the command's gate never opened, nothing ran, and the agent never runs this ID" + reason}
		}
		return engine.Attempt{Class: engine.NotSent, Final: true, Reason: "the host agent on " + target + " never opened the command's gate: nothing ran" + reason +
			" (the agent never re-runs an execution ID: call the tool again for a new execution)"}
	case hostagentv1.MarkerState_MARKER_STATE_LOST:
		return engine.Attempt{Class: engine.Unsupported, Reason: "the command ran on " + target + " and its outcome is lost" + reason +
			" (the agent never re-runs it); an operator decides (latch exec resolve)"}
	case hostagentv1.MarkerState_MARKER_STATE_COMPLETED:
		return engine.Attempt{Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Reason: "script marker completed",
			Result: &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_MARKER, Body: capBytes([]byte(m.GetResultJson()), c.cfg.OutputCap), BodyTruncated: len(m.GetResultJson()) > c.cfg.OutputCap, Summary: "script marker completed"}}
	case hostagentv1.MarkerState_MARKER_STATE_FAILED:
		return engine.Attempt{Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, Reason: "script marker failed" + reason,
			Result: &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_MARKER, Body: capBytes([]byte(m.GetReason()), c.cfg.OutputCap), BodyTruncated: len(m.GetReason()) > c.cfg.OutputCap, Summary: "script marker failed"}}
	case hostagentv1.MarkerState_MARKER_STATE_STARTING, hostagentv1.MarkerState_MARKER_STATE_RUNNING, hostagentv1.MarkerState_MARKER_STATE_BEGUN:
		return engine.Attempt{Class: engine.Unknown, Reason: "still running on " + target + " (marker " + stateName(m.GetState()) + pidNote(m) + ")"}
	default:
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("the host agent on %s answered with marker state %s, which this control plane does not know; upgrade it", target, m.GetState())}
	}
}

// exited is the Observed attempt of an exited marker, without output.
func exited(m *hostagentv1.Marker) engine.Attempt {
	// Signals are recorded as SSH names them ("KILL"), whichever channel
	// observed them; the agent says "SIGKILL".
	sig := strings.TrimPrefix(m.GetSignal(), "SIG")
	outcome := recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
	summary := fmt.Sprintf("exit status %d", m.GetExitCode())
	switch {
	case sig != "":
		summary = "killed by signal " + sig
	case m.GetExitCode() == 0:
		outcome = recordv1.Outcome_OUTCOME_SUCCEEDED
	}
	return engine.Attempt{
		Class: engine.Observed, Outcome: outcome, Reason: summary,
		Result: &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_PROCESS, Exited: true, ExitCode: m.GetExitCode(), Signal: sig, Summary: summary},
	}
}

// output reads the first OutputCap bytes of the command's output.
func (c *Channel) output(ctx context.Context, ac *agentConn, m *hostagentv1.Marker) ([]byte, bool, error) {
	if ac == nil {
		return nil, m.GetOutputSize() > 0 || m.GetOutputTruncated(), errors.New("no connection")
	}
	var body []byte
	truncated := m.GetOutputTruncated()
	for range c.cfg.OutputCap/maxOutputChunk + 2 {
		want := c.cfg.OutputCap - len(body)
		if want <= 0 {
			break
		}
		octx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
		resp, err := ac.client.Output(octx, &hostagentv1.OutputRequest{
			ExecutionId: m.GetExecutionId(), Offset: int64(len(body)), Limit: int32(min(want, maxOutputChunk)),
		})
		cancel()
		if err != nil {
			return body, true, err
		}
		body = append(body, resp.GetData()...)
		truncated = truncated || resp.GetTruncated()
		if resp.GetEof() || len(resp.GetData()) == 0 {
			return body, truncated || m.GetOutputSize() > int64(len(body)), nil
		}
	}
	return body, truncated || m.GetOutputSize() > int64(len(body)), nil
}

func capBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func stateName(s hostagentv1.MarkerState) string { return hostagent.MarkerName(s) }

func pidNote(m *hostagentv1.Marker) string {
	if m.GetPid() > 0 {
		return fmt.Sprintf(", pid %d", m.GetPid())
	}
	return ""
}

// describe shortens a gRPC error to its code and message.
func describe(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Code().String() + ": " + st.Message()
	}
	return err.Error()
}

// describe is describe(err), naming the SSH connection's end when that is
// the cause (a keepalive timeout says more than the EOF gRPC saw).
func (a *agentConn) describe(err error) string {
	if a.ssh != nil {
		if serr := a.ssh.Err(); serr != nil {
			return describe(err) + "; " + serr.Error()
		}
	}
	return describe(err)
}

// conn returns the target's live agent connection, dialling a new one when
// there is none, it broke or the target changed. Errors say what to do; a
// failed dial proves nothing was sent.
func (c *Channel) conn(ctx context.Context, t *tools.Target) (*agentConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("hostchannel: channel closed (control plane shutting down)")
	}
	s := c.conns[t.Name]
	if s == nil {
		s = &slot{sem: make(chan struct{}, 1)}
		c.conns[t.Name] = s
	}
	c.mu.Unlock()

	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("hostchannel: waiting to connect to %s: %w", t.Name, ctx.Err())
	}
	defer func() { <-s.sem }()

	ident, key := identity(t), c.keyID(t)
	c.mu.Lock()
	cur := s.conn
	c.mu.Unlock()
	if cur != nil {
		healthy := cur.healthy()
		// An unreadable key ("": vault locked) keeps the connection: it
		// was authenticated, and the recovery queries need it.
		if cur.ident == ident && (key == "" || key == cur.key) && healthy {
			c.mu.Lock()
			cur.busy++
			c.mu.Unlock()
			return cur, nil
		}
		c.mu.Lock()
		s.conn = nil
		c.mu.Unlock()
		if healthy {
			c.log.Info("target or its SSH key changed: dialling the host agent anew; the old connection closes when its calls end", "target", t.Name)
			c.retire(cur)
		} else {
			c.log.Debug("re-dialling host agent", "target", t.Name)
			_ = cur.closer.Close()
		}
	}
	ac, err := c.dial(ctx, t)
	if err != nil {
		return nil, err
	}
	ac.ident, ac.key = ident, key
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = ac.closer.Close()
		return nil, errors.New("hostchannel: channel closed (control plane shutting down)")
	}
	s.conn = ac
	ac.busy++
	return ac, nil
}

// release ends a call on ac, which conn counted in; a retired connection
// closes with its last call.
func (c *Channel) release(ac *agentConn) {
	c.mu.Lock()
	ac.busy--
	idle := ac.retiring && ac.busy == 0
	c.mu.Unlock()
	if idle {
		_ = ac.closer.Close()
	}
}

// retire closes ac once no call runs on it: the waits of running commands
// on the old connection must not break because a key was rotated.
func (c *Channel) retire(ac *agentConn) {
	c.mu.Lock()
	ac.retiring = true
	idle := ac.busy == 0
	c.mu.Unlock()
	if idle {
		_ = ac.closer.Close()
	}
}

// keyID is the fingerprint of an SSH target's client key as the vault holds
// it now, so a rotated key makes a new connection; "" for local targets or
// when the key cannot be read (the dial says why).
func (c *Channel) keyID(t *tools.Target) string {
	if t.Channel != tools.ChannelSSH || c.creds == nil {
		return ""
	}
	signer, err := c.signer(t)
	if err != nil {
		return ""
	}
	return ssh.FingerprintSHA256(signer.PublicKey())
}

// drop forgets ac (if it is still the target's connection) and closes it
// when it is broken, so the next call re-dials. A connection that is still
// healthy is kept: other executions may be waiting on it, and one failed
// call (a deadline, an agent error) must not cut their waits.
func (c *Channel) drop(target string, ac *agentConn) {
	if ac.healthy() {
		return
	}
	c.mu.Lock()
	if s := c.conns[target]; s != nil && s.conn == ac {
		s.conn = nil
	}
	c.mu.Unlock()
	_ = ac.closer.Close()
}

func identity(t *tools.Target) string {
	return strings.Join([]string{string(t.Channel), t.Address, t.User, t.HostKey, t.Credential, t.HostagentSocket}, "|")
}

func (c *Channel) dial(ctx context.Context, t *tools.Target) (*agentConn, error) {
	dctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	if t.Channel == tools.ChannelLocal {
		cl, closer, err := client.Dial(dctx, t.HostagentSocket)
		if err != nil {
			return nil, fmt.Errorf("hostchannel: cannot reach the host agent of %s at %s: %w; check that latch-hostagent runs there and that this uid may use its socket (--allow-uid)", t.Name, t.HostagentSocket, err)
		}
		return newAgentConn(cl, closer, nil), nil
	}
	sc, err := c.sshClient(dctx, t)
	if err != nil {
		return nil, err
	}
	cl, closer, err := client.DialConn(dctx, func(ctx context.Context) (net.Conn, error) {
		return sc.DialUnix(ctx, t.HostagentSocket)
	})
	if err != nil {
		return nil, fmt.Errorf("hostchannel: cannot reach the host agent of %s at %s over SSH: %w", t.Name, t.HostagentSocket, err)
	}
	return newAgentConn(cl, closer, sc), nil
}

func newAgentConn(cl hostagentv1.HostAgentClient, closer io.Closer, sc *sshdial.Client) *agentConn {
	cc, _ := closer.(*grpc.ClientConn)
	return &agentConn{client: cl, closer: closer, cc: cc, ssh: sc}
}

// sshClient returns the pool's connection to t, with the client key from the
// vault. Key material never appears in errors or logs.
func (c *Channel) sshClient(ctx context.Context, t *tools.Target) (*sshdial.Client, error) {
	if c.pool == nil {
		return nil, fmt.Errorf("hostchannel: target %s is an ssh target and this control plane has no SSH pool configured", t.Name)
	}
	signer, err := c.signer(t)
	if err != nil {
		return nil, err
	}
	sc, err := c.pool.Client(ctx, sshdial.Target{
		Name: t.Name, Address: t.Address, User: t.User, HostKey: t.HostKey, Signer: signer, TrustOnFirstUse: c.cfg.TrustOnFirstUse,
	})
	if err != nil {
		return nil, fmt.Errorf("hostchannel: %w", err)
	}
	return sc, nil
}

func (c *Channel) signer(t *tools.Target) (ssh.Signer, error) {
	ref := t.Credential
	switch {
	case ref == "":
		return nil, fmt.Errorf("hostchannel: ssh target %s has no credential; set credential: to an SSH key credential in the vault", t.Name)
	case c.creds == nil:
		return nil, fmt.Errorf("hostchannel: no vault is configured for credential %s of target %s", ref, t.Name)
	}
	cred, err := c.creds.Get(ref)
	if err != nil {
		if errors.Is(err, vault.ErrLocked) {
			return nil, fmt.Errorf("vault_locked: the vault is locked (latch vault unlock); credential %s of target %s is needed", ref, t.Name)
		}
		return nil, fmt.Errorf("hostchannel: credential %s of target %s: %w", ref, t.Name, err)
	}
	kind, err := cred.SSH()
	if err != nil {
		return nil, fmt.Errorf("hostchannel: credential %s of target %s: %w", ref, t.Name, err)
	}
	signer, err := kind.Signer()
	if err != nil {
		return nil, fmt.Errorf("hostchannel: credential %s of target %s is %v; store it again with latch vault put", ref, t.Name, err)
	}
	return signer, nil
}

// DevTarget points an ssh target of the embedded example catalog that goes
// through a host agent at the host agent `latch dev` embeds: it becomes a
// local target on agentSocket (plain SSH targets are left as written).
func DevTarget(t *tools.Target, agentSocket string) {
	if t.Channel == tools.ChannelSSH && t.HostagentSocket != "" {
		*t = tools.Target{Name: t.Name, Channel: tools.ChannelLocal, HostTarget: tools.HostTarget{HostagentSocket: agentSocket}, Timeout: t.Timeout}
	}
}
