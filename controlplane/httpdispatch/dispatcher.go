package httpdispatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/egress"
	"github.com/latchhq/latch/internal/redact"
	"github.com/latchhq/latch/internal/tracing"
	"github.com/latchhq/latch/tools"
)

// Errors returned by Send and Status. Every error from them wraps exactly one
// of ErrNotSent and ErrOutcomeUnknown; see the package documentation.
var (
	// ErrNotSent means no byte of the request left the gateway: the
	// execution did not happen and may be dispatched again.
	ErrNotSent = errors.New("httpdispatch: request not sent")
	// ErrOutcomeUnknown means the request may have reached the target and
	// no complete answer arrived: the execution is outcome_unknown and must
	// be recovered by evidence, never by a blind re-send.
	ErrOutcomeUnknown = errors.New("httpdispatch: outcome unknown")
	// ErrRefused means the address policy refused the target's address.
	// It always comes with ErrNotSent. It is egress.ErrRefused: the policy
	// is the one of all of Latch's outbound HTTP.
	ErrRefused = egress.ErrRefused
	// ErrInvalidCall means the call or its target cannot be sent as given
	// (a bad base_url, path, header or credential). It always comes with
	// ErrNotSent.
	ErrInvalidCall = errors.New("httpdispatch: invalid call")
)

// Credential is a secret the vault hands the dispatcher for one call, as
// the kind that presents it. Implemented by the vault's HTTP kinds
// (vault.HTTPCredential: vault.Credential.HTTP asks the credential's kind
// for it): a new kind, a request signer included, needs no change here. It is
// never logged, stored or returned.
type Credential interface {
	// Apply presents the credential on the request that goes on the wire.
	// It is called last, once per attempt, with every other header set and
	// r.GetBody set for the call (a signer may hash the payload); it must
	// not change the method, URL or body.
	Apply(r *http.Request) error
	// Headers names the headers Apply sets: templates may not set them,
	// results never keep them.
	Headers() []string
	// Secrets are the values Apply may put on the wire (a token, a
	// password and the "user:pass" it encodes, a session token, an access
	// token it fetched). They are redacted, in every form package redact
	// knows, from the observation (body and headers) and from the errors;
	// it is asked again after each Apply. A value shorter than
	// redact.MinLen cannot be redacted, and the call is refused.
	Secrets() [][]byte
}

// AppliedSecreter is implemented by a Credential whose Apply puts secret
// values on the request that Secrets cannot know beforehand and that are
// not in the Authorization header (whose values are always redacted): a
// per-request signature in a header of its own. Implemented by
// internal/testing/example/hmacsig.Signer.
type AppliedSecreter interface {
	// AppliedSecrets are those values, read from the headers Apply set.
	AppliedSecrets(h http.Header) [][]byte
}

// Call is one HTTP exchange with a catalog target.
type Call struct {
	// ExecutionID is sent in Target.IdempotencyHeader (Send only).
	ExecutionID string
	// NoIdempotencyKey sends no idempotency header even when the target
	// has one: an execution in observe mode reaches the target as the
	// request would without Latch.
	NoIdempotencyKey bool
	Target           *tools.Target
	// Method and Path come from the rendered request template; Path is in
	// escaped form and is appended to Target.BaseURL. The host always
	// comes from BaseURL.
	Method  string
	Path    string
	Query   map[string]string
	Headers map[string]string
	Body    []byte
	// Credential is presented on the request; nil for none.
	Credential Credential
	// Timeout bounds the whole exchange (0: Target.Timeout, then
	// Config.DefaultTimeout).
	Timeout time.Duration
}

// Observation is the target's answer as stored in the result.
type Observation struct {
	Status int
	// Headers holds the allow-listed response headers (Config.ResultHeaders
	// and the target's idempotency header), canonical keys, multiple values
	// joined with ", ". Credential-bearing headers are never kept.
	Headers map[string]string
	// Body is at most Config.MaxBody bytes of the response body.
	Body []byte
	// Truncated is set when the body was longer than Config.MaxBody.
	Truncated bool
}

