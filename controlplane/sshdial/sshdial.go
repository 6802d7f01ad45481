package sshdial

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/ssh"
)

// Errors callers branch on with errors.Is. The wrapping error carries the
// target name and what to do.
var (
	// ErrHostKeyChanged: the host presented a key other than the pinned one
	// (or offers no key of the pinned type). Never retried.
	ErrHostKeyChanged = errors.New("sshdial: host key changed")
	// ErrHostKeyUnknown: no host key is pinned and trust on first use is off.
	ErrHostKeyUnknown = errors.New("sshdial: host key unknown")
	// ErrAuthFailed: the host did not accept the target's key for its user.
	ErrAuthFailed = errors.New("sshdial: authentication failed")
	// ErrUnreachable: the host could not be reached (TCP or handshake) on
	// this attempt; the dial is not retried here (see dialOnce).
	ErrUnreachable = errors.New("sshdial: host unreachable")
	// ErrConnectionLost: an established connection broke (peer closed, reset).
	ErrConnectionLost = errors.New("sshdial: connection lost")
	// ErrKeepaliveTimeout: the peer did not answer keepalive@openssh.com in
	// time; the connection was closed. It also matches ErrConnectionLost.
	ErrKeepaliveTimeout = errors.New("sshdial: keepalive timeout")
	// ErrStreamLocalRefused: sshd refused a direct-streamlocal@openssh.com
	// channel (forwarding disabled for the user, or the socket is not there).
	ErrStreamLocalRefused = errors.New("sshdial: streamlocal channel refused")
	// ErrNotSent: the command provably never reached the host (the session
	// or the exec request was refused, or the connection was down before
	// the request was written). Safe to send again.
	ErrNotSent = errors.New("sshdial: command not sent")
	// ErrOutcomeUnknown: the command was sent and no exit status was
	// observed (drop, keepalive close, cancellation). The caller must not
	// retry: it marks the execution for review or asks the host agent.
	ErrOutcomeUnknown = errors.New("sshdial: command outcome unknown")
	// ErrBadCommand: the argv cannot be sent (empty, or holds a NUL byte).
	ErrBadCommand = errors.New("sshdial: bad command")
	// ErrBadTarget: the target is incomplete or its host key does not parse.
	ErrBadTarget = errors.New("sshdial: bad target")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("sshdial: pool closed")
)

// Defaults for Config fields left zero.
const (
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveTimeout  = 10 * time.Second
	DefaultDialTimeout       = 10 * time.Second
	DefaultMaxOutput         = 1 << 20
)

// Config configures a Pool. Zero fields take the defaults above.
type Config struct {
	// Logger receives connection events (named "sshdial"). Nil discards.
	Logger hclog.Logger
	// DialTimeout bounds the TCP connect.
	DialTimeout time.Duration
	// HandshakeTimeout bounds the SSH handshake, authentication included.
	HandshakeTimeout time.Duration
	// KeepaliveInterval is the time between keepalive@openssh.com requests.
	KeepaliveInterval time.Duration
	// KeepaliveTimeout is how long a keepalive may wait for its reply before
	// the connection is closed.
	KeepaliveTimeout time.Duration
	// MaxOutput caps the bytes Exec keeps of stdout and of stderr; the rest
	// is read and counted, not stored.
	MaxOutput int
	// RecordHostKey is called when a TrustOnFirstUse target with no pinned
	// key presents hostKey (authorized_keys form) and authentication
	// succeeded, so the caller can write it to the catalog. An error closes
	// the connection. The pool also remembers the key for later dials.
	RecordHostKey func(target, hostKey string) error
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	def(&c.KeepaliveInterval, DefaultKeepaliveInterval)
	def(&c.KeepaliveTimeout, DefaultKeepaliveTimeout)
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
}

// Target is one SSH host as the catalog describes it.
type Target struct {
	// Name is the catalog name; the pool keeps one connection per name.
	Name string
	// Address is host:port.
	Address string
	// User is the account to log in as.
	User string
	// HostKey is the pinned host key in authorized_keys form
	// ("ssh-ed25519 AAAA..."). Empty means unknown.
	HostKey string
	// Signer is the client key (from the vault).
	Signer ssh.Signer
	// TrustOnFirstUse accepts an unknown host key and reports it through
	// Config.RecordHostKey. Only for `latch dev`; never in production.
	TrustOnFirstUse bool
}

func (t Target) validate() (ssh.PublicKey, error) {
	switch {
	case t.Name == "":
		return nil, fmt.Errorf("%w: target has no name", ErrBadTarget)
	case t.Address == "":
		return nil, fmt.Errorf("%w: target %q has no address", ErrBadTarget, t.Name)
	case t.User == "":
		return nil, fmt.Errorf("%w: target %q has no user", ErrBadTarget, t.Name)
	case t.Signer == nil:
		return nil, fmt.Errorf("%w: target %q has no client key (credential)", ErrBadTarget, t.Name)
	}
	if t.HostKey == "" {
		return nil, nil
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(t.HostKey))
	if err != nil {
		return nil, fmt.Errorf("%w: target %q: host_key is not in authorized_keys form (\"ssh-ed25519 AAAA...\"): %v", ErrBadTarget, t.Name, err)
	}
	return key, nil
}

