package authz

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// Role is what a caller may do, decided from how it connected.
type Role int

// Roles.
const (
	// RoleNone: identified, but listed nowhere: refused every RPC.
	RoleNone Role = iota
	// RoleFront: an MCP front (--front-identity, --front-uid, or plaintext
	// TCP on loopback): agent-facing RPCs only.
	RoleFront
	// RoleOperator: an operator certificate (--operator-identity):
	// agent-facing and operator RPCs.
	RoleOperator
	// RoleLocal: the unix socket as the server's own uid, root, or an
	// --operator-uid: every RPC.
	RoleLocal
)

func (r Role) String() string {
	switch r {
	case RoleFront:
		return "front"
	case RoleOperator:
		return "operator"
	case RoleLocal:
		return "local operator"
	}
	return "unlisted caller"
}

// Allows reports whether the role may call an RPC of class c.
func (r Role) Allows(c Class) bool {
	switch c {
	case ClassAgent:
		return r >= RoleFront
	case ClassOperator:
		return r >= RoleOperator
	case ClassLocal:
		return r == RoleLocal
	}
	return false
}

// Transports a caller can come over.
const (
	TransportUnix = "unix"
	TransportTLS  = "tcp+tls"
	TransportTCP  = "tcp"
)

// Caller is the identity of the peer of one RPC.
type Caller struct {
	Role Role
	// Identity names the caller, whatever its role:
	//   uid:N            a unix-socket peer (SO_PEERCRED)
	//   URI              the single URI SAN of a verified client certificate
	//   cn:NAME          the subject CN of a verified client certificate without URI SAN
	//   tcp:HOST:PORT    a plaintext loopback TCP peer (no identity but its address)
	//   none: …          a peer that could not be identified (the reason follows)
	Identity  string
	Transport string
	// Operator is the operator name an operator certificate is bound to by
	// --operator-identity NAME=IDENTITY ("" when it is listed without one;
	// see OperatorName).
	Operator string
}

// String is "front spiffe://…", "local operator uid:0", …
func (c Caller) String() string { return c.Role.String() + " " + c.Identity }

type callerKey struct{}

// WithCaller returns ctx carrying c (the interceptors do this; tests of
// handlers may too).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller of the RPC whose context ctx is; false
// outside an RPC that went through the interceptors.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// CertIdentity is the identity of a verified client certificate: its URI
// SAN when it has exactly one (a SPIFFE ID, say), else "cn:" + its subject
// common name. A certificate with several URI SANs, or with none and no
// CN, has no identity: listing one of its names must not grant the others.
func CertIdentity(cert *x509.Certificate) (string, error) {
	switch len(cert.URIs) {
	case 0:
		if cert.Subject.CommonName == "" {
			return "", fmt.Errorf("%w: the client certificate has neither a URI SAN nor a subject CN", ErrIdentity)
		}
		return "cn:" + cert.Subject.CommonName, nil
	case 1:
		return cert.URIs[0].String(), nil
	}
	return "", fmt.Errorf("%w: the client certificate has %d URI SANs; an identity needs exactly one", ErrIdentity, len(cert.URIs))
}

// ParseIdentity checks an identity given by --front-identity or
// --operator-identity: "cn:NAME", or an absolute URI (scheme://…), the way
// CertIdentity writes them.
func ParseIdentity(s string) (string, error) {
	if name, ok := strings.CutPrefix(s, "cn:"); ok {
		if name == "" || strings.TrimSpace(name) != name {
			return "", fmt.Errorf("%w: %q: cn: needs the exact subject common name", ErrIdentity, s)
		}
		return s, nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || (u.Host == "" && u.Opaque == "") {
		return "", fmt.Errorf("%w: %q is neither cn:NAME nor an absolute URI like spiffe://example.org/latch/front", ErrIdentity, s)
	}
	if u.String() != s {
		return "", fmt.Errorf("%w: %q: write the URI as its certificate carries it (%q)", ErrIdentity, s, u.String())
	}
	return s, nil
}

// OperatorName is the operator name an operator certificate is bound to:
// the NAME of --operator-identity NAME=IDENTITY, else NAME for the identity
// cn:NAME. It is the only name such a caller may create console (operator)
// tokens for, so a console session opened with one acts under a name its
// creator's certificate answers for. A certificate identified by a URI SAN
// and listed without a name is bound to none (false): the URI's path is not
// a name anyone vetted. Other roles are not bound to a name: a local
// operator (the unix socket, trusted by uid) may name anyone, the rest may
// not create console tokens at all.
func (c Caller) OperatorName() (string, bool) {
	if c.Role != RoleOperator {
		return "", false
	}
	if c.Operator != "" {
		return c.Operator, true
	}
	if name, ok := strings.CutPrefix(c.Identity, "cn:"); ok && name != "" {
		return name, true
	}
	return "", false
}

// ParseOperatorIdentity checks an --operator-identity: IDENTITY (as
// ParseIdentity) or NAME=IDENTITY, binding the certificate to the operator
// name NAME (1-128 letters, digits, _ . @ -, starting with a letter or digit:
// an operator token's name). The text before the first "=" is a name only
// when it holds no ":" (else it is part of a URI or cn:, and the whole is
// the identity).
func ParseOperatorIdentity(s string) (name, identity string, err error) {
	if n, id, ok := strings.Cut(s, "="); ok && !strings.Contains(n, ":") {
		if !validOperatorName(n) {
			return "", "", fmt.Errorf("%w: %q: the operator name %q must be 1-128 letters, digits, _ . @ -, starting with a letter or digit", ErrIdentity, s, n)
		}
		if identity, err = ParseIdentity(id); err != nil {
			return "", "", err
		}
		return n, identity, nil
	}
	identity, err = ParseIdentity(s)
	return "", identity, err
}

// validOperatorName is tokens.ValidActor's rule (authz does not import
// tokens; TestParseOperatorIdentity holds them together).
func validOperatorName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && strings.ContainsRune("_.@-", r))
		if !ok {
			return false
		}
	}
	return true
}