// DefaultResultHeaders is the default allow-list of response headers kept in
// an Observation.
var DefaultResultHeaders = []string{
	"Content-Type",
	"Content-Location",
	"Location",
	"Retry-After",
	"ETag",
	"Last-Modified",
	"Idempotency-Key",
	"Idempotent-Replayed",
	"Request-Id",
	"X-Request-Id",
}

// neverStored are response headers that may carry secrets.
var neverStored = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Cookie":              true,
	"Set-Cookie":          true,
	"Set-Cookie2":         true,
}

// reservedRequest reports a request header a template or credential may not
// set (tools.ReservedHeader: the one list the catalog loader refuses too).
func reservedRequest(name string) bool { return tools.ReservedHeader(name) }

// Config configures a Dispatcher.
type Config struct {
	Logger hclog.Logger
	// MaxBody caps the response body kept in an Observation (default 64 KiB).
	MaxBody int64
	// ResultHeaders is the allow-list of response headers kept in an
	// Observation (default DefaultResultHeaders). Authorization, Cookie and
	// Set-Cookie are refused.
	ResultHeaders []string
	// Resolver resolves target host names (nil: net.DefaultResolver). The
	// address policy applies to the addresses it returns.
	Resolver *net.Resolver
	// TLSConfig is cloned for HTTPS targets (nil: system roots, TLS 1.2+).
	TLSConfig *tls.Config
	// DefaultTimeout bounds an exchange when neither the call nor the
	// target sets one (default 30s).
	DefaultTimeout time.Duration
	// DialTimeout bounds one TCP connect (default 10s).
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds a TLS handshake (default 10s).
	TLSHandshakeTimeout time.Duration
	// MaxIdleConnsPerHost bounds kept-alive connections per host (default 64).
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes kept-alive connections idle this long (default
	// 4s, below common server keep-alive timeouts such as Node's 5s: a
	// request written into a connection the server is closing is an
	// outcome_unknown, so the gateway gives idle connections up first).
	IdleConnTimeout time.Duration
	// UserAgent is sent unless the template sets one (default "latch").
	UserAgent string
}

// Dispatcher sends calls to HTTP targets. It is safe for concurrent use.
type Dispatcher struct {
	log            hclog.Logger
	maxBody        int64
	keep           map[string]bool
	userAgent      string
	defaultTimeout time.Duration
	// Two pools, so a connection dialed under allow_private is never reused
	// for a target that does not allow private addresses.
	public, private *http.Transport
}

// New returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxBody < 0 {
		return nil, fmt.Errorf("httpdispatch: max body %d is negative; use 0 for the default (64 KiB)", cfg.MaxBody)
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 64 << 10
	}
	if cfg.ResultHeaders == nil {
		cfg.ResultHeaders = DefaultResultHeaders
	}
	keep := make(map[string]bool, len(cfg.ResultHeaders))
	for _, h := range cfg.ResultHeaders {
		ck := http.CanonicalHeaderKey(h)
		if !validToken(h) {
			return nil, fmt.Errorf("httpdispatch: result header %q is not a valid header name", h)
		}
		if neverStored[ck] {
			return nil, fmt.Errorf("httpdispatch: result header %s may carry a secret and is never stored; remove it from the result headers", ck)
		}
		keep[ck] = true
	}
	for _, v := range []*time.Duration{&cfg.DefaultTimeout, &cfg.DialTimeout, &cfg.TLSHandshakeTimeout, &cfg.IdleConnTimeout} {
		if *v < 0 {
			return nil, fmt.Errorf("httpdispatch: negative timeout %s; use 0 for the default", *v)
		}
	}
	if cfg.DefaultTimeout == 0 {
		cfg.DefaultTimeout = 30 * time.Second
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.TLSHandshakeTimeout == 0 {
		cfg.TLSHandshakeTimeout = 10 * time.Second
	}
	if cfg.IdleConnTimeout == 0 {
		cfg.IdleConnTimeout = 4 * time.Second
	}
	if cfg.MaxIdleConnsPerHost < 0 {
		return nil, fmt.Errorf("httpdispatch: max idle connections per host %d is negative", cfg.MaxIdleConnsPerHost)
	}
	if cfg.MaxIdleConnsPerHost == 0 {
		cfg.MaxIdleConnsPerHost = 64
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "latch"
	}
	return &Dispatcher{
		log:            cfg.Logger.Named("httpdispatch"),
		maxBody:        cfg.MaxBody,
		keep:           keep,
		userAgent:      cfg.UserAgent,
		defaultTimeout: cfg.DefaultTimeout,
		public:         newTransport(cfg, false),
		private:        newTransport(cfg, true),
	}, nil
}

