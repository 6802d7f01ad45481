package vault

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/latchhq/latch/internal/redact"
)

// redacted replaces every secret value wherever a Credential is printed.
const redacted = "[redacted]"

// Credential is one secret held by the vault under a credential_ref name:
// its kind and the values of that kind's fields (CredentialKind.Fields).
//
// A Credential never prints its secrets: String, GoString, Format (every
// fmt verb), MarshalJSON and LogValue all show the kind and "[redacted]", so
// a credential that ends up in a log line or an error leaks nothing.
type Credential struct {
	Kind   Kind
	Fields Fields

	// tokens is the vault's token cache for this credential (set by
	// Vault.Get; a kind that fetches access tokens keeps them there);
	// nil: no cache shared between calls.
	tokens *tokenCache
}

// Get returns the value of field name ("" when unset).
func (c Credential) Get(name string) string { return c.Fields[name] }

// Validate reports whether c is usable: its kind is registered, only that
// kind's fields are set, the required ones are, the secret ones are long
// enough to be redacted, and the kind accepts their values. Errors wrap
// ErrInvalidCredential and never contain secret values.
func (c Credential) Validate() error {
	if c.Kind == "" {
		return invalidf("kind is empty; want one of %s", kindNames(nil))
	}
	k, ok := Lookup(c.Kind)
	if !ok {
		return invalidf("unknown kind; want one of %s", kindNames(nil))
	}
	var bad []string
	var need []string
	for name := range c.Fields {
		if _, ok := field(k, name); !ok && c.Fields[name] != "" {
			bad = append(bad, name)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		// Names only: a field name outside the kind's list is not echoed
		// if it could be a pasted secret.
		for i, n := range bad {
			if !kindNameRE.MatchString(n) {
				bad[i] = "(unprintable field name)"
			}
		}
		return invalidf("%s credential must not set %v", c.Kind, bad)
	}
	for _, f := range k.Fields() {
		v := c.Fields[f.Name]
		if f.Required && v == "" {
			need = append(need, f.Name+" ("+f.Help+")")
		}
		if f.Secret && v != "" {
			if _, err := redact.Secrets(nil, [][]byte{[]byte(v)}); err != nil {
				return invalidf("%s credential's %s is too short to be redacted from results (at least %d bytes)", c.Kind, f.Name, redact.MinLen)
			}
		}
	}
	if len(need) > 0 {
		return invalidf("%s credential needs %s", c.Kind, strings.Join(need, ", "))
	}
	return k.Validate(c)
}

// HTTP returns c as its HTTP presentation. A kind that is not an HTTPKind
// (an SSH key) gives ErrWrongKind.
func (c Credential) HTTP() (HTTPCredential, error) {
	k, ok := Lookup(c.Kind)
	if !ok {
		return nil, invalidf("kind %s is not an HTTP kind (%s)", c.kindLabel(), kindNames(isHTTP))
	}
	h, ok := k.(HTTPKind)
	if !ok {
		return nil, fmt.Errorf("%w: a %s credential cannot be presented over HTTP; an HTTP target needs %s", ErrWrongKind, c.Kind, kindNames(isHTTP))
	}
	return h.HTTP(c), nil
}

// SSH returns c as its SSH presentation. Any other kind gives ErrWrongKind.
func (c Credential) SSH() (SSHCredential, error) {
	k, _ := Lookup(c.Kind)
	s, ok := k.(SSHKind)
	if !ok {
		return nil, fmt.Errorf("%w: a %s credential is not an SSH key; an ssh target needs an %s credential", ErrWrongKind, c.kindLabel(), strings.ReplaceAll(kindNames(isSSH), ", ", " or "))
	}
	return s.SSH(c), nil
}

// Env returns the value c gives a stdio upstream in one environment
// variable. A kind that is not an EnvKind gives ErrWrongKind.
func (c Credential) Env() (string, error) {
	k, _ := Lookup(c.Kind)
	e, ok := k.(EnvKind)
	if !ok {
		return "", fmt.Errorf("%w: a %s credential cannot be passed in an environment variable; credential_env takes %s", ErrWrongKind, c.kindLabel(), kindNames(isEnv))
	}
	return e.Env(c), nil
}

func isHTTP(k CredentialKind) bool { _, ok := k.(HTTPKind); return ok }
func isSSH(k CredentialKind) bool  { _, ok := k.(SSHKind); return ok }
func isEnv(k CredentialKind) bool  { _, ok := k.(EnvKind); return ok }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidCredential}, args...)...)
}

// validHeaderName reports whether s is an RFC 9110 field name (a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case containsByte("!#$%&'*+-.^_`|~", b):
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s can travel in an HTTP field value:
// no control characters (so no CR/LF header injection) other than tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; (b < 0x20 && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

func hasSpace(s string) bool { return containsByte(s, ' ') || containsByte(s, '\t') }

func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// kindLabel is the kind as printed: only registered kinds are echoed, so
// a secret pasted into the Kind field by mistake is not printed either.
func (c Credential) kindLabel() string {
	if _, ok := Lookup(c.Kind); ok {
		return string(c.Kind)
	}
	if c.Kind == "" {
		return "none"
	}
	return "unknown"
}

// String returns the kind and "[redacted]"; never a secret.
func (c Credential) String() string {
	return "vault.Credential{Kind: " + c.kindLabel() + ", " + redacted + "}"
}

// GoString is String: %#v prints no secret either.
func (c Credential) GoString() string { return c.String() }

// Format prints String for every verb (%v, %+v, %#v, %s, %q, %x, %d, ...),
// so no fmt verb reaches the fields.
func (c Credential) Format(f fmt.State, verb rune) {
	_, _ = io.WriteString(f, c.String())
}

// MarshalJSON writes the kind and a redaction marker, never the secret, so
// a credential handed to a JSON logger or encoder leaks nothing. The vault
// seals credentials with its own private encoding.
func (c Credential) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind   string `json:"kind"`
		Secret string `json:"secret"`
	}{c.kindLabel(), redacted})
}

// LogValue makes log/slog print String.
func (c Credential) LogValue() slog.Value { return slog.StringValue(c.String()) }
