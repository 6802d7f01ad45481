package mcpchannel

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/backoff"
	"github.com/latchhq/latch/internal/egress"
	"github.com/latchhq/latch/internal/redact"
	"github.com/latchhq/latch/tools"
)

// refreshInterval is how often a connected upstream's tool list is asked
// again (an HTTP upstream may be redeployed behind the same URL without
// telling its clients).
const refreshInterval = 30 * time.Second

// terminateWait is how long a stopping stdio upstream gets after its stdin
// is closed, and again after SIGTERM.
const terminateWait = 3 * time.Second

// upstream supervises one upstream server: it connects (starting the process
// for stdio), lists the tools, waits for the session to end, and connects
// again with backoff.
type upstream struct {
	c    *Channel
	spec tools.Upstream
	log  hclog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	sess    *mcp.ClientSession
	tap     *tap                 // the raw-request seam of sess (tap.go, httpraw.go)
	listed  map[string]*mcp.Tool // the last tools/list, by the upstream's name
	ended   int                  // connection attempts ended (success or failure)
	kick    chan struct{}        // wakes a backing-off supervisor (Bind)
	missed  bool                 // the last Bind held tools because it was not reached
	lastErr error
	changed chan struct{}    // closed and replaced whenever the state above changes
	red     *redact.Redactor // the credential's secrets, in every form (setSecrets)
	handles []*procHandle    // started stdio processes not yet reaped

	tracksMu sync.Mutex
	tracks   map[string][]*attemptTrack
}

// attemptTrack records whether one attempt's request left Latch.
type attemptTrack struct{ written atomic.Bool }

func (t *attemptTrack) isWritten() bool { return t.written.Load() }

func (c *Channel) startUpstream(spec tools.Upstream) *upstream {
	ctx, cancel := context.WithCancel(context.Background())
	u := &upstream{
		c: c, spec: spec, log: c.log.With("upstream", spec.Name, "transport", spec.Transport),
		ctx: ctx, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{}), kick: make(chan struct{}, 1),
		tracks: map[string][]*attemptTrack{},
	}
	go u.run()
	return u
}

func sameSpec(a, b *tools.Upstream) bool {
	return a.Name == b.Name && a.Transport == b.Transport && slices.Equal(a.Command, b.Command) &&
		mapsEqual(a.Env, b.Env) && a.Cwd == b.Cwd && a.CredentialEnv == b.CredentialEnv && a.URL == b.URL &&
		a.AllowPrivate == b.AllowPrivate && a.Credential == b.Credential && a.Timeout == b.Timeout
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (u *upstream) stop() {
	u.cancel()
	<-u.done
}

// notify wakes the waiters on the upstream's state; u.mu must be held.
func (u *upstream) notifyLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}

func (u *upstream) run() {
	defer close(u.done)
	restart := backoff.Policy{Min: u.c.cfg.RestartMin, Max: u.c.cfg.RestartMax}
	failures := 0
	for u.ctx.Err() == nil {
		started := time.Now()
		err := u.serveOnce()
		if u.ctx.Err() != nil {
			return
		}
		failures++
		if time.Since(started) > 2*u.c.cfg.RestartMax {
			failures = 1 // it ran well for a while: restart promptly
		}
		u.log.Warn("upstream session ended; connecting again", "error", err, "backoff", restart.Delay(failures))
		if !restart.Wait(u.ctx, failures, u.kick) {
			return
		}
	}
}