// newTransport builds an HTTP/1.1-only transport whose every connection
// passes the address policy (egress.NewTransport). See doc.go for why each
// setting is what it is.
func newTransport(cfg Config, allowPrivate bool) *http.Transport {
	return egress.NewTransport(egress.Config{
		Policy:                 egress.Policy{AllowPrivate: allowPrivate},
		Resolver:               cfg.Resolver,
		TLSConfig:              cfg.TLSConfig,
		DialTimeout:            cfg.DialTimeout,
		TLSHandshakeTimeout:    cfg.TLSHandshakeTimeout,
		IdleConnTimeout:        cfg.IdleConnTimeout,
		MaxIdleConns:           4 * cfg.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		MaxResponseHeaderBytes: 64 << 10,
		HTTP1Only:              true,
		DisableCompression:     true,
		WrapConn:               func(c net.Conn) net.Conn { return &countingConn{Conn: c} },
	})
}

// Close releases idle connections. Calls in flight are not interrupted.
func (d *Dispatcher) Close() {
	d.public.CloseIdleConnections()
	d.private.CloseIdleConnections()
}

// Send performs the call: one request to Target.BaseURL+Path, carrying the
// execution ID in the target's idempotency header, never re-sent once any
// byte of it may have been written. Any HTTP status is an Observation;
// errors wrap ErrNotSent or ErrOutcomeUnknown.
func (d *Dispatcher) Send(ctx context.Context, c Call) (*Observation, error) {
	return d.exchange(ctx, c, true)
}

// Status queries the target's status endpoint about c.ExecutionID. Method
// and Path are used as given; when Path is empty they come from
// Target.Status with "{execution_id}" replaced by the escaped execution ID.
// The idempotency header is not sent. Same address policy and error classes
// as Send.
func (d *Dispatcher) Status(ctx context.Context, c Call) (*Observation, error) {
	if c.Target != nil && c.Target.Status != nil && c.Path == "" {
		if c.ExecutionID == "" && strings.Contains(c.Target.Status.Path, "{execution_id}") {
			return nil, invalid("target %q: the status query needs an execution ID", c.Target.Name)
		}
		c.Path = strings.ReplaceAll(c.Target.Status.Path, "{execution_id}", url.PathEscape(c.ExecutionID))
		if c.Method == "" {
			c.Method = c.Target.Status.Method
		}
	}
	if c.Method == "" {
		c.Method = http.MethodGet
	}
	if c.Path == "" {
		return nil, invalid("target has no status endpoint and the call names no path")
	}
	if len(c.Body) > 0 {
		return nil, invalid("a status query carries no body")
	}
	return d.exchange(ctx, c, false)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrInvalidCall, ErrNotSent, fmt.Sprintf(format, args...))
}

