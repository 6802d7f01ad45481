package sshdial

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/ssh"
)

// Client is one live SSH connection to a target. Get it from Pool.Client.
type Client struct {
	target  string
	user    string
	hostKey ssh.PublicKey
	ssh     *ssh.Client
	log     hclog.Logger
	maxOut  int

	mu       sync.Mutex
	err      error         // why the connection ended; nil while alive
	done     chan struct{} // closed when the connection has ended
	busy     int           // commands and forwarded connections open on it
	retiring bool          // replaced in its pool: it closes when busy reaches 0
}

// acquire counts a command or forwarded connection in; release counts it
// out and closes a retired client left idle.
func (c *Client) acquire() {
	c.mu.Lock()
	c.busy++
	c.mu.Unlock()
}

func (c *Client) release() {
	c.mu.Lock()
	c.busy--
	idle := c.retiring && c.busy == 0
	c.mu.Unlock()
	if idle {
		c.closeWith(fmt.Errorf("sshdial: connection to %s retired (the target or its credential changed)", c.target))
	}
}

// retire closes the client once nothing runs on it: a pool that dials a
// target anew (its key was rotated, its address changed) must not cut the
// commands still running on the old connection, whose outcome would then be
// unknown.
func (c *Client) retire() {
	c.mu.Lock()
	c.retiring = true
	idle := c.busy == 0
	c.mu.Unlock()
	if idle {
		c.closeWith(fmt.Errorf("sshdial: connection to %s retired (the target or its credential changed)", c.target))
	}
}

// Target returns the catalog name of the client's target.
func (c *Client) Target() string { return c.target }

// HostKey returns the key the host presented, in authorized_keys form
// without a trailing newline.
func (c *Client) HostKey() string {
	return string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(c.hostKey)))
}

// HostKeyFingerprint returns the SHA256 fingerprint of the host's key.
func (c *Client) HostKeyFingerprint() string { return ssh.FingerprintSHA256(c.hostKey) }

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns nil while the connection is alive, and why it ended after.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection. Pool-owned clients are closed by Pool.Close.
func (c *Client) Close() error {
	c.closeWith(fmt.Errorf("sshdial: connection to %s closed", c.target))
	return nil
}

// closeWith records why the connection ends (first reason wins) and closes
// it, so every waiter on it sees an error.
func (c *Client) closeWith(reason error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = reason
	}
	c.mu.Unlock()
	_ = c.ssh.Close()
}

// watch waits for the connection to end and closes Done.
func (c *Client) watch() {
	err := c.ssh.Wait()
	if err == nil {
		err = io.EOF
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s: %v", ErrConnectionLost, c.target, err)
		c.log.Warn("connection lost", "error", err)
	}
	c.mu.Unlock()
	close(c.done)
}

// keepalive sends keepalive@openssh.com every interval and closes the
// connection when a reply does not arrive within timeout. Any reply counts,
// a failure reply included (OpenSSH answers unknown global requests with
// one): it proves the peer is reading.
func (c *Client) keepalive(interval, timeout time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := c.ssh.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		timer := time.NewTimer(timeout)
		select {
		case err := <-reply:
			timer.Stop()
			if err != nil {
				c.closeWith(fmt.Errorf("%w: %s: keepalive: %v", ErrConnectionLost, c.target, err))
				return
			}
		case <-timer.C:
			c.log.Warn("peer did not answer keepalive, closing connection", "timeout", timeout)
			c.closeWith(fmt.Errorf("%w: %w: %s did not answer within %s", ErrConnectionLost, ErrKeepaliveTimeout, c.target, timeout))
			return
		case <-c.done:
			timer.Stop()
			return
		}
	}
}

// dialState records what happened during one handshake, to name the
// failure precisely (x/crypto returns auth failures as plain text).
type dialState struct {
	presented  ssh.PublicKey
	hostKeyErr error
	hostKeyOK  bool
	tofu       bool
}

// recordError wraps a failure of Config.RecordHostKey; it is not retried.
type recordError struct{ err error }

func (e *recordError) Error() string { return e.err.Error() }
func (e *recordError) Unwrap() error { return e.err }

