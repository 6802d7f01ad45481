// Package replicas is the client side of a control plane run as several
// replicas on one PostgreSQL store (one active, the rest standbys): a Conn
// that fronts (latch-mcp) and the latch CLI use in place of a
// *grpc.ClientConn, over a list of control-plane addresses, and the wire
// contract by which a standby says who is active (NotActive, ActiveOf).
// The control plane's server imports only the contract half.
//
// # Why a small failover loop and not a gRPC balancer
//
// gRPC's own machinery was the first candidate: one ClientConn over a
// manual resolver with every address, round_robin with client-side health
// checking, standbys reporting NOT_SERVING for the ControlPlane service.
// It routes to the active, but it cannot do two things this needs: follow
// a standby that names an active the client was not given (a single
// --control-plane address of a standby), because no RPC ever reaches a
// NOT_SERVING backend to learn it; and decide per RPC whether a call cut
// by a dying active may be sent again (gRPC retries transparently only
// what never reached a server; its retry policy cannot tell "a standby
// refused it" from "the active died holding it"). So a Conn keeps one
// ordinary ClientConn per address (each with gRPC's own reconnection, TLS
// and interceptors) and moves between them itself:
//
//   - an answer NotActive from a standby (nothing was done) moves to the
//     active it names, or to the next address when it names none (a
//     takeover is under way);
//   - a call that failed Unavailable before it reached any server (no
//     transport stream: connection refused, a channel in backoff) moves to
//     the next address;
//   - a call that reached a server and was cut (Unavailable) is sent again
//     on the next address only for RPCs whose repetition has the effect of
//     one call (repeatSafe: reads, and Submit, which attaches an identical
//     re-submit to the same execution by its fingerprint); any other is
//     returned to the caller, who knows whether repeating it is safe;
//   - a server stream of a repeat-safe RPC (Watch) is re-opened on the new
//     active with the same request and goes on; a Watch starts with the
//     current state, so its reader sees the execution again, never a gap
//     that hides a transition's end state.
//
// With one address and no standby naming another, a connection failure is
// returned at once, exactly as a plain ClientConn does.
package replicas

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/backoff"
	"github.com/latchhq/latch/internal/errinfo"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// The NotActive wire contract: a standby answers codes.Unavailable with an
// ErrorInfo of reason ERROR_REASON_NOT_ACTIVE (internal/errinfo); its metadata names the
// active replica's advertised address (MetaActive, empty while nobody
// holds the lease), its lease holder name and epoch.
const (
	MetaActive = "active"
	MetaHolder = "holder"
	MetaEpoch  = "epoch"
)

// NotActive is the status a standby answers every call it does not serve
// with: Unavailable, saying where the active replica is (active: its
// advertised address, "" when none is known), with the ErrorInfo that a
// Conn follows.
func NotActive(active, holder string, epoch int64) error {
	var msg string
	switch {
	case active != "":
		msg = fmt.Sprintf("this control plane replica is a standby; the active replica (%s, epoch %d) serves at %s: call it there (latch-mcp and the latch CLI move there by themselves)", holder, epoch, active)
	case holder != "":
		msg = fmt.Sprintf("this control plane replica is a standby; the active replica (%s, epoch %d) advertises no address (start it with --advertise-addr): list every replica in --control-plane", holder, epoch)
	default:
		msg = "this control plane replica is a standby and no replica holds the lease right now (a takeover is under way): try again in a moment"
	}
	ep := ""
	if epoch > 0 {
		ep = strconv.FormatInt(epoch, 10)
	}
	// Empty values are left out: a standby that knows no active replica
	// sends no MetaActive.
	return errinfo.Error(codes.Unavailable, msg, controlplanev1.ErrorReason_ERROR_REASON_NOT_ACTIVE, MetaActive, active, MetaHolder, holder, MetaEpoch, ep)
}

// ActiveOf reports whether err is a standby's NotActive answer and, if so,
// the active replica's address it names ("" when it names none).
func ActiveOf(err error) (active string, notActive bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return "", false
	}
	r, md, ok := errinfo.Of(err)
	if !ok || r != controlplanev1.ErrorReason_ERROR_REASON_NOT_ACTIVE {
		return "", false
	}
	return md[MetaActive], true
}