// prepared is a validated call, ready to be turned into requests.
type prepared struct {
	url    *url.URL
	header http.Header
	// red redacts the credential's secrets as known after the probe Apply
	// (nil without a credential); each attempt builds its own after its
	// Apply.
	red  *redact.Redactor
	cred Credential
	// credHeaders are the credential's header names, stripped from results.
	credHeaders []string
	idemHeader  string
}

func (d *Dispatcher) prepare(c Call, send bool) (*prepared, error) {
	tg := c.Target
	if tg == nil {
		return nil, invalid("call has no target")
	}
	if _, http := tg.Kind().(tools.HTTPKind); tg.Channel != "" && !http {
		return nil, invalid("target %q uses the %s channel, not http", tg.Name, tg.Channel)
	}
	if !validToken(c.Method) || c.Method != strings.ToUpper(c.Method) || c.Method == http.MethodConnect {
		return nil, invalid("method %q is not an upper-case HTTP method (CONNECT is not allowed)", c.Method)
	}
	u, err := targetURL(tg, c.Path, c.Query)
	if err != nil {
		return nil, err
	}
	p := &prepared{url: u, header: make(http.Header, len(c.Headers)+4)}
	if send && tg.IdempotencyHeader != "" && !c.NoIdempotencyKey {
		p.idemHeader = http.CanonicalHeaderKey(tg.IdempotencyHeader)
		if !validToken(tg.IdempotencyHeader) || reservedRequest(p.idemHeader) {
			return nil, invalid("target %q: idempotency header %q is not usable", tg.Name, tg.IdempotencyHeader)
		}
		if c.ExecutionID == "" || !validValue(c.ExecutionID) {
			return nil, invalid("target %q needs an execution ID for its idempotency header", tg.Name)
		}
	}
	if c.Credential != nil {
		p.cred = c.Credential
		if p.red, err = credentialRedactor(c.Credential); err != nil {
			return nil, invalid("%v", err)
		}
		for _, h := range c.Credential.Headers() {
			ck := http.CanonicalHeaderKey(h)
			if !validToken(h) || reservedRequest(ck) {
				return nil, invalid("header credential names an unusable header %q", h)
			}
			if ck == p.idemHeader {
				return nil, invalid("target %q: the credential header %s is also the idempotency header", tg.Name, ck)
			}
			p.credHeaders = append(p.credHeaders, ck)
		}
	}
	for k, v := range c.Headers {
		ck := http.CanonicalHeaderKey(k)
		switch {
		case !validToken(k):
			return nil, invalid("header name %q is not valid", k)
		case !validValue(v):
			return nil, invalid("header %s: value contains a control character", ck)
		case reservedRequest(ck):
			return nil, invalid("header %s is set by the transport, not the template", ck)
		case ck == p.idemHeader:
			return nil, invalid("header %s carries the execution ID and cannot be set by the template", ck)
		case slices.Contains(p.credHeaders, ck) || (c.Credential != nil && ck == "Authorization"):
			return nil, invalid("header %s would overwrite the credential", ck)
		}
		p.header.Set(ck, v)
	}
	if p.idemHeader != "" {
		p.header.Set(p.idemHeader, c.ExecutionID)
	}
	if p.header.Get("User-Agent") == "" {
		p.header.Set("User-Agent", d.userAgent)
	}
	if len(c.Body) > 0 && p.header.Get("Content-Type") == "" {
		p.header.Set("Content-Type", "application/json")
	}
	// A credential that cannot be presented is refused here, before anything
	// is sent, rather than in every attempt.
	pu := *u
	probe := &http.Request{Method: c.Method, URL: &pu, Header: p.header.Clone(), Body: io.NopCloser(bytes.NewReader(c.Body))}
	if err := present(p.cred, probe, c.Body); err != nil {
		return nil, invalid("%s", p.red.String(err.Error()))
	}
	if p.cred != nil {
		// The probe may have fetched a token (a kind that fetches tokens).
		if p.red, err = credentialRedactor(p.cred); err != nil {
			return nil, invalid("%v", err)
		}
	}
	return p, nil
}