func (p *Pool) dial(ctx context.Context, t Target, pinned ssh.PublicKey) (*Client, error) {
	log := p.log.With("target", t.Name, "address", t.Address)
	st := &dialState{}
	cc := &ssh.ClientConfig{
		User: t.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(t.Signer)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			st.presented = key
			st.hostKeyErr = checkHostKey(t, pinned, key)
			st.hostKeyOK = st.hostKeyErr == nil
			st.tofu = st.hostKeyOK && pinned == nil
			return st.hostKeyErr
		},
		HostKeyAlgorithms: hostKeyAlgorithms(pinned),
	}

	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", t.Address)
	if err != nil {
		return nil, fmt.Errorf("sshdial: connect to %s (%s): %w", t.Name, t.Address, err)
	}
	// x/crypto has no handshake timeout: bound it with a deadline on the
	// socket, cleared once the connection is up. A cancelled ctx also ends it.
	// The ctx deadline is left to the AfterFunc below, not folded into the
	// socket deadline: then a ctx that ends the handshake is always reported
	// as the ctx's error, never as a bare i/o timeout.
	_ = conn.SetDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	sconn, chans, reqs, err := ssh.NewClientConn(conn, t.Address, cc)
	stopped := stop()
	if err != nil {
		_ = conn.Close()
		if !stopped && ctx.Err() != nil {
			return nil, fmt.Errorf("sshdial: handshake with %s (%s): %w", t.Name, t.Address, ctx.Err())
		}
		return nil, classifyHandshake(t, pinned, st, err)
	}
	if !stopped {
		_ = sconn.Close()
		return nil, fmt.Errorf("sshdial: handshake with %s (%s): %w", t.Name, t.Address, ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})

	if st.tofu {
		if p.cfg.RecordHostKey != nil {
			ak := string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(st.presented)))
			if err := p.cfg.RecordHostKey(t.Name, ak); err != nil {
				_ = sconn.Close()
				return nil, &recordError{fmt.Errorf("sshdial: recording the host key of %s: %w", t.Name, err)}
			}
		}
		p.learn(t.Name, st.presented)
		log.Warn("trusted host key on first use", "fingerprint", ssh.FingerprintSHA256(st.presented))
	}

	c := &Client{
		target:  t.Name,
		user:    t.User,
		hostKey: st.presented,
		ssh:     ssh.NewClient(sconn, chans, reqs),
		log:     log,
		maxOut:  p.cfg.MaxOutput,
		done:    make(chan struct{}),
	}
	go c.watch()
	go c.keepalive(p.cfg.KeepaliveInterval, p.cfg.KeepaliveTimeout)
	log.Debug("connected", "host_key", ssh.FingerprintSHA256(st.presented))
	return c, nil
}

// Fingerprint returns the SHA256 fingerprint ("SHA256:...") of a host key in
// authorized_keys form, as it enters an SSH target's canonical intent record.
func Fingerprint(hostKey string) (string, error) {
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		return "", fmt.Errorf("%w: host key is not in authorized_keys form: %v", ErrBadTarget, err)
	}
	return ssh.FingerprintSHA256(key), nil
}

// checkHostKey is ssh.FixedHostKey with errors that name what to do.
func checkHostKey(t Target, pinned, presented ssh.PublicKey) error {
	if pinned == nil {
		if t.TrustOnFirstUse {
			return nil
		}
		return fmt.Errorf("%w: target %s (%s) has no host_key pinned and presented %s %s; "+
			"verify it on the host (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and set host_key in the catalog",
			ErrHostKeyUnknown, t.Name, t.Address, presented.Type(), ssh.FingerprintSHA256(presented))
	}
	if bytes.Equal(pinned.Marshal(), presented.Marshal()) {
		return nil
	}
	return fmt.Errorf("%w: target %s (%s) presented %s %s, expected %s %s; "+
		"if the host was re-keyed, update host_key in the catalog, otherwise treat this as an attack and do not connect",
		ErrHostKeyChanged, t.Name, t.Address, presented.Type(), ssh.FingerprintSHA256(presented),
		pinned.Type(), ssh.FingerprintSHA256(pinned))
}

// hostKeyAlgorithms restricts negotiation to the pinned key's type, so a host
// with several keys presents the pinned one (otherwise x/crypto may pick
// another type and report a false mismatch).
func hostKeyAlgorithms(pinned ssh.PublicKey) []string {
	if pinned == nil {
		return []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
			ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	}
	if pinned.Type() == ssh.KeyAlgoRSA {
		// "ssh-rsa" names the key type; the signature algorithms are SHA-2.
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	}
	return []string{pinned.Type()}
}