// identity is what makes a cached connection usable for a target: any change
// (re-keyed catalog entry, new credential) forces a new dial.
func (t Target) identity() string {
	return fmt.Sprintf("%s|%s|%s|%s|%t", t.Address, t.User, t.HostKey,
		ssh.FingerprintSHA256(t.Signer.PublicKey()), t.TrustOnFirstUse)
}

// Pool keeps one SSH connection per target name and re-dials broken ones.
// It is safe for concurrent use.
type Pool struct {
	cfg Config
	log hclog.Logger

	mu      sync.Mutex
	closed  bool
	entries map[string]*entry
	learned map[string]ssh.PublicKey // trust-on-first-use keys, by target name
}

type entry struct {
	sem    chan struct{} // held while dialling; a ctx-aware mutex
	client *Client
	ident  string
	// retired are replaced clients still running commands; Pool.Close
	// closes them too.
	retired []*Client
}

// New returns a Pool. It dials nothing until Client is called.
func New(cfg Config) (*Pool, error) {
	cfg.setDefaults()
	return &Pool{
		cfg:     cfg,
		log:     cfg.Logger.Named("sshdial"),
		entries: map[string]*entry{},
		learned: map[string]ssh.PublicKey{},
	}, nil
}

// Client returns the live connection for t, dialling once when there is
// none, when it broke, or when t changed; a failed dial is returned, not
// retried (see dialOnce). The Client belongs
// to the pool: do not Close it; Pool.Close does.
func (p *Pool) Client(ctx context.Context, t Target) (*Client, error) {
	pinned, err := t.validate()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	e := p.entries[t.Name]
	if e == nil {
		e = &entry{sem: make(chan struct{}, 1)}
		p.entries[t.Name] = e
	}
	p.mu.Unlock()

	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("sshdial: waiting to connect to %s: %w", t.Name, ctx.Err())
	}
	defer func() { <-e.sem }()

	ident := t.identity()
	if old := e.client; old != nil {
		if old.Err() == nil && e.ident == ident {
			return old, nil
		}
		broken := old.Err()
		p.mu.Lock()
		e.client = nil
		e.retired = slices.DeleteFunc(e.retired, func(c *Client) bool { return c.Err() != nil })
		if broken == nil {
			e.retired = append(e.retired, old)
		}
		p.mu.Unlock()
		if broken != nil {
			p.log.Debug("re-dialling broken connection", "target", t.Name, "error", broken)
			_ = old.Close()
		} else {
			p.log.Info("target or credential changed: dialling anew; the old connection closes when its commands end", "target", t.Name)
			old.retire()
		}
	}

	c, err := p.dialOnce(ctx, t, pinned)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.Close()
		return nil, ErrClosed
	}
	e.client, e.ident = c, ident
	p.mu.Unlock()
	return c, nil
}

// Close closes every connection. Clients handed out before see ErrClosed
// wrapped in their errors.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	var clients []*Client
	for _, e := range p.entries {
		if e.client != nil {
			clients = append(clients, e.client)
		}
		clients = append(clients, e.retired...)
	}
	p.mu.Unlock()
	for _, c := range clients {
		c.closeWith(ErrClosed)
	}
	return nil
}

// dialOnce makes the one dial of a Client call. A failure is not retried
// here: the caller's attempt failed, and the engine decides whether and when
// to make another (engine.RetryPolicy).
func (p *Pool) dialOnce(ctx context.Context, t Target, pinned ssh.PublicKey) (*Client, error) {
	if pinned == nil && t.TrustOnFirstUse {
		p.mu.Lock()
		if k := p.learned[t.Name]; k != nil {
			pinned = k
		}
		p.mu.Unlock()
	}
	c, err := p.dial(ctx, t, pinned)
	if err == nil {
		return c, nil
	}
	if !Retryable(err) || ctx.Err() != nil {
		return nil, err
	}
	p.log.Debug("target unreachable", "target", t.Name, "address", t.Address, "error", err)
	return nil, fmt.Errorf("%w: %s (%s): %w", ErrUnreachable, t.Name, t.Address, err)
}

func (p *Pool) learn(name string, key ssh.PublicKey) {
	p.mu.Lock()
	p.learned[name] = key
	p.mu.Unlock()
}

// Retryable reports whether a dial error may go away by itself (the host
// was down, the network dropped, a deadline passed), as opposed to a host
// key, authentication or target error that stays until someone fixes it.
func Retryable(err error) bool {
	// Context errors are judged by the caller's ctx, not here: a dial or
	// handshake timeout also matches context.DeadlineExceeded and is worth
	// another attempt.
	for _, perm := range []error{ErrHostKeyChanged, ErrHostKeyUnknown, ErrAuthFailed, ErrBadTarget, ErrClosed} {
		if errors.Is(err, perm) {
			return false
		}
	}
	var rec *recordError
	return !errors.As(err, &rec)
}
