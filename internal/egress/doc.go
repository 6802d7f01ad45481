// Package egress is the one place Latch builds outbound HTTP transports and
// clients: the HTTP dispatcher (catalog targets), HTTP MCP upstreams, the
// vault's OAuth token fetch and the MCP front's issuer metadata and JWKS
// fetches all dial through it. It imports only the standard library, so the
// control plane and the MCP front (which must not import the control plane)
// can both use it. Any package of Latch may import it; a production package
// that builds an http.Transport or http.Client of its own instead is a
// defect, and TestOnlyEgressBuildsClients fails on it (the latch CLI's demo
// and bench commands, which talk to the local dev stack, are the listed
// exceptions).
//
// # Address policy
//
// Every connection attempt passes a Policy in the net.Dialer's Control
// function, which sees the resolved IP after DNS and before connect(2): a
// name that resolves, or is rebound, to a refused address never gets a
// packet sent to it. Cloud metadata endpoints, unspecified, link-local,
// multicast and broadcast addresses are always refused; loopback and private
// ones unless the policy allows them (see CheckAddr). No proxy from the
// environment is used: a proxy would be dialed instead of the destination,
// past the policy. Refusals wrap ErrRefused.
//
// # Redirects
//
// One rule, strict and simple, for every client built here:
//
//   - A redirect is followed only when it stays on the origin (scheme, host
//     and port) of the request that started the exchange, and only for a
//     GET or HEAD request without a body, at most 5 times.
//   - Anything else (another origin, or a request that carried a body, or
//     any other method) is not followed: the client returns an error
//     wrapping ErrRedirect that names the status and the Location's origin.
//     The fix is the operator's: configure the URL the server redirects to.
//
// So neither a credential nor a request body ever reaches an origin other
// than the configured one, and the redirected hop's address is checked by
// the same dial-time policy as the first. Transports alone (NewTransport,
// used with RoundTrip as the dispatcher does) never follow redirects at all.
//
// # Credentials
//
// WithCredential wraps a RoundTripper so that a credential is presented only
// on requests to the one origin it was configured for; a request to any
// other origin fails with ErrCrossOrigin before anything is sent. Together
// with the redirect rule this is belt and braces: a redirect that got past a
// caller's own CheckRedirect still cannot carry the credential away.
//
// # Tracing
//
// Trace context is not added here (this package stays free of Latch's
// tracing dependency); the dispatcher injects the W3C traceparent of its
// dispatch span on each request itself.
package egress