// targetURL joins the target's base URL and an escaped path. Scheme and host
// come only from BaseURL; the path cannot climb out of it.
func targetURL(tg *tools.Target, escapedPath string, query map[string]string) (*url.URL, error) {
	base, err := url.Parse(tg.BaseURL)
	if err != nil {
		return nil, invalid("target %q: base_url does not parse: %v", tg.Name, err)
	}
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, invalid("target %q: base_url scheme %q is not http or https", tg.Name, base.Scheme)
	}
	if base.Host == "" || base.User != nil || base.RawQuery != "" || base.Fragment != "" || base.Opaque != "" {
		return nil, invalid("target %q: base_url must be scheme://host[:port][/path] with no user info, query or fragment", tg.Name)
	}
	if !strings.HasPrefix(escapedPath, "/") || strings.HasPrefix(escapedPath, "//") {
		return nil, invalid("target %q: path must start with a single /", tg.Name)
	}
	for _, el := range strings.Split(escapedPath, "/") {
		// %2E is an unreserved character: "%2E%2E" normalizes to "..".
		if un, err := url.PathUnescape(el); err == nil && (un == "." || un == "..") {
			return nil, invalid("target %q: path has a dot segment", tg.Name)
		}
	}
	raw := strings.TrimSuffix(base.EscapedPath(), "/") + escapedPath
	p, err := url.PathUnescape(raw)
	if err != nil {
		return nil, invalid("target %q: path is not validly escaped: %v", tg.Name, err)
	}
	u := &url.URL{Scheme: base.Scheme, Host: base.Host, Path: p, RawPath: raw}
	if u.EscapedPath() != raw {
		return nil, invalid("target %q: path is not a valid escaped path (a raw ?, # or space?)", tg.Name)
	}
	if len(query) > 0 {
		q := make(url.Values, len(query))
		for k, v := range query {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	return u, nil
}

// present applies cred (if any) to req, the request about to be sent. req
// has a GetBody only while the credential looks at it: the transport must
// never see one (it would replay the request on its own).
func present(cred Credential, req *http.Request, body []byte) error {
	if cred == nil {
		return nil
	}
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	err := cred.Apply(req)
	req.GetBody = nil
	return err
}

// credentialRedactor is the redactor of cred's secrets and of applied (what
// Apply put on the request, appliedSecrets), in every form; an error when
// one is too short to be redacted (the call is then refused).
func credentialRedactor(cred Credential, applied ...[]byte) (*redact.Redactor, error) {
	needles, err := redact.Secrets(nil, append(cred.Secrets(), applied...))
	if err != nil {
		return nil, fmt.Errorf("the credential cannot be redacted from results, so it is not presented: %w", err)
	}
	return redact.New(needles), nil
}

// appliedSecrets are the secret values a credential's Apply set in h beyond
// its Secrets: the whole Authorization header value when the credential
// sets it ("Bearer <token>", "Basic <pair>", a SigV4 "AWS4-HMAC-SHA256
// Credential=..., Signature=<hex>"), and a signature in it alone (S3's
// SignatureDoesNotMatch answer quotes the signature provided; it is valid
// for that request for minutes), and what a credential implementing
// AppliedSecreter names (a signature in a header of its own).
func appliedSecrets(cred Credential, h http.Header, credHeaders []string) [][]byte {
	var out [][]byte
	if a, ok := cred.(AppliedSecreter); ok {
		out = a.AppliedSecrets(h)
	}
	if !slices.Contains(credHeaders, "Authorization") {
		return out
	}
	for _, v := range h.Values("Authorization") {
		out = append(out, []byte(v))
		if _, sig, ok := strings.Cut(v, "Signature="); ok {
			sig, _, _ = strings.Cut(sig, ",")
			out = append(out, []byte(strings.TrimSpace(sig)))
		}
	}
	return out
}

// redactedError is err with the credential's secrets replaced in its text;
// errors.Is and errors.As still see err. Every error an attempt with a
// credential returns is one (prepare's own messages quote no value, and
// the probe Apply's is redacted in place), so a transport or token
// endpoint message that quotes a secret is never stored in a reason or
// logged.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactError wraps err as a redactedError when red has something to
// redact.
func redactError(red *redact.Redactor, err error) error {
	if err == nil || red.Empty() {
		return err
	}
	return &redactedError{msg: red.String(err.Error()), err: err}
}

// failClass is how an attempt failed.
type failClass int

const (
	notSent failClass = iota + 1
	outcomeUnknown
)

type failure struct {
	class  failClass
	reused bool
	err    error
}

func (d *Dispatcher) exchange(ctx context.Context, c Call, send bool) (*Observation, error) {
	p, err := d.prepare(c, send)
	if err != nil {
		return nil, err // prepare's messages never quote a secret (or are redacted)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = c.Target.Timeout
	}
	if timeout <= 0 {
		timeout = d.defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := d.public
	if c.Target.AllowPrivate {
		tr = d.private
	}
	var log hclog.Logger
	if d.log.IsDebug() {
		log = d.log.With("execution_id", c.ExecutionID, "target", c.Target.Name, "method", c.Method)
	}
	// At most one more attempt, and only when the first was handed a kept-
	// alive connection that turned out dead before a single byte of the
	// request was written to it: then nothing left the gateway.
	for attempt := 1; ; attempt++ {
		obs, f := d.attempt(ctx, tr, c, p)
		if f == nil {
			if log != nil {
				log.Debug("target answered", "status", obs.Status, "truncated", obs.Truncated)
			}
			return obs, nil
		}
		if f.class == notSent && f.reused && attempt < 2 && ctx.Err() == nil {
			if log != nil {
				log.Debug("stale kept-alive connection, nothing written; sending on a new connection", "error", f.err)
			}
			continue
		}
		if log != nil {
			log.Debug("exchange failed", "outcome_unknown", f.class == outcomeUnknown, "error", f.err)
		}
		return nil, f.err
	}
}

// tracker follows one attempt through httptrace.
type tracker struct {
	// Set by GotConn, which runs on the RoundTrip goroutine.
	gotConn bool
	reused  bool
	conn    *countingConn
	mark    uint64
	// Set by the write hooks, which run on the transport's write goroutine.
	wrote atomic.Bool
}

// written reports whether any byte of the request may have left. It is
// called after RoundTrip returned; the transport closes a failed connection
// before RoundTrip returns, and Close waits for in-flight writes, so the
// counter is final.
func (t *tracker) written() bool {
	switch {
	case !t.gotConn:
		return false
	case t.wrote.Load():
		return true
	case t.conn == nil:
		return true // not our connection type: assume the worst
	default:
		return t.conn.writes.Load() != t.mark
	}
}

func (d *Dispatcher) attempt(ctx context.Context, tr *http.Transport, c Call, p *prepared) (*Observation, *failure) {
	tk := &tracker{}
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			tk.gotConn = true
			tk.reused = info.Reused
			nc := info.Conn
			if tc, ok := nc.(*tls.Conn); ok {
				nc = tc.NetConn()
			}
			if cc, ok := nc.(*countingConn); ok {
				tk.conn = cc
				tk.mark = cc.writes.Load()
			}
		},
		WroteHeaderField: func(string, []string) { tk.wrote.Store(true) },
		WroteHeaders:     func() { tk.wrote.Store(true) },
		WroteRequest:     func(httptrace.WroteRequestInfo) { tk.wrote.Store(true) },
	}
	u := *p.url
	req := (&http.Request{
		Method:     c.Method,
		URL:        &u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     p.header.Clone(),
		Host:       u.Host,
		// Always a non-nil body and never a GetBody: the transport then
		// treats the request as not replayable and never re-sends it on
		// its own (see doc.go).
		Body:          io.NopCloser(bytes.NewReader(c.Body)),
		ContentLength: int64(len(c.Body)),
	}).WithContext(httptrace.WithClientTrace(ctx, trace))
	tracing.InjectHeader(ctx, req.Header) // W3C traceparent of the dispatch span, when traced
	if err := present(p.cred, req, c.Body); err != nil {
		return nil, &failure{class: notSent, err: redactError(p.red, invalid("target %q: the credential could not be presented: %v", c.Target.Name, err))}
	}
	red := p.red
	if p.cred != nil {
		// Asked again after Apply: a kind that fetched a token for this
		// request (a kind that fetches tokens) names it now.
		var err error
		if red, err = credentialRedactor(p.cred, appliedSecrets(p.cred, req.Header, p.credHeaders)...); err != nil {
			return nil, &failure{class: notSent, err: redactError(p.red, invalid("target %q: %v", c.Target.Name, err))}
		}
	}
	obs, f := d.roundTrip(tr, req, tk, c, p, red)
	if f != nil {
		f.err = redactError(red, f.err)
	}
	return obs, f
}

