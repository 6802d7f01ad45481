// Package httpdispatch is the control plane's HTTP channel: it sends one
// execution's request to a catalog target and classifies what became of it.
// The execution engine imports it; it imports only the tool catalog and
// internal/egress, which builds its transports and holds the address policy.
//
// # Where requests go
//
// The URL is the target's base_url (scheme, host, port, base path) plus the
// rendered, escaped path and query. Arguments never choose the host: the path
// must start with a single "/", has no dot segments and cannot carry a query
// or fragment. Every connection attempt passes CheckAddr in the net.Dialer's
// Control function, which sees the resolved IP after DNS and before
// connect(2): link-local, unspecified, multicast and cloud metadata addresses
// are always refused, loopback and private ones unless the target sets
// allow_private. A name that resolves, or is rebound, to a refused address is
// never dialed. No proxy is used (it would be dialed instead of the target),
// and allow_private and ordinary targets use separate connection pools, so a
// connection checked under the looser rule never serves a stricter target.
//
// # Failure classes
//
// Every error from Send and Status wraps exactly one of:
//
//   - ErrNotSent: no byte of the request left the gateway. Refusals by the
//     address policy (ErrRefused), invalid calls (ErrInvalidCall), DNS,
//     connect and TLS handshake failures, and a deadline reached before a
//     connection was obtained. The execution is not_executed: safe to
//     dispatch again.
//   - ErrOutcomeUnknown: some of the request may have been written and no
//     complete answer arrived: a timeout waiting for the answer, a reset, an
//     EOF, a body cut short. The target may have acted. The execution is
//     outcome_unknown and is recovered by evidence (status endpoint, or a
//     replay with the same idempotency key), never by a blind re-send.
//
// Any HTTP status, including 4xx, 5xx and 3xx (redirects are not followed),
// is an answer: an Observation, not an error.
//
// The line between the two is drawn conservatively, with net/http/httptrace
// and a write counter on each connection. GotConn marks the moment the
// transport holds a connection for the request; before it, nothing can have
// been written. After it, the attempt counts as written if any write hook
// fired (WroteHeaderField, WroteHeaders, WroteRequest) or the connection saw
// a write call since GotConn (a write that was attempted counts as one that
// may have succeeded). The hooks alone are not enough: the request line is
// buffered before the first header field hook and reaches the wire first
// when it is longer than the write buffer. When RoundTrip fails, the
// transport has closed the connection, and Close waits for writes in flight,
// so the counter is final when it is read.
//
// # No silent re-sends
//
// net/http's Transport re-sends a request on its own when a kept-alive
// connection fails (errServerClosedIdle, a read error before the first
// response byte, nothingWrittenError) if the request "is replayable": a nil
// or http.NoBody body, or a GetBody, combined with GET/HEAD/OPTIONS/TRACE or
// an Idempotency-Key or X-Idempotency-Key header (transport.go
// shouldRetryRequest, request.go isReplayable). That would re-send a written
// side-effecting request without anyone deciding to. Every request built here
// has a non-nil body and a nil GetBody, so isReplayable is false and the
// nothingWritten branch (outgoingLength() == 0 || GetBody != nil) is false
// too; HTTP/2, whose own retry rules differ, is disabled (Protocols is
// HTTP/1 only and ALPN offers only http/1.1); requests go through
// Transport.RoundTrip, so no redirect is followed. An empty body therefore
// goes out as a zero-length chunked body for methods that usually carry one
// (POST, PUT, PATCH) and as no body at all for the others.
//
// The dispatcher itself tries a second time in exactly one case: the first
// attempt was handed a kept-alive connection that failed before any byte of
// the request was written to it. Nothing left the gateway, so this is not a
// re-send.
//
// # Secrets
//
// The credential is a Credential: its kind (the vault's bearer, basic or
// named header, or any request signer) presents itself on each request, last,
// through Apply. The dispatcher knows no kind by name. A credential is never
// logged, and never kept in an Observation: Authorization,
// Proxy-Authorization, Cookie, Set-Cookie and the credential's headers are
// never stored, and the credential's secrets (its Secrets after each Apply,
// and the Authorization value Apply set) are replaced with "[REDACTED]" in
// the stored headers and body and in the text of every error, in every form
// package internal/redact knows (JSON-, URL- and HTML-escaped, base64); a
// truncated body never ends in the start of one. That is the one redactor
// the engine and the host agent use too. A credential value shorter than
// redact.MinLen bytes cannot be redacted and is refused (ErrInvalidCall),
// never sent. Only method,
// target, execution ID and status are logged; path, query, headers and
// bodies may carry arguments the catalog marks secret.
package httpdispatch