func classifyHandshake(t Target, pinned ssh.PublicKey, st *dialState, err error) error {
	if st.hostKeyErr != nil {
		return st.hostKeyErr
	}
	var neg *ssh.AlgorithmNegotiationError
	if errors.As(err, &neg) && neg.What == "host key" && pinned != nil {
		return fmt.Errorf("%w: target %s (%s) offers no %s host key (it offers %v), expected %s; "+
			"if the host was re-keyed, update host_key in the catalog",
			ErrHostKeyChanged, t.Name, t.Address, pinned.Type(), neg.RequestedAlgorithms, ssh.FingerprintSHA256(pinned))
	}
	if st.hostKeyOK && !isNetErr(err) {
		// The host key was accepted and the transport is fine: the only
		// step left that fails this way is user authentication.
		return fmt.Errorf("%w: %s@%s (%s) refused key %s: add its public key to ~%s/.ssh/authorized_keys on the host: %v",
			ErrAuthFailed, t.User, t.Name, t.Address, ssh.FingerprintSHA256(t.Signer.PublicKey()), t.User, err)
	}
	return fmt.Errorf("sshdial: handshake with %s (%s): %w", t.Name, t.Address, err)
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.As(err, &ne)
}

// IsDrop reports whether err means an established connection broke (peer
// gone, reset, keepalive timeout, no exit status), as opposed to an answer
// or a host that was never reached (ErrUnreachable is not a drop). After a
// drop the outcome of anything in flight is unknown: ask, never retry. It
// does not say whether a command was sent: check ErrNotSent first.
func IsDrop(err error) bool {
	if err == nil || errors.Is(err, ErrUnreachable) {
		return false
	}
	var missing *ssh.ExitMissingError
	return errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrKeepaliveTimeout) ||
		errors.Is(err, ErrOutcomeUnknown) || errors.As(err, &missing) || isNetErr(err)
}

// DialUnix opens a direct-streamlocal@openssh.com channel to the unix
// socket at path on the host and returns it as a net.Conn. sshd connects to
// the socket as the logged-in user, so the socket's permissions decide
// access. The conn does not support deadlines (x/crypto channels do not);
// bound calls with contexts. It breaks when the SSH connection does.
func (c *Client) DialUnix(ctx context.Context, path string) (net.Conn, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	c.acquire()
	conn, err := c.ssh.DialContext(ctx, "unix", path)
	if err == nil {
		return &forwarded{Conn: conn, release: sync.OnceFunc(c.release)}, nil
	}
	c.release()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("sshdial: opening %s on %s: %w", path, c.target, ctx.Err())
	}
	var oce *ssh.OpenChannelError
	if errors.As(err, &oce) && oce.Reason == ssh.UnknownChannelType {
		return nil, fmt.Errorf("%w: %s does not support direct-streamlocal@openssh.com channels (%q): "+
			"the host needs OpenSSH (6.7 or later) to reach the host agent's socket", ErrStreamLocalRefused, c.target, oce.Message)
	}
	if errors.As(err, &oce) {
		return nil, streamLocalRefused(c.target, c.user, path, oce)
	}
	return nil, fmt.Errorf("sshdial: opening %s on %s: %w", path, c.target, c.cause(err))
}

// forwarded is a streamlocal channel that counts in its client's busy
// count until it is closed.
type forwarded struct {
	net.Conn
	release func()
}

func (f *forwarded) Close() error {
	err := f.Conn.Close()
	f.release()
	return err
}

// matchBlock is the sshd_config remedy ErrStreamLocalRefused prints, with
// %s for the user. OpenSSH 9.2 refuses streamlocal under AllowTcpForwarding
// no too, hence its line; and PermitOpen none (the usual way to keep TCP
// forwards closed) refuses streamlocal as well, so it must not be added
// (checked by hand on 9.2). The OpenSSH integration test applies this block
// under a hardened config.
const matchBlock = `
Match User %s
    AllowStreamLocalForwarding local
    AllowTcpForwarding local
    DisableForwarding no
`

// streamLocalRefused explains a refused channel. OpenSSH 9.2 answers both
// "forwarding disabled" and "cannot connect to the socket" with the same
// reason (connect failed, "open failed"); only its log tells them apart
// ("refused streamlocal port forward" or "the request was denied" versus a
// connect error), so the message names both causes.
func streamLocalRefused(target, user, path string, oce *ssh.OpenChannelError) error {
	block := strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(fmt.Sprintf(matchBlock, user)), "\n", " /")), " ")
	return fmt.Errorf("%w: %s refused a channel to unix socket %s (%s: %q). "+
		"Either sshd forbids it for user %s: any of AllowTcpForwarding no, DisableForwarding yes or "+
		"AllowStreamLocalForwarding no in sshd_config does (sshd logs \"refused streamlocal port forward\" or "+
		"\"the request was denied\"); allow it for that user only by appending to sshd_config: %s, then reload sshd "+
		"(do not add PermitOpen none there: OpenSSH 9.2 then refuses streamlocal too). "+
		"Or the socket is missing or not accessible to %s: check that the host agent runs and the socket's permissions",
		ErrStreamLocalRefused, target, path, oce.Reason, oce.Message, user, block, user)
}