// roundTrip sends req and reads the answer into an Observation redacted
// with red.
func (d *Dispatcher) roundTrip(tr *http.Transport, req *http.Request, tk *tracker, c Call, p *prepared, red *redact.Redactor) (*Observation, *failure) {
	resp, err := tr.RoundTrip(req)
	if err != nil {
		switch {
		case errors.Is(err, ErrRefused):
			return nil, &failure{class: notSent, err: fmt.Errorf("%w: target %q: %w", ErrNotSent, c.Target.Name, err)}
		case !tk.written():
			return nil, &failure{class: notSent, reused: tk.reused, err: fmt.Errorf(
				"%w: nothing reached target %q, safe to dispatch again: %w", ErrNotSent, c.Target.Name, err)}
		default:
			return nil, &failure{class: outcomeUnknown, err: fmt.Errorf(
				"%w: the request to target %q may have been received and no answer arrived; recover through the status endpoint or a same-key replay: %w",
				ErrOutcomeUnknown, c.Target.Name, err)}
		}
	}
	defer resp.Body.Close()
	body, truncated, err := readCapped(resp.Body, d.maxBody)
	if err != nil {
		return nil, &failure{class: outcomeUnknown, err: fmt.Errorf(
			"%w: target %q answered %d but its body was cut short; recover through the status endpoint or a same-key replay: %w",
			ErrOutcomeUnknown, c.Target.Name, resp.StatusCode, err)}
	}
	obs := &Observation{Status: resp.StatusCode, Headers: make(map[string]string), Truncated: truncated}
	for k, vs := range resp.Header {
		if !(d.keep[k] || k == p.idemHeader) || neverStored[k] || slices.Contains(p.credHeaders, k) || len(vs) == 0 {
			continue
		}
		obs.Headers[k] = red.String(strings.Join(vs, ", "))
	}
	// A truncated body never ends in the start of a secret (redact.Bytes
	// with cut).
	obs.Body = red.Bytes(body, truncated)
	return obs, nil
}

// readCapped reads at most max bytes of r and reports whether there was more.
func readCapped(r io.Reader, max int64) ([]byte, bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > max {
		return b[:max], true, nil
	}
	return b, false, nil
}

// validToken reports whether s is an RFC 9110 token (header names, methods).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue reports whether s can be a header value: no control characters
// other than horizontal tab.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// countingConn counts write calls, so a failed attempt can tell whether any
// byte of its request may have left.
type countingConn struct {
	net.Conn
	writes atomic.Uint64
}

// Write counts the call before making it: a write that is attempted is
// treated as a write that may have succeeded.
func (c *countingConn) Write(p []byte) (int, error) {
	if len(p) > 0 {
		c.writes.Add(1)
	}
	return c.Conn.Write(p)
}
