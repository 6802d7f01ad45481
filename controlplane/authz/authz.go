package authz

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/latchhq/latch/internal/actorname"
	"github.com/latchhq/latch/internal/errinfo"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// A refusal carries an ErrorInfo of reason ERROR_REASON_ACCESS_DENIED
// (internal/errinfo).
const (
	JournalKind   = recordv1.EntryKind_ENTRY_KIND_ACCESS_DENIED
	defaultWindow = time.Minute
	// maxTracked bounds the refusals remembered for deduplication.
	maxTracked = 4096
	// maxPerWindow bounds the refusal records journaled per window.
	maxPerWindow = 100
)

// Journal records refusals durably. Implemented by the control plane's
// server (a journal record of kind "access_denied").
type Journal interface {
	RecordRefusal(ctx context.Context, r Refusal) error
}

// Refusal is one refused RPC, or the first of a run of identical ones.
type Refusal struct {
	Time   time.Time
	Method string
	Caller Caller
	// Class of the RPC; "" when the table has no entry for it.
	Class Class
	// Suppressed identical refusals (same RPC, same caller) were not
	// journaled since Since: within a window only the first one is.
	Suppressed int
	Since      time.Time
	// Overflow, when > 0, makes this a summary record: that many refusals
	// since Since were over the per-window budget and not journaled one by
	// one (Method and Caller are then empty).
	Overflow int
}

// Reason says what was refused and why, for the caller and the journal.
func (r Refusal) Reason() string {
	var why string
	switch {
	case r.Class == "":
		why = "the RPC has no entry in the authorization table"
	case r.Caller.Role == RoleNone && r.Caller.Transport == TransportConsole:
		why = "the console call carries no live console session (sign in again)"
	case r.Caller.Role == RoleNone:
		why = "this identity is not listed by `latch serve` (--front-identity, --operator-identity, --front-uid, --operator-uid)"
	case r.Class == ClassLocal:
		why = "a local RPC: only the control plane's unix socket, as its own uid, root or an --operator-uid, may call it"
	case r.Class == ClassOperator:
		why = "an operator RPC: a front reaches only agent-facing RPCs"
	default:
		why = "not allowed for this role"
	}
	return fmt.Sprintf("%s refused for %s: %s", ShortMethod(r.Method), r.Caller, why)
}

// JournalReason is Reason plus the count of identical refusals this record
// stands for.
func (r Refusal) JournalReason() string {
	if r.Overflow > 0 {
		return fmt.Sprintf("%d refusals since %s were not journaled one by one: over the budget of %d refusal records per deduplication window (the control plane's log has them at debug level)", r.Overflow, r.Since.UTC().Format(time.RFC3339), maxPerWindow)
	}
	if r.Suppressed == 0 {
		return r.Reason()
	}
	return fmt.Sprintf("%s (and %d identical refusals since %s, not journaled one by one)", r.Reason(), r.Suppressed, r.Since.UTC().Format(time.RFC3339))
}

// Config configures an Authorizer.
type Config struct {
	Logger hclog.Logger
	// Policy is the table (default DefaultPolicy).
	Policy *Policy
	// OperatorUIDs may call every RPC on the unix socket, besides the
	// server's own uid and root.
	OperatorUIDs []uint32
	// FrontUIDs may call agent-facing RPCs on the unix socket (an MCP front
	// on the same host under its own account).
	FrontUIDs []uint32
	// FrontIdentities and OperatorIdentities are client-certificate
	// identities (see CertIdentity): cn:NAME or a URI. An operator identity
	// may be bound to an operator name, NAME=IDENTITY (ParseOperatorIdentity):
	// the name it may create console tokens for (Caller.OperatorName).
	FrontIdentities    []string
	OperatorIdentities []string
	// PlaintextLoopbackFronts treats plaintext TCP peers on a loopback
	// address as fronts (the TCP listener is loopback without TLS).
	PlaintextLoopbackFronts bool
	// Journal records refusals (nil: they are only logged).
	Journal Journal
	// ConsoleSession verifies the session a call on the console's
	// in-process connection names (nil: such calls are refused).
	ConsoleSession ConsoleSession
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Window within which identical refusals are journaled once (default 1m).
	Window time.Duration
}