// serveOnce runs one session: connect, list, wait for its end.
func (u *upstream) serveOnce() error {
	sess, proc, tp, err := u.connect()
	if err == nil {
		err = u.refreshWith(u.ctx, sess)
		if err != nil {
			sess.Close()
			u.reap(proc)
		}
	}
	if err != nil {
		u.mu.Lock()
		u.lastErr = err
		u.ended++
		u.notifyLocked()
		u.mu.Unlock()
		return err
	}
	u.mu.Lock()
	u.sess, u.tap, u.lastErr = sess, tp, nil
	u.ended++
	u.notifyLocked()
	u.mu.Unlock()
	u.log.Info("upstream connected", "tools", len(u.listedTools()), "pid", pid(proc))
	u.mu.Lock()
	missed := u.missed
	u.missed = false
	u.mu.Unlock()
	if missed {
		u.c.mu.Lock()
		reload := u.c.reload
		u.c.mu.Unlock()
		if reload != nil {
			u.log.Info("upstream reached after the catalog was loaded without it; reloading the catalog to expose its tools")
			go reload(TriggerUpstreamReached)
		}
	}

	ended := make(chan error, 1)
	go func() { ended <- sess.Wait() }()
	tick := time.NewTicker(refreshInterval)
	defer tick.Stop()
	for {
		select {
		case err = <-ended:
		case <-u.ctx.Done():
			sess.Close()
			u.reap(proc)
			err = u.ctx.Err()
		case <-tick.C:
			if rerr := u.refreshWith(u.ctx, sess); rerr != nil {
				u.log.Debug("upstream tool list refresh failed", "error", rerr)
			}
			continue
		}
		break
	}
	if err == nil {
		err = errors.New("the session closed")
	}
	if proc != nil {
		u.reap(proc)
	}
	u.mu.Lock()
	u.sess, u.tap, u.lastErr = nil, nil, fmt.Errorf("upstream %s disconnected: %w", u.spec.Name, err)
	u.notifyLocked()
	u.mu.Unlock()
	return err
}

func pid(p *os.Process) int {
	if p == nil {
		return 0
	}
	return p.Pid
}

func (u *upstream) client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "latch", Version: u.c.cfg.Version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			go func() {
				u.mu.Lock()
				sess := u.sess
				u.mu.Unlock()
				if sess != nil {
					if err := u.refreshWith(u.ctx, sess); err != nil {
						u.log.Warn("upstream tool list refresh after list_changed failed", "error", err)
					}
				}
			}()
		},
	})
}

func (u *upstream) connect() (*mcp.ClientSession, *os.Process, *tap, error) {
	ctx, cancel := context.WithTimeout(u.ctx, u.c.cfg.ConnectWait)
	defer cancel()
	switch u.spec.Transport {
	case tools.TransportStdio:
		return u.connectStdio(ctx)
	case tools.TransportHTTP:
		// One http.Client for the SDK's requests and the tap's own: the
		// same credential, written mark and address policy.
		tp := newTap()
		hc, err := u.httpClient(tp)
		if err != nil {
			return nil, nil, nil, err
		}
		tp.http = &httpRaw{url: u.spec.URL, client: hc}
		sess, err := u.client().Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:   u.spec.URL,
			HTTPClient: hc,
			MaxRetries: -1,
		}, nil)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("upstream %s: connecting to %s: %w", u.spec.Name, u.spec.URL, err)
		}
		tp.http.setSessionGone(func() {
			u.log.Info("upstream forgot Latch's session (HTTP 404); connecting again")
			sess.Close()
		})
		return sess, nil, tp, nil
	}
	return nil, nil, nil, fmt.Errorf("upstream %s: unknown transport %q", u.spec.Name, u.spec.Transport)
}