// repeatSafe lists the RPCs whose repetition, after a call that reached
// a server and was cut, has the effect of one call.
var repeatSafe = map[string]bool{
	"/grpc.health.v1.Health/Check": true,
	"/grpc.health.v1.Health/List":  true,
	"/grpc.health.v1.Health/Watch": true,
	// An identical re-submit attaches to the execution the first made (its
	// fingerprint matches), or makes the one the first never committed.
	controlplanev1.ControlPlane_Submit_FullMethodName:            true,
	controlplanev1.ControlPlane_Get_FullMethodName:               true,
	controlplanev1.ControlPlane_List_FullMethodName:              true,
	controlplanev1.ControlPlane_Watch_FullMethodName:             true,
	controlplanev1.ControlPlane_MarkDelivered_FullMethodName:     true,
	controlplanev1.ControlPlane_History_FullMethodName:           true,
	controlplanev1.ControlPlane_ListSessions_FullMethodName:      true,
	controlplanev1.ControlPlane_EndSession_FullMethodName:        true,
	controlplanev1.ControlPlane_AuthenticateAgent_FullMethodName: true,
	controlplanev1.ControlPlane_ListTools_FullMethodName:         true,
	controlplanev1.Admin_VaultStatus_FullMethodName:              true,
	controlplanev1.Admin_VaultList_FullMethodName:                true,
	controlplanev1.Admin_ListTokens_FullMethodName:               true,
}

// Split reads a list of addresses from flag values: each value may hold
// several, comma-separated. Blanks are dropped, duplicates kept once, in
// order.
func Split(values []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range values {
		for _, a := range strings.Split(v, ",") {
			a = strings.TrimSpace(a)
			if a != "" && !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// Errors of New.
var (
	ErrNoAddress = errors.New("replicas: no control plane address")
	ErrNoDial    = errors.New("replicas: Config.Dial is required")
)

// Defaults.
const (
	// DefaultFailoverWait bounds how long a call looks for an active
	// replica: longer than a takeover (the lease ttl plus the new active's
	// start-up) with room to spare.
	DefaultFailoverWait = 30 * time.Second
	// maxLearned bounds the addresses a Conn learns from standbys.
	maxLearned = 8
	// A call waiting for a takeover asks again at most every 200 ms (±20%
	// so many waiting calls do not ask in step): a standby's NotActive
	// costs it microseconds, and the call is answered within that much of
	// the new active serving.
	firstBackoff = 25 * time.Millisecond
	maxBackoff   = 200 * time.Millisecond
)

// Config configures a Conn.
type Config struct {
	// Addrs are the replicas' addresses, in the caller's order of
	// preference (Split reads flag values).
	Addrs []string
	// Dial makes the (lazy) client connection to one address: one of
	// Addrs, or an active's advertised host:port a standby named. It
	// chooses credentials and interceptors; DialOptions are advised.
	Dial func(addr string) (*grpc.ClientConn, error)
	// Logger receives a line when the Conn moves to another replica.
	Logger hclog.Logger
	// FailoverWait bounds the search for an active replica in one call
	// (default DefaultFailoverWait); the call's own deadline bounds it too.
	// A call made with grpc.WaitForReady(true) waits as long as its ctx.
	FailoverWait time.Duration
}

var backoffConfig = grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

// DialOptions are the options advised for every address's connection: a
// short reconnection backoff (the default grows to two minutes, which
// would leave a restarted replica unused long after it became active)
// and a bounded connection attempt.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoffConfig,
		MinConnectTimeout: 5 * time.Second,
	})}
}

// Conn is a grpc.ClientConnInterface over the replicas of a control plane
// that sends each call to the replica last seen active and moves on as the
// package comment says. Safe for concurrent use.
type Conn struct {
	cfg Config
	log hclog.Logger

	mu      sync.Mutex
	eps     []*endpoint // configured first, then learned
	learned int
	cur     int // index in eps of the replica last seen active
	closed  bool
}

type endpoint struct {
	addr string
	cc   *grpc.ClientConn
}

var _ grpc.ClientConnInterface = (*Conn)(nil)

// New makes a Conn; nothing is dialed until the first call.
func New(cfg Config) (*Conn, error) {
	if len(cfg.Addrs) == 0 {
		return nil, ErrNoAddress
	}
	if cfg.Dial == nil {
		return nil, ErrNoDial
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.FailoverWait <= 0 {
		cfg.FailoverWait = DefaultFailoverWait
	}
	c := &Conn{cfg: cfg, log: cfg.Logger.Named("replicas")}
	for _, a := range Split(cfg.Addrs) {
		cc, err := cfg.Dial(a)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("control plane address %s: %w", a, err)
		}
		c.eps = append(c.eps, &endpoint{addr: a, cc: cc})
	}
	return c, nil
}