// Authorizer identifies callers and enforces the policy.
type Authorizer struct {
	cfg       Config
	log       hclog.Logger
	policy    *Policy
	localUIDs map[uint32]bool
	frontUIDs map[uint32]bool
	fronts    map[string]bool
	operators map[string]bool
	// names are the operator names identities are bound to (NAME=IDENTITY).
	names map[string]string

	mu          sync.Mutex
	seen        map[string]*seen
	windowStart time.Time
	inWindow    int // records journaled in the window
	overflow    int // refusals over the budget, not journaled one by one
}

type seen struct {
	last       Refusal
	journaled  time.Time
	suppressed int
}

// New validates the configuration and builds the authorizer.
func New(cfg Config) (*Authorizer, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Window <= 0 {
		cfg.Window = defaultWindow
	}
	if cfg.Policy == nil {
		p, err := DefaultPolicy()
		if err != nil {
			return nil, err
		}
		cfg.Policy = p
	}
	a := &Authorizer{
		cfg: cfg, log: cfg.Logger.Named("authz"), policy: cfg.Policy,
		localUIDs: map[uint32]bool{uint32(os.Getuid()): true, 0: true},
		frontUIDs: map[uint32]bool{}, fronts: map[string]bool{}, operators: map[string]bool{}, names: map[string]string{},
		seen: map[string]*seen{},
	}
	for _, u := range cfg.OperatorUIDs {
		a.localUIDs[u] = true
	}
	for _, u := range cfg.FrontUIDs {
		if a.localUIDs[u] {
			return nil, fmt.Errorf("%w: uid %d is both a front (--front-uid) and an operator (its own uid, root or --operator-uid)", ErrConfig, u)
		}
		a.frontUIDs[u] = true
	}
	for _, s := range cfg.FrontIdentities {
		id, err := ParseIdentity(s)
		if err != nil {
			return nil, err
		}
		a.fronts[id] = true
	}
	for _, s := range cfg.OperatorIdentities {
		name, id, err := ParseOperatorIdentity(s)
		if err != nil {
			return nil, err
		}
		if prev, ok := a.names[id]; ok && name != "" && prev != name {
			return nil, fmt.Errorf("%w: %s is bound to two operator names, %q and %q", ErrConfig, id, prev, name)
		}
		a.operators[id] = true
		if name != "" {
			a.names[id] = name
		}
	}
	for id := range a.fronts {
		if a.operators[id] {
			return nil, fmt.Errorf("%w: %s is listed both as a front and as an operator; a front's certificate must never reach an operator RPC", ErrConfig, id)
		}
	}
	return a, nil
}

// HasTLSIdentities reports whether any certificate identity is listed.
func (a *Authorizer) HasTLSIdentities() bool { return len(a.fronts)+len(a.operators) > 0 }

// HasSocketGuests reports whether uids other than the server's own and
// root may use the unix socket (its mode must then let them connect).
func (a *Authorizer) HasSocketGuests() bool {
	own := uint32(os.Getuid())
	for u := range a.localUIDs {
		if u != own && u != 0 {
			return true
		}
	}
	return len(a.frontUIDs) > 0
}

// Identify names the peer of an RPC from its transport.
func (a *Authorizer) Identify(ctx context.Context) Caller {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Caller{Identity: "none: no peer"}
	}
	switch info := p.AuthInfo.(type) {
	case ConsoleInfo:
		return a.identifyConsole(ctx)
	case PeerInfo:
		c := Caller{Identity: fmt.Sprintf("uid:%d", info.UID), Transport: TransportUnix}
		switch {
		case a.localUIDs[info.UID]:
			c.Role = RoleLocal
		case a.frontUIDs[info.UID]:
			c.Role = RoleFront
		}
		return c
	case credentials.TLSInfo:
		c := Caller{Transport: TransportTLS}
		chains := info.State.VerifiedChains
		if len(chains) == 0 || len(chains[0]) == 0 {
			c.Identity = "none: no verified client certificate"
			return c
		}
		id, err := CertIdentity(chains[0][0])
		if err != nil {
			c.Identity = "none: " + err.Error()
			return c
		}
		c.Identity = id
		switch {
		case a.operators[id]:
			c.Role, c.Operator = RoleOperator, a.names[id]
		case a.fronts[id]:
			c.Role = RoleFront
		}
		return c
	case nil:
		c := Caller{Transport: TransportTCP, Identity: "tcp:" + addrString(p.Addr)}
		if ta, ok := p.Addr.(*net.TCPAddr); ok && a.cfg.PlaintextLoopbackFronts && ta.IP.IsLoopback() {
			c.Role = RoleFront
		}
		return c
	default:
		return Caller{Identity: "none: unknown transport " + info.AuthType()}
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return "unknown"
	}
	return a.String()
}

