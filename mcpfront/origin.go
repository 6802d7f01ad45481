package mcpfront

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/latchhq/latch/internal/loopback"
)

// The Origin rule. The MCP spec requires HTTP servers to validate Origin to
// stop DNS rebinding: a page on evil.example whose name now resolves to
// 127.0.0.1 must not reach a loopback MCP server. A request without Origin
// (not a browser) passes; a request with one passes only when the origin,
// parsed and normalised, is a loopback origin (host localhost or a loopback
// IP literal) or one the operator pinned (Config.AllowedOrigins,
// --allow-origin). Origins are compared parsed, never as text: scheme and
// host lowercased, the default port dropped. Anything that is not exactly a
// serialised http(s) origin is refused: "null", a path, a query, userinfo
// ("http://127.0.0.1@evil.example" is evil.example), a host that merely
// starts like a loopback address ("http://127.0.0.1.evil.example"), a bad
// port.

// ErrBadOrigin means a string is not a serialised http(s) origin.
var ErrBadOrigin = errors.New("mcpfront: not an origin")

// ParseOrigin parses an Origin header value or an --allow-origin entry
// ("scheme://host[:port]", scheme http or https) and returns its normalised
// form and its host (brackets removed from IPv6 literals). The error wraps
// ErrBadOrigin and says what is wrong.
func ParseOrigin(s string) (normalised, host string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%w: %q %s; an origin is scheme://host[:port], like https://console.example.com", ErrBadOrigin, s, why)
	}
	if s == "" || s == "null" {
		return bad("names no origin (opaque or empty)")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return bad("holds a space, control or non-ASCII byte")
		}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return bad("does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("is not http or https")
	case u.Opaque != "" || u.Host == "":
		return bad("has no host")
	case u.User != nil || strings.Contains(s, "@"):
		return bad("carries userinfo (text before @ is not the host)")
	case u.Path != "" || u.RawPath != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s[len(u.Scheme)+3:], "/?#"):
		return bad("has a path, query or fragment")
	}
	host = strings.ToLower(u.Hostname())
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return bad("has a malformed IPv6 literal")
		}
		host = a.String()
	} else if !validHostName(host) {
		return bad("has a malformed host name")
	}
	port := u.Port()
	if strings.HasSuffix(u.Host, ":") {
		return bad("has an empty port")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return bad("has a bad port")
		}
		if (u.Scheme == "http" && n == 80) || (u.Scheme == "https" && n == 443) {
			port = ""
		}
	}
	hostPart := host
	if strings.Contains(host, ":") {
		hostPart = "[" + host + "]"
	}
	normalised = u.Scheme + "://" + hostPart
	if port != "" {
		normalised += ":" + port
	}
	return normalised, host, nil
}

// validHostName accepts DNS names and IPv4 literals: labels of [a-z0-9-]
// separated by single dots, no trailing dot (browsers send punycode).
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// originPolicy is the set of pinned origins, normalised.
type originPolicy map[string]bool

func newOriginPolicy(pinned []string) (originPolicy, error) {
	p := originPolicy{}
	for _, o := range pinned {
		n, _, err := ParseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("mcpfront: allowed origin: %w", err)
		}
		p[n] = true
	}
	return p, nil
}

// check returns nil when a request with Origin header value origin may
// proceed, or an error saying why not.
func (p originPolicy) check(origin string) error {
	n, host, err := ParseOrigin(origin)
	if err != nil {
		return err
	}
	if p[n] {
		return nil
	}
	if loopback.Host(host) { // "localhost" or a loopback IP literal, exactly
		return nil
	}
	return fmt.Errorf("origin %s is neither a loopback origin nor one allowed by the operator (--allow-origin)", n)
}