func (u *upstream) connectStdio(ctx context.Context) (*mcp.ClientSession, *os.Process, *tap, error) {
	env := slices.Clone(u.c.cfg.BaseEnv)
	for _, k := range sortedKeys(u.spec.Env) {
		env = append(env, k+"="+u.spec.Env[k])
	}
	if u.spec.CredentialEnv != "" {
		v, err := u.credentialValue()
		if err != nil {
			return nil, nil, nil, err
		}
		env = append(env, u.spec.CredentialEnv+"="+v)
	}
	cmd := exec.Command(u.spec.Command[0], u.spec.Command[1:]...)
	cmd.Env, cmd.Dir = env, u.spec.Cwd
	// Its own process group, and killed with the control plane (procAttr).
	cmd.SysProcAttr = procAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	// stdout and stderr are pipes of our own, not StdoutPipe's: cmd.Wait
	// closes those as soon as the process exits, dropping what it wrote
	// last and was not read yet (a CreateTaskResult or a tools/call result
	// written just before it exits, which made a recoverable call
	// needs_review). Ours are read to their end.
	outR, outW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		outR.Close()
		outW.Close()
		return nil, nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	stdout := &drainedReader{f: outR, done: make(chan struct{})}
	stderrDone := make(chan struct{})
	// Wait reaps the process; the session ends at stdout's EOF, once what
	// it wrote is read. A process it left behind may hold the pipes open:
	// they are closed terminateWait after the exit.
	waited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// Started and waited for on one locked OS thread: Pdeathsig fires
		// when the thread that started the process exits (procAttr), and
		// the runtime ends a thread only when a goroutine exits locked to it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		u.log.Info("upstream process exited", "pid", cmd.Process.Pid, "status", exitStatus(err))
		drain := time.NewTimer(terminateWait)
		for _, done := range []chan struct{}{stdout.done, stderrDone} {
			select {
			case <-done:
			case <-drain.C:
				drain.Reset(0)
			}
		}
		drain.Stop()
		outR.Close()
		errR.Close()
		close(waited)
	}()
	err = <-started
	outW.Close() // the child has its copies
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, nil, nil, fmt.Errorf("upstream %s: starting %s: %w", u.spec.Name, u.spec.Command[0], err)
	}
	go func() { u.logStderr(errR, cmd.Process.Pid); close(stderrDone) }()
	if err := recordPid(u.c.cfg.PidDir, cmd.Process.Pid, u.spec.Name); err != nil {
		u.log.Warn("cannot write the upstream's pid file; a killed control plane's next run will not find it", "pid", cmd.Process.Pid, "error", err)
	}
	proc := &procHandle{p: cmd.Process, waited: waited}
	u.mu.Lock()
	u.handles = append(u.handles, proc)
	u.mu.Unlock()
	tp := newTap()
	frames := newFrameReader(stdout, u.c.cfg.MaxFrame, u.c.cfg.MaxResult+4096, tp, func(size int64, why string) {
		u.log.Warn("upstream frame over the cap dropped: it cannot be answered", "bytes", size, "frame_cap", u.c.cfg.MaxFrame, "why", why)
	})
	// The SDK's own bound stays, above what frameReader hands on (a line
	// within MaxFrame, and what its decoder read ahead of the next): a value
	// spread over many lines, which MCP's stdio framing forbids, still ends
	// the connection.
	inner := &mcp.IOTransport{Reader: frames, Writer: &stdinWriter{w: stdin, u: u}, MaxLineLength: 2*u.c.cfg.MaxFrame + 64<<10}
	sess, err := u.client().Connect(ctx, &tapTransport{inner: inner, tap: tp}, nil)
	if err != nil {
		u.reap(cmd.Process)
		return nil, nil, nil, fmt.Errorf("upstream %s: the process (pid %d) did not complete the MCP handshake: %w", u.spec.Name, cmd.Process.Pid, err)
	}
	return sess, cmd.Process, tp, nil
}

func exitStatus(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// procHandle is a started stdio process and the channel closed once it has
// been reaped.
type procHandle struct {
	p      *os.Process
	waited chan struct{}
}

// reap stops a stdio upstream's process group: it closes nothing itself (the
// session's Close closed stdin), waits, then SIGTERM, then SIGKILL.
func (u *upstream) reap(p *os.Process) {
	if p == nil {
		return
	}
	u.mu.Lock()
	var h *procHandle
	for i, x := range u.handles {
		if x.p == p {
			h = x
			u.handles = slices.Delete(u.handles, i, i+1)
			break
		}
	}
	u.mu.Unlock()
	if h == nil {
		return
	}
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			syscall.Kill(-p.Pid, sig) //nolint:errcheck // the group may be gone already
		}
		select {
		case <-h.waited:
			syscall.Kill(-p.Pid, syscall.SIGKILL) //nolint:errcheck // what it left behind
			removePid(u.c.cfg.PidDir, p.Pid)
			return
		case <-time.After(terminateWait):
		}
	}
	<-h.waited
	removePid(u.c.cfg.PidDir, p.Pid)
}

func (u *upstream) logStderr(r io.Reader, pid int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		u.log.Debug("upstream stderr", "pid", pid, "line", clip(u.scrub(sc.Bytes()), 500))
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		// Keep reading, or the upstream blocks writing to a full pipe.
		u.log.Debug("upstream stderr: a line over 64 KiB; the rest of its stderr is discarded", "pid", pid)
		_, _ = io.Copy(io.Discard, r)
	}
}