// Authorize identifies the caller and returns ctx carrying it, or the
// PermissionDenied status of the refusal (journaled).
func (a *Authorizer) Authorize(ctx context.Context, fullMethod string) (context.Context, error) {
	c := a.Identify(ctx)
	class, ok := a.policy.Class(fullMethod)
	if ok && c.Role.Allows(class) {
		return WithCaller(ctx, c), nil
	}
	r := Refusal{Time: a.cfg.Now(), Method: fullMethod, Caller: c, Class: class}
	a.refuse(ctx, r)
	return nil, errinfo.Error(codes.PermissionDenied, r.Reason(), controlplanev1.ErrorReason_ERROR_REASON_ACCESS_DENIED,
		"rpc", ShortMethod(fullMethod), "class", string(class), "role", c.Role.String(), "identity", c.Identity)
}

// refuse logs and journals a refusal. Two bounds keep a flood from
// growing the journal: identical refusals (same RPC, same caller) within
// the window are counted and written with the next record, and at most
// maxPerWindow records are written per window; the refusals over that
// budget are counted and written as one summary record when the next
// window opens (or at Flush).
func (a *Authorizer) refuse(ctx context.Context, r Refusal) {
	key := r.Method + "\x00" + dedupeIdentity(r.Caller) + "\x00" + r.Caller.Role.String()
	a.mu.Lock()
	summary := a.rollWindowLocked(r.Time)
	s := a.seen[key]
	switch {
	case s != nil && r.Time.Sub(s.journaled) < a.cfg.Window:
		s.suppressed++
		s.last = r
		a.mu.Unlock()
		a.log.Debug("access denied (repeat, counted)", "rpc", ShortMethod(r.Method), "caller", r.Caller.String())
		a.journalSummary(ctx, summary)
		return
	case a.inWindow >= maxPerWindow:
		a.overflow++
		a.mu.Unlock()
		a.log.Debug("access denied (over the journal budget, counted)", "rpc", ShortMethod(r.Method), "caller", r.Caller.String())
		a.journalSummary(ctx, summary)
		return
	case s == nil && len(a.seen) >= maxTracked:
		a.sweepLocked(r.Time)
		if len(a.seen) >= maxTracked {
			a.overflow++
			a.mu.Unlock()
			a.log.Debug("access denied (too many refused callers tracked, counted)", "rpc", ShortMethod(r.Method), "caller", r.Caller.String())
			a.journalSummary(ctx, summary)
			return
		}
	}
	a.inWindow++
	if s != nil {
		r.Suppressed, r.Since = s.suppressed, s.journaled
	}
	a.seen[key] = &seen{last: r, journaled: r.Time}
	a.mu.Unlock()
	a.log.Warn("access denied", "rpc", ShortMethod(r.Method), "caller", r.Caller.String(), "transport", r.Caller.Transport, "suppressed_before", r.Suppressed)
	a.journalSummary(ctx, summary)
	a.journal(ctx, r)
}

// dedupeIdentity is the caller's identity without what changes per
// connection (a plaintext TCP peer's port).
func dedupeIdentity(c Caller) string {
	if c.Transport == TransportTCP {
		if host, _, err := net.SplitHostPort(strings.TrimPrefix(c.Identity, "tcp:")); err == nil {
			return "tcp:" + host
		}
	}
	return c.Identity
}

// rollWindowLocked opens a new budget window when the current one ended
// and returns the summary of the refusals the last one did not journal
// (Overflow 0: none).
func (a *Authorizer) rollWindowLocked(now time.Time) Refusal {
	if now.Sub(a.windowStart) < a.cfg.Window {
		return Refusal{}
	}
	out := Refusal{Time: now, Overflow: a.overflow, Since: a.windowStart}
	a.windowStart, a.inWindow, a.overflow = now, 0, 0
	return out
}

