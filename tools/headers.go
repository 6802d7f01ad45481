package tools

import (
	"net/http"
	"slices"
)

// reservedHeaders are the request headers neither a catalog (a request
// template's headers, a target's idempotency_header) nor a credential may
// set: they frame the message or choose where it goes, and the HTTP
// transport sets them itself. Expect is here because a template that sends
// "Expect: 100-continue" would make every dispatch wait on the target before
// the body is written. The catalog loader refuses them at load and the HTTP
// dispatcher refuses them again at dispatch; this is the one list both use.
var reservedHeaders = []string{
	"Connection",
	"Content-Length",
	"Expect",
	"Host",
	"Keep-Alive",
	"Proxy-Authorization",
	"Proxy-Connection",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// ReservedHeader reports whether name (any case) is a reserved request
// header.
func ReservedHeader(name string) bool {
	return slices.Contains(reservedHeaders, http.CanonicalHeaderKey(name))
}

// ReservedHeaders returns the reserved request headers in canonical form.
func ReservedHeaders() []string { return slices.Clone(reservedHeaders) }
