package egress

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config configures a transport (NewTransport) or a client (NewClient).
// Zero values are the defaults.
type Config struct {
	// Policy decides which resolved addresses may be dialed.
	Policy Policy
	// Resolver resolves host names (nil: net.DefaultResolver). The policy
	// applies to the addresses it returns.
	Resolver *net.Resolver
	// TLSConfig is cloned for HTTPS (nil: system roots); MinVersion is at
	// least TLS 1.2.
	TLSConfig *tls.Config
	// DialTimeout bounds one TCP connect (default 10s).
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds a TLS handshake (default 10s).
	TLSHandshakeTimeout time.Duration
	// IdleConnTimeout closes kept-alive connections idle this long
	// (default 90s).
	IdleConnTimeout time.Duration
	// MaxIdleConns and MaxIdleConnsPerHost bound kept-alive connections
	// (defaults 16 and net/http's 2).
	MaxIdleConns, MaxIdleConnsPerHost int
	// MaxResponseHeaderBytes bounds response headers (default 64 KiB).
	MaxResponseHeaderBytes int64
	// HTTP1Only disables HTTP/2 (ALPN offers only http/1.1); otherwise
	// HTTP/2 is used when the server offers it.
	HTTP1Only bool
	// DisableCompression stops the transport asking for gzip.
	DisableCompression bool
	// WrapConn, when set, wraps every dialed connection (below TLS).
	WrapConn func(net.Conn) net.Conn
	// Timeout bounds a whole exchange of a client (NewClient), reading
	// the response body included; 0 is none: the request's context bounds
	// it (a long-lived stream needs that).
	Timeout time.Duration
}

// NewTransport returns a transport whose every connection passes
// cfg.Policy, with no proxy. Used directly (RoundTrip), it follows no
// redirect.
func NewTransport(cfg Config) *http.Transport {
	dialer := &net.Dialer{
		Timeout:   orDefault(cfg.DialTimeout, 10*time.Second),
		KeepAlive: 30 * time.Second,
		Resolver:  cfg.Resolver,
		Control:   cfg.Policy.Control,
	}
	var tc *tls.Config
	if cfg.TLSConfig != nil {
		tc = cfg.TLSConfig.Clone()
	} else {
		tc = &tls.Config{}
	}
	if tc.MinVersion == 0 {
		tc.MinVersion = tls.VersionTLS12
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if cfg.HTTP1Only {
		tc.NextProtos = []string{"http/1.1"}
	} else {
		protocols.SetHTTP2(true)
	}
	dial := dialer.DialContext
	if cfg.WrapConn != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return cfg.WrapConn(c), nil
		}
	}
	maxIdle := cfg.MaxIdleConns
	if maxIdle == 0 {
		maxIdle = 16
	}
	return &http.Transport{
		Proxy:                  nil, // a proxy would be dialed instead of the destination, past the policy
		DialContext:            dial,
		TLSClientConfig:        tc,
		TLSHandshakeTimeout:    orDefault(cfg.TLSHandshakeTimeout, 10*time.Second),
		DisableCompression:     cfg.DisableCompression,
		MaxIdleConns:           maxIdle,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        orDefault(cfg.IdleConnTimeout, 90*time.Second),
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: cmpOr(cfg.MaxResponseHeaderBytes, 64<<10),
		Protocols:              protocols,
		ForceAttemptHTTP2:      !cfg.HTTP1Only,
	}
}

// NewClient returns a client over rt (nil: NewTransport(cfg)) that follows
// redirects only as the package documentation says (CheckRedirect), with
// cfg.Timeout.
func NewClient(cfg Config, rt http.RoundTripper) *http.Client {
	if rt == nil {
		rt = NewTransport(cfg)
	}
	return &http.Client{Transport: rt, CheckRedirect: CheckRedirect, Timeout: cfg.Timeout}
}

// maxRedirects bounds the same-origin redirects one exchange follows.
const maxRedirects = 5

// CheckRedirect is the http.Client redirect rule of every client built
// here: follow a redirect only when the original request was a GET or HEAD
// without a body and the redirect stays on its origin. Errors wrap
// ErrRedirect.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	from, to := Origin(first.URL), Origin(req.URL)
	switch {
	case from != to:
		return fmt.Errorf("%w: %s answered HTTP %d redirecting to another origin, %s; Latch never follows a redirect off the configured origin (configure the URL it redirects to)",
			ErrRedirect, from, status, to)
	case (first.Method != http.MethodGet && first.Method != http.MethodHead) || hasBody(first):
		return fmt.Errorf("%w: %s answered HTTP %d to a %s request with a body; Latch does not re-send a request body on a redirect (configure the URL it redirects to)",
			ErrRedirect, from, status, first.Method)
	case len(via) >= maxRedirects:
		return fmt.Errorf("%w: %s redirected %d times", ErrRedirect, from, len(via))
	}
	return nil
}

func hasBody(r *http.Request) bool {
	return r.GetBody != nil || r.ContentLength != 0 || (r.Body != nil && r.Body != http.NoBody)
}

// Origin is u's scheme, host and port, lower-cased, with the scheme's
// default port made explicit: "https://example.com:443".
func Origin(u *url.URL) string {
	if u == nil {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// WithCredential returns a RoundTripper presenting a credential through
// apply on every request to origin (a URL; only its origin counts), and
// refusing, with ErrCrossOrigin and before anything is sent, a request to
// any other origin. apply gets a clone of the request.
func WithCredential(base http.RoundTripper, origin string, apply func(*http.Request) error) (http.RoundTripper, error) {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("egress: credential origin %q is not an absolute URL", origin)
	}
	return &credentialed{base: base, origin: Origin(u), apply: apply}, nil
}

type credentialed struct {
	base   http.RoundTripper
	origin string
	apply  func(*http.Request) error
}

func (c *credentialed) RoundTrip(req *http.Request) (*http.Response, error) {
	if got := Origin(req.URL); got != c.origin {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on errors
		}
		return nil, fmt.Errorf("%w: the credential is for %s; a request to %s was not sent", ErrCrossOrigin, c.origin, got)
	}
	req = req.Clone(req.Context())
	if err := c.apply(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return c.base.RoundTrip(req)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func cmpOr(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}