// drainedReader is a stdio upstream's stdout; done is closed once a read
// fails (EOF: the process and whatever it started closed it; or closed).
type drainedReader struct {
	f    *os.File
	once sync.Once
	done chan struct{}
}

func (r *drainedReader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	if err != nil {
		r.once.Do(func() { close(r.done) })
	}
	return n, err
}

func (r *drainedReader) Close() error { return r.f.Close() }

// stdinWriter marks an attempt written once the line carrying its execution
// ID is in the process's stdin.
type stdinWriter struct {
	w io.WriteCloser
	u *upstream
}

func (s *stdinWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err == nil {
		s.u.markWritten(p)
	}
	return n, err
}

func (s *stdinWriter) Close() error { return s.w.Close() }

// httpClient is the upstream's one client (internal/egress): its transport
// dials only addresses the HTTP dispatcher would (cloud metadata, link-local
// and the like never; loopback and private ones with allow_private), checked
// on the resolved address of every connection, never through a proxy from
// the environment; the credential is presented only on requests to the
// upstream's own origin; and a redirect is never followed off that origin
// nor for a request with a body (the SDK's JSON-RPC POSTs), so neither the
// credential nor a request reaches another host.
func (u *upstream) httpClient(tp *tap) (*http.Client, error) {
	tr := egress.NewTransport(egress.Config{
		Policy:          egress.Policy{AllowPrivate: u.spec.AllowPrivate, Hint: "set allow_private on the upstream if it is meant to be reached"},
		MaxIdleConns:    16,
		IdleConnTimeout: 90 * time.Second,
	})
	base, err := egress.WithCredential(tr, u.spec.URL, u.applyCredential)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: url %s: %w", u.spec.Name, u.spec.URL, err)
	}
	// No client timeout: the SDK holds a GET stream open for the session;
	// contexts bound each exchange.
	return egress.NewClient(egress.Config{}, &roundTripper{u: u, base: base, tap: tp}), nil
}

// roundTripper marks an attempt written when httptrace reports the request
// written; for the tap it keeps the session ID the upstream assigns and
// reads the task fields of the answers the SDK decodes without them
// (httpraw.go). The credential is presented below it (egress.WithCredential).
type roundTripper struct {
	u    *upstream
	base http.RoundTripper
	tap  *tap
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	var body []byte
	if req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			body, _ = io.ReadAll(io.LimitReader(rc, 1<<20))
			rc.Close()
		}
	}
	if id := executionIDIn(body); id != "" {
		trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				rt.u.markID(id)
			}
		}}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil || rt.tap == nil {
		return resp, err
	}
	if sid := resp.Header.Get(headerSessionID); sid != "" && rt.tap.http != nil {
		rt.tap.http.sawSession(sid)
	}
	rt.tap.sniff(body, resp)
	return resp, nil
}

func (u *upstream) applyCredential(req *http.Request) error {
	ref := u.spec.Credential
	if ref == "" {
		return nil
	}
	v, err := u.getCredential()
	if err != nil {
		return err
	}
	h, err := v.HTTP()
	if err != nil {
		return fmt.Errorf("upstream %s: credential %s: %w", u.spec.Name, ref, err)
	}
	// Checked before Apply, so a credential too short to be redacted is
	// never sent; set again after it, when a kind that fetched a token
	// (a kind that fetches tokens) names it.
	if err := u.setSecrets(h.Secrets()); err != nil {
		return err
	}
	if err := h.Apply(req); err != nil {
		return errors.New(u.scrub([]byte(err.Error())))
	}
	applied := h.Secrets()
	// A kind signing in a header of its own names the signature
	// (httpdispatch.AppliedSecreter).
	if a, ok := h.(interface{ AppliedSecrets(http.Header) [][]byte }); ok {
		applied = append(applied, a.AppliedSecrets(req.Header)...)
	}
	if slices.Contains(h.Headers(), "Authorization") {
		applied = append(applied, []byte(req.Header.Get("Authorization")))
	}
	return u.setSecrets(applied)
}