// Addrs lists the addresses the Conn knows (configured, then learned).
func (c *Conn) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.eps))
	for i, e := range c.eps {
		out[i] = e.addr
	}
	return out
}

// Current is the address calls go to first: the replica last seen active.
func (c *Conn) Current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eps[c.cur].addr
}

// Close closes every connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, e := range c.eps {
		if e.cc != nil {
			errs = append(errs, e.cc.Close())
		}
	}
	return errors.Join(errs...)
}

// Invoke sends a unary call to the active replica (grpc.ClientConnInterface).
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	opts, patient := splitWaitForReady(opts)
	s := c.search(ctx, method, patient)
	for {
		i, ep := s.endpoint()
		var p peer.Peer
		err := ep.cc.Invoke(ctx, method, args, reply, append(opts, grpc.Peer(&p))...)
		if err == nil {
			c.settle(i)
			return nil
		}
		if !s.next(i, ep, err, p.Addr != nil) {
			return s.final(err)
		}
	}
}

// NewStream opens a stream on the active replica
// (grpc.ClientConnInterface). A server stream of a repeat-safe RPC is
// re-opened on the next active when it is cut.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	opts, patient := splitWaitForReady(opts)
	rs := &resumable{c: c, ctx: ctx, desc: desc, method: method, opts: opts, patient: patient,
		resume: !desc.ClientStreams && repeatSafe[method]}
	if err := rs.open(c.search(ctx, method, patient)); err != nil {
		return nil, err
	}
	return rs, nil
}

// settle records the replica that answered as the one to try first.
func (c *Conn) settle(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != i {
		c.log.Info("control plane replica answering", "address", c.eps[i].addr, "was", c.eps[c.cur].addr)
		c.cur = i
	}
}

// learn finds addr among the endpoints or adds it (a standby named an
// active the Conn was not given). It returns -1 when it cannot.
func (c *Conn) learn(addr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.eps {
		if canonical(e.addr) == canonical(addr) {
			return i
		}
	}
	if c.closed || c.learned >= maxLearned {
		return -1
	}
	cc, err := c.cfg.Dial(addr)
	if err != nil {
		c.log.Warn("a standby named an active replica this client cannot dial; list it in --control-plane", "address", addr, "error", err)
		return -1
	}
	c.learned++
	c.eps = append(c.eps, &endpoint{addr: addr, cc: cc})
	c.log.Info("learned the active replica's address from a standby", "address", addr)
	return len(c.eps) - 1
}

// canonical is an address without the target schemes that name host:port
// (tcp:// of the CLI, dns:/// and passthrough:/// of gRPC), so an active's
// advertised host:port matches the address it was listed by.
func canonical(addr string) string {
	for _, p := range []string{"tcp://", "dns:///", "passthrough:///"} {
		addr = strings.TrimPrefix(addr, p)
	}
	return addr
}

// splitWaitForReady removes grpc.WaitForReady(true) from a call's options:
// per replica it would wait on a dead one forever; the Conn waits instead,
// across replicas, for as long as the call's ctx.
func splitWaitForReady(opts []grpc.CallOption) ([]grpc.CallOption, bool) {
	patient := false
	out := opts[:0:0]
	for _, o := range opts {
		if ff, ok := o.(grpc.FailFastCallOption); ok {
			patient = !ff.FailFast
			continue
		}
		out = append(out, o)
	}
	return out, patient
}

// search is one call's walk over the replicas.
type search struct {
	c       *Conn
	ctx     context.Context
	method  string
	patient bool
	start   time.Time
	// at is the endpoint to try next; tried counts attempts since the last
	// pause, so the walk pauses once every address failed in a row.
	at     int
	tried  int
	pauses int // pauses so far: the next waits searchBackoff.Delay(pauses+1)
	last   error
}

func (c *Conn) search(ctx context.Context, method string, patient bool) *search {
	c.mu.Lock()
	at := c.cur
	c.mu.Unlock()
	return &search{c: c, ctx: ctx, method: method, patient: patient, at: at}
}

func (s *search) endpoint() (int, *endpoint) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.at >= len(s.c.eps) {
		s.at = 0
	}
	return s.at, s.c.eps[s.at]
}

