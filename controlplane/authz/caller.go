package authz

import (
	"context"
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"net/url"
	"strings"

	"github.com/latchhq/latch/internal/actorname"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
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
	// see OperatorName); for the console, its session's operator.
	Operator string
	// Credential is what a console caller's session was opened with (the
	// operator token's id and who created it, or the sign-in link); the
	// server stamps it on every journal record of the call. Nil for every
	// other caller.
	Credential *recordv1.OperatorCredential
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
//
// The two namespaces stay apart: "cn:" is only ever a subject CN, and a URI
// SAN must be a canonical absolute URI (CanonicalURI) whose scheme is not
// one of Latch's own identity prefixes (cn, uid, tcp, none). The URI is
// checked as the certificate carries it, not as net/url rewrites it (which
// lower-cases the scheme: SPIFFE://… would otherwise pass as spiffe://…).
// A CN must be an acceptable actor name (actorname.Check: no invisible
// characters), since an operator's identity names the decisions it makes.
func CertIdentity(cert *x509.Certificate) (string, error) {
	switch len(cert.URIs) {
	case 0:
		if cert.Subject.CommonName == "" {
			return "", fmt.Errorf("%w: the client certificate has neither a URI SAN nor a subject CN", ErrIdentity)
		}
		if err := actorname.Check(cert.Subject.CommonName); err != nil {
			return "", fmt.Errorf("%w: the client certificate's subject CN: %w", ErrIdentity, err)
		}
		return "cn:" + cert.Subject.CommonName, nil
	case 1:
		raw, err := rawURISANs(cert)
		if err != nil {
			return "", err
		}
		if len(raw) == 0 && cert.Raw == nil {
			// A certificate built in memory, never encoded: its URL is
			// all there is (still checked below).
			raw = []string{cert.URIs[0].String()}
		}
		if len(raw) != 1 {
			return "", fmt.Errorf("%w: the client certificate's SAN extension holds %d URIs, its parsed form 1", ErrIdentity, len(raw))
		}
		if err := CanonicalURI(raw[0]); err != nil {
			return "", fmt.Errorf("the client certificate's URI SAN: %w", err)
		}
		return raw[0], nil
	}
	return "", fmt.Errorf("%w: the client certificate has %d URI SANs; an identity needs exactly one", ErrIdentity, len(cert.URIs))
}

// ParseIdentity checks an identity given by --front-identity or
// --operator-identity: "cn:NAME", or a canonical absolute URI
// (scheme://host/path, see CanonicalURI), the way CertIdentity writes them.
func ParseIdentity(s string) (string, error) {
	if name, ok := strings.CutPrefix(s, "cn:"); ok {
		if name == "" || strings.TrimSpace(name) != name {
			return "", fmt.Errorf("%w: %q: cn: needs the exact subject common name", ErrIdentity, s)
		}
		if err := actorname.Check(name); err != nil {
			return "", fmt.Errorf("%w: %q: %w", ErrIdentity, s, err)
		}
		return s, nil
	}
	if why := uriProblem(s); why != "" {
		return "", fmt.Errorf("%w: %q is neither cn:NAME nor an absolute URI in canonical form like spiffe://example.org/latch/front: it %s", ErrIdentity, s, why)
	}
	return s, nil
}

// reservedSchemes are the prefixes of identities that are not URI SANs.
var reservedSchemes = map[string]bool{"cn": true, "uid": true, "tcp": true, "none": true}

// CanonicalURI reports whether s is a URI SAN in the one form identities
// are compared in: scheme://host[/segment…] with a lower-case scheme that
// is not cn, uid, tcp or none, a lower-case host without userinfo or
// port, and a path of non-empty segments that are not . or .., without
// percent-encoding, query or fragment. Two URIs that could name the same
// thing differently are thus never both accepted; the error says which
// rule s breaks, for the operator to fix the certificate or the flag.
func CanonicalURI(s string) error {
	if why := uriProblem(s); why != "" {
		return fmt.Errorf("%w: %q %s", ErrIdentity, s, why)
	}
	return nil
}

// uriProblem says why s is not a canonical URI identity ("" if it is).
func uriProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "is not a URI: " + err.Error()
	}
	scheme := u.Scheme // url.Parse lower-cases it
	switch {
	case scheme == "":
		return "has no scheme (want scheme://host/path)"
	case reservedSchemes[scheme]:
		return "has the scheme " + scheme + ":, reserved for Latch's own identities (cn:NAME is a subject CN, never a URI SAN)"
	case !strings.HasPrefix(s, scheme+"://"):
		if !strings.HasPrefix(s, scheme+":") {
			return "has a scheme that is not lower-case (write " + scheme + ":)"
		}
		return "is not an absolute URI with a host (want " + scheme + "://host/path)"
	case strings.Contains(s, "%"):
		return "holds percent-encoding"
	case u.User != nil:
		return "holds userinfo (user@)"
	case u.Host == "":
		return "has no host"
	case strings.Contains(u.Host, ":"):
		return "holds a port (or an IPv6 literal); an identity names no port"
	case u.Host != strings.ToLower(u.Host):
		return "has a host that is not lower-case (write " + strings.ToLower(u.Host) + ")"
	case u.RawQuery != "" || u.ForceQuery:
		return "holds a query"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "holds a fragment"
	}
	if u.Path != "" {
		for _, seg := range strings.Split(strings.TrimPrefix(u.Path, "/"), "/") {
			switch seg {
			case "":
				return "has an empty path segment (// or a trailing /)"
			case ".", "..":
				return "has a dot segment (" + seg + ")"
			}
		}
	}
	if u.String() != s {
		return fmt.Sprintf("is not in canonical form (%q)", u.String())
	}
	return ""
}

// oidSubjectAltName is the X.509 subjectAltName extension.
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// rawURISANs returns the URI SANs of cert as its SAN extension carries
// them (x509 parses them with net/url, which rewrites some).
func rawURISANs(cert *x509.Certificate) ([]string, error) {
	var out []string
	for _, ext := range cert.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			continue
		}
		var seq asn1.RawValue
		rest, err := asn1.Unmarshal(ext.Value, &seq)
		if err != nil || len(rest) != 0 || !seq.IsCompound || seq.Tag != asn1.TagSequence || seq.Class != asn1.ClassUniversal {
			return nil, fmt.Errorf("%w: the client certificate's SAN extension is malformed", ErrIdentity)
		}
		for b := seq.Bytes; len(b) > 0; {
			var v asn1.RawValue
			if b, err = asn1.Unmarshal(b, &v); err != nil {
				return nil, fmt.Errorf("%w: the client certificate's SAN extension is malformed", ErrIdentity)
			}
			if v.Class == asn1.ClassContextSpecific && v.Tag == 6 { // uniformResourceIdentifier [6] IA5String
				out = append(out, string(v.Bytes))
			}
		}
	}
	return out, nil
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

// validOperatorName is the rule of names Latch issues tokens for
// (actorname.CheckIssued): an operator token's name.
func validOperatorName(s string) bool { return actorname.CheckIssued(s) == nil }