// setSecrets makes values the credential's secrets redacted from results,
// summaries and logs (package redact: every encoded form). A value too
// short to be redacted is an error: the credential is not presented.
func (u *upstream) setSecrets(values [][]byte) error {
	needles, err := redact.Secrets(nil, values)
	if err != nil {
		return fmt.Errorf("upstream %s: credential %s cannot be redacted from results, so it is not presented: %w", u.spec.Name, u.spec.Credential, err)
	}
	red := redact.New(needles)
	u.mu.Lock()
	u.red = red
	u.mu.Unlock()
	return nil
}

func (u *upstream) getCredential() (vault.Credential, error) {
	ref := u.spec.Credential
	if u.c.cfg.Credentials == nil {
		return vault.Credential{}, fmt.Errorf("upstream %s: no vault is configured for credential %s", u.spec.Name, ref)
	}
	v, err := u.c.cfg.Credentials.Get(ref)
	if errors.Is(err, vault.ErrLocked) {
		return vault.Credential{}, fmt.Errorf("upstream %s: vault_locked: the vault is locked (latch vault unlock): %w", u.spec.Name, err)
	}
	if err != nil {
		return vault.Credential{}, fmt.Errorf("upstream %s: credential %s: %w", u.spec.Name, ref, err)
	}
	return v, nil
}

// credentialValue is the secret a stdio upstream gets in CredentialEnv.
func (u *upstream) credentialValue() (string, error) {
	v, err := u.getCredential()
	if err != nil {
		return "", err
	}
	s, err := v.Env()
	if err != nil {
		return "", fmt.Errorf("upstream %s: credential %s: %w", u.spec.Name, u.spec.Credential, err)
	}
	if err := u.setSecrets([][]byte{[]byte(s)}); err != nil {
		return "", err
	}
	return s, nil
}

// redactor is the redactor of the credential's secrets (nil before one was
// presented, or without one).
func (u *upstream) redactor() *redact.Redactor {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.red
}

// scrub replaces the upstream credential's secrets (an upstream may echo the
// token it was given) with [REDACTED], in every form package redact knows.
func (u *upstream) scrub(b []byte) string { return string(u.redactor().Bytes(b, false)) }

var metaNeedle = []byte(`"` + MetaExecutionID + `":"`)

// executionIDIn finds the execution ID a tools/call request carries in _meta.
func executionIDIn(p []byte) string {
	i := bytes.Index(p, metaNeedle)
	if i < 0 {
		return ""
	}
	rest := p[i+len(metaNeedle):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 || j > 64 {
		return ""
	}
	return string(rest[:j])
}

func (u *upstream) markWritten(p []byte) {
	if id := executionIDIn(p); id != "" {
		u.markID(id)
	}
}

func (u *upstream) markID(id string) {
	u.tracksMu.Lock()
	for _, t := range u.tracks[id] {
		t.written.Store(true)
	}
	u.tracksMu.Unlock()
}

func (u *upstream) track(id string) *attemptTrack {
	t := &attemptTrack{}
	u.tracksMu.Lock()
	u.tracks[id] = append(u.tracks[id], t)
	u.tracksMu.Unlock()
	return t
}

func (u *upstream) untrack(id string, t *attemptTrack) {
	u.tracksMu.Lock()
	u.tracks[id] = slices.DeleteFunc(u.tracks[id], func(x *attemptTrack) bool { return x == t })
	if len(u.tracks[id]) == 0 {
		delete(u.tracks, id)
	}
	u.tracksMu.Unlock()
}

// session returns the live session, or why there is none.
func (u *upstream) session() (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != nil {
		return u.sess, nil
	}
	if u.lastErr != nil {
		return nil, fmt.Errorf("%w: upstream %s: %v", ErrNotConnected, u.spec.Name, u.lastErr)
	}
	return nil, fmt.Errorf("%w: upstream %s is still starting", ErrNotConnected, u.spec.Name)
}

// tapNow returns the raw-request seam of the live session, or why there is
// none.
func (u *upstream) tapNow() (*tap, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != nil && u.tap != nil {
		return u.tap, nil
	}
	if u.lastErr != nil {
		return nil, fmt.Errorf("%w: upstream %s: %v", ErrNotConnected, u.spec.Name, u.lastErr)
	}
	return nil, fmt.Errorf("%w: upstream %s is still starting", ErrNotConnected, u.spec.Name)
}

// refreshWith lists the upstream's tools and reports schema changes of the
// tools in the catalog in force.
func (u *upstream) refreshWith(ctx context.Context, sess *mcp.ClientSession) error {
	ctx, cancel := context.WithTimeout(ctx, u.c.cfg.ConnectWait)
	defer cancel()
	listed := map[string]*mcp.Tool{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("upstream %s: tools/list: %w", u.spec.Name, err)
		}
		listed[t.Name] = t
	}
	u.mu.Lock()
	u.listed = listed
	u.notifyLocked()
	u.mu.Unlock()
	u.reportHeld()
	return nil
}