// next decides whether the call goes on after err from endpoint i, and
// where: it returns false when err is the call's answer.
func (s *search) next(i int, ep *endpoint, err error, reached bool) bool {
	s.last = err
	if s.ctx.Err() != nil || status.Code(err) != codes.Unavailable {
		return false
	}
	active, notActive := ActiveOf(err)
	n := len(s.c.Addrs())
	switch {
	case notActive:
		// A standby did nothing: any call may go on.
	case n < 2:
		// One replica that cannot be reached: answer as a plain
		// ClientConn would (the caller's own retry, if any, decides).
		return false
	case !reached, repeatSafe[s.method]:
	default:
		return false
	}
	if s.start.IsZero() {
		s.start = time.Now()
	}
	if !s.patient && time.Since(s.start) > s.c.cfg.FailoverWait {
		return false
	}
	s.tried++
	if j := -1; active != "" {
		if j = s.c.learn(active); j >= 0 && j != i {
			s.c.log.Debug("a standby named the active replica", "standby", ep.addr, "active", active)
			s.at = j
			return s.pause(false)
		}
	}
	s.at = i + 1
	return s.pause(true)
}

// pause waits between rounds: once every address failed in a row (or a
// standby keeps naming one that fails), it sleeps, growing to maxBackoff.
func (s *search) pause(moved bool) bool {
	n := len(s.c.Addrs())
	if s.tried < n && moved {
		return true
	}
	if s.tried < 2*n && !moved {
		return true
	}
	s.tried = 0
	s.pauses++
	return searchBackoff.Wait(s.ctx, s.pauses, nil)
}

// searchBackoff spaces the rounds of a search that found no replica.
var searchBackoff = backoff.Policy{Min: firstBackoff, Max: maxBackoff, Jitter: true}

// final is the error a call that did not find an active replica returns.
func (s *search) final(err error) error {
	if s.start.IsZero() || s.ctx.Err() != nil {
		return err
	}
	if _, notActive := ActiveOf(err); !notActive && status.Code(err) != codes.Unavailable {
		return err
	}
	st := status.Convert(err)
	return status.Errorf(st.Code(), "no active control plane replica answered among %s within %s: %s", strings.Join(s.c.Addrs(), ", "), time.Since(s.start).Round(time.Millisecond), st.Message())
}

// resumable is a client stream that moves to the next active replica when
// opening it fails there, and, for a repeat-safe server stream, when it is
// cut: the request is sent again on the new stream.
type resumable struct {
	c       *Conn
	ctx     context.Context
	desc    *grpc.StreamDesc
	method  string
	opts    []grpc.CallOption
	patient bool
	resume  bool

	cur      grpc.ClientStream
	idx      int
	req      any // the request of a server stream, sent again on resume
	sent     bool
	closed   bool // CloseSend called
	received bool // a message arrived on cur
}

func (r *resumable) open(s *search) error {
	for {
		i, ep := s.endpoint()
		cs, err := ep.cc.NewStream(r.ctx, r.desc, r.method, r.opts...)
		if err == nil {
			r.cur, r.idx, r.received = cs, i, false
			return nil
		}
		if !s.next(i, ep, err, false) {
			return s.final(err)
		}
	}
}

func (r *resumable) Header() (metadata.MD, error) { return r.cur.Header() }
func (r *resumable) Trailer() metadata.MD         { return r.cur.Trailer() }
func (r *resumable) Context() context.Context     { return r.cur.Context() }

func (r *resumable) CloseSend() error {
	r.closed = true
	return r.cur.CloseSend()
}

func (r *resumable) SendMsg(m any) error {
	if r.resume && !r.sent {
		r.req, r.sent = m, true
	}
	return r.cur.SendMsg(m)
}

func (r *resumable) RecvMsg(m any) error {
	var s *search
	for {
		err := r.cur.RecvMsg(m)
		if err == nil {
			if !r.received {
				r.received = true
				r.c.settle(r.idx)
			}
			return nil
		}
		// Only a repeat-safe server stream whose request is known moves
		// (search.next says when); a stream that ended cleanly (io.EOF)
		// or with another code is the caller's.
		if !r.resume || !r.sent {
			return err
		}
		if s == nil {
			s = r.c.search(r.ctx, r.method, r.patient)
			s.at = r.idx
		}
		_, ep := s.endpoint()
		if !s.next(r.idx, ep, err, true) {
			return s.final(err)
		}
		if err := r.open(s); err != nil {
			return err
		}
		if err := r.cur.SendMsg(r.req); err != nil {
			continue // RecvMsg reports why
		}
		if r.closed {
			if err := r.cur.CloseSend(); err != nil {
				continue
			}
		}
	}
}