func (a *Authorizer) journalSummary(ctx context.Context, r Refusal) {
	if r.Overflow == 0 {
		return
	}
	a.log.Warn("refusals not journaled one by one", "count", r.Overflow, "since", r.Since)
	a.journal(ctx, r)
}

// sweepLocked forgets refusals whose window ended and that hold no count.
func (a *Authorizer) sweepLocked(now time.Time) {
	for k, s := range a.seen {
		if now.Sub(s.journaled) >= a.cfg.Window && s.suppressed == 0 {
			delete(a.seen, k)
		}
	}
}

func (a *Authorizer) journal(ctx context.Context, r Refusal) {
	if a.cfg.Journal == nil {
		return
	}
	// The caller hanging up does not lose the record.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.cfg.Journal.RecordRefusal(jctx, r); err != nil {
		a.log.Error("cannot journal a refusal", "rpc", ShortMethod(r.Method), "caller", r.Caller.String(), "error", err)
	}
}

// Flush journals the counts of refusals suppressed since their last record
// (the server calls it when it stops).
func (a *Authorizer) Flush(ctx context.Context) {
	a.mu.Lock()
	var out []Refusal
	for _, s := range a.seen {
		if s.suppressed > 0 {
			r := s.last
			// The record stands for the suppressed ones: one fewer, since
			// this record is the last of them.
			r.Suppressed, r.Since = s.suppressed-1, s.journaled
			out = append(out, r)
			s.suppressed, s.journaled = 0, r.Time
		}
	}
	summary := Refusal{Time: a.cfg.Now(), Overflow: a.overflow, Since: a.windowStart}
	a.overflow = 0
	a.mu.Unlock()
	for _, r := range out {
		a.journal(ctx, r)
	}
	a.journalSummary(ctx, summary)
}

// UnaryInterceptor enforces the policy on unary RPCs.
func (a *Authorizer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := a.Authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		c, _ := CallerFrom(ctx)
		if err := checkOperatorName(req); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: %v", info.FullMethod, err)
		}
		if c.Role == RoleOperator {
			bindOperator(req, c.boundName())
		}
		return h(ctx, req)
	}
}

// operatorField is the "operator" string field of req, if it has one.
func operatorField(req any) (protoreflect.Message, protoreflect.FieldDescriptor, bool) {
	m, ok := req.(proto.Message)
	if !ok {
		return nil, nil, false
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("operator")
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return nil, nil, false
	}
	return r, fd, true
}

// checkOperatorName refuses an operator name a caller gives (the name a
// decision is journaled under) that is not an acceptable actor name
// (actorname.Check): "bob\u200b" would show as bob in the journal and the
// console. Empty is fine: the caller's identity is used.
func checkOperatorName(req any) error {
	r, fd, ok := operatorField(req)
	if !ok {
		return nil
	}
	if name := r.Get(fd).String(); name != "" {
		if err := actorname.Check(name); err != nil {
			return fmt.Errorf("operator name: %w", err)
		}
	}
	return nil
}

// boundName is the name an operator caller's decisions are bound to: the
// session's operator for the console, the certificate's identity otherwise.
func (c Caller) boundName() string {
	if c.Transport == TransportConsole {
		return c.Operator
	}
	return c.Identity
}

// bindOperator ties the "operator" field of a request (the name a decision
// is journaled under) to the certificate that made it: a remote operator
// cannot record a decision under someone else's name. The name becomes
// the identity, or "NAME (IDENTITY)" when the client gave another name.
// Socket callers are trusted by uid and keep the name they give.
func bindOperator(req any, identity string) {
	r, fd, ok := operatorField(req)
	if !ok {
		return
	}
	name := r.Get(fd).String()
	switch name {
	case "", identity:
		name = identity
	default:
		name = name + " (" + identity + ")"
	}
	r.Set(fd, protoreflect.ValueOfString(name))
}

// StreamInterceptor enforces the policy on streaming RPCs.
func (a *Authorizer) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, err := a.Authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return h(srv, &callerStream{ServerStream: ss, ctx: ctx})
	}
}

type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *callerStream) Context() context.Context { return s.ctx }
