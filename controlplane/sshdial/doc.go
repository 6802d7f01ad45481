// Package sshdial is the control plane's SSH channel to its targets.
//
// It dials a host with golang.org/x/crypto/ssh under the rules the design
// (§7) sets for a channel that decides the fate of side effects:
//
//   - the host key is pinned (authorized_keys form in the catalog) and
//     HostKeyAlgorithms is set to the pinned key's type, so a host with several
//     key types never gives a false mismatch; trust on first use exists only
//     for `latch dev` and hands the presented key back to be recorded;
//   - the TCP dial and the SSH handshake each have a deadline;
//   - keepalive@openssh.com goes out on a timer, and a peer that does not
//     answer in time has its connection closed, so every waiter sees an error
//     instead of hanging;
//   - DialUnix opens direct-streamlocal@openssh.com to a unix socket on the
//     host (the host agent's gRPC socket): no new port on production hosts;
//   - Exec runs one argv on a host without a host agent and tells apart
//     "not sent" (ErrNotSent: safe to send again) from "sent, outcome unknown"
//     (ErrOutcomeUnknown: ask, never retry).
//
// A Pool keeps one *ssh.Client per target name and dials it again, once per
// call, when it broke. It never retries a failed dial on its own: the engine
// decides whether and when to try again (engine.RetryPolicy), so one engine
// attempt is one dial. Only the control plane imports this package; the
// host agent must not (see the import rules in STYLE.md). The sshtest
// sub-package holds the in-process and OpenSSH test servers.
package sshdial