func (u *upstream) listedTools() map[string]*mcp.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.listed
}

// waitConnected waits until the upstream has a session, or a connection
// attempt that ends after the call has failed (or ctx ends). A supervisor
// backing off after a failure is woken to try at once: a catalog reload
// after the operator fixed the cause (a credential, the server) need not
// wait out the backoff.
func (u *upstream) waitConnected(ctx context.Context) {
	u.mu.Lock()
	start, connected := u.ended, u.sess != nil
	u.mu.Unlock()
	if connected {
		return
	}
	if start > 0 {
		select {
		case u.kick <- struct{}{}:
		default:
		}
	}
	for {
		u.mu.Lock()
		done, ch := u.sess != nil || u.ended > start, u.changed
		u.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// heldReason says why tool t (as the catalog in force defines it) may not be
// called now: its schema at the upstream is no longer the one in force.
func (u *upstream) heldReason(t *tools.Tool) string {
	listed := u.listedTools()
	if listed == nil {
		return "" // never listed: nothing to compare yet; the call says the rest
	}
	lt, ok := listed[t.UpstreamTool]
	if !ok {
		return fmt.Sprintf("held: upstream %s no longer offers tool %s; nothing was sent (latch catalog upstream-tools %s, then latch catalog reload)", u.spec.Name, t.UpstreamTool, u.spec.Name)
	}
	if h := u.c.pinnedHash(t.Name); h != "" {
		if offer := offerOf(t.Name, lt); offer.GetHash() != h {
			return fmt.Sprintf("held: the upstream changed %s since it was accepted (%s, now %s); nothing was sent (review with latch catalog upstream-tools %s, accept with latch catalog upstream-tools accept %s)", t.Name, h, offer.GetHash(), u.spec.Name, t.Name)
		}
	}
	bound, err := t.BindUpstreamSchema(schemaJSON(lt))
	if err != nil {
		return fmt.Sprintf("held: the input schema of %s changed at the upstream and no longer fits its contract (%v); nothing was sent (review it with latch catalog upstream-tools %s, then latch catalog reload)", t.Name, err, u.spec.Name)
	}
	if !bytes.Equal(bound.InputSchema, t.InputSchema) {
		return fmt.Sprintf("held: the input schema of %s changed at the upstream since the catalog was loaded; nothing was sent (review it with latch catalog upstream-tools %s, then latch catalog reload)", t.Name, u.spec.Name)
	}
	if h := u.statusQueryHold(t); h != "" {
		return h + "; nothing was sent"
	}
	return ""
}

// reportHeld logs the tools of the catalog in force that a new tool list holds.
func (u *upstream) reportHeld() {
	u.c.mu.Lock()
	cat := u.c.catalog
	u.c.mu.Unlock()
	if cat == nil {
		return
	}
	for _, name := range cat.ToolNames() {
		t := cat.Tools[name]
		if t.Upstream != u.spec.Name {
			continue
		}
		if reason := u.heldReason(t); reason != "" {
			u.log.Warn("upstream tool held until the catalog is reloaded", "tool", name, "reason", reason)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// BaseEnv is the environment a stdio upstream starts with before its own
// env: PATH, HOME, LANG and TMPDIR of this process, when set (the default of
// Config.BaseEnv; latch dev --observe-upstream lists an upstream's tools
// under it too).
func BaseEnv() []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// describe is the upstream as an operator reads it.
func (u *upstream) describe() string {
	if u.spec.Transport == tools.TransportHTTP {
		return "http " + u.spec.URL
	}
	return "stdio " + strings.Join(u.spec.Command, " ")
}
