package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"golang.org/x/crypto/ssh"

	"github.com/latchhq/latch/internal/redact"
)

// Kind says how a credential is presented to a target.
type Kind string

// The kinds of credential the vault holds.
const (
	// KindBearer is sent as "Authorization: Bearer <Token>".
	KindBearer Kind = "bearer"
	// KindBasic is sent as HTTP basic authentication (Username, Password).
	KindBasic Kind = "basic"
	// KindHeader is sent as a custom header "<Header>: <Value>".
	KindHeader Kind = "header"
	// KindSSHKey is an unencrypted SSH private key (PEM or OpenSSH format).
	KindSSHKey Kind = "ssh_key"
	// KindAWSSigV4 signs each request with AWS Signature Version 4
	// (AccessKeyID, SecretAccessKey, optional SessionToken, Region,
	// Service) over its method, URL, headers and body hash.
	KindAWSSigV4 Kind = "aws_sigv4"
	// KindOAuth2ClientCredentials fetches an access token from TokenURL
	// with the client credentials grant (ClientID, ClientSecret, Scopes,
	// Audience), keeps it until it expires, and sends it as a bearer token.
	KindOAuth2ClientCredentials Kind = "oauth2_client_credentials"
)

// kindFields are the Credential fields each kind uses; Validate refuses
// any other field set.
var kindFields = map[Kind][]string{
	KindBearer:                  {"Token"},
	KindBasic:                   {"Username", "Password"},
	KindHeader:                  {"Header", "Value"},
	KindSSHKey:                  {"PrivateKey"},
	KindAWSSigV4:                {"AccessKeyID", "SecretAccessKey", "SessionToken", "Region", "Service"},
	KindOAuth2ClientCredentials: {"TokenURL", "ClientID", "ClientSecret", "Scopes", "Audience"},
}

// fieldSet tells, for every credential field by name, whether c sets it;
// allFields is its names in a fixed order (for stable messages). A new
// field is added here once.
var fieldSet = map[string]func(c Credential) bool{
	"Token":           func(c Credential) bool { return c.Token != "" },
	"Username":        func(c Credential) bool { return c.Username != "" },
	"Password":        func(c Credential) bool { return c.Password != "" },
	"Header":          func(c Credential) bool { return c.Header != "" },
	"Value":           func(c Credential) bool { return c.Value != "" },
	"PrivateKey":      func(c Credential) bool { return len(c.PrivateKey) > 0 },
	"AccessKeyID":     func(c Credential) bool { return c.AccessKeyID != "" },
	"SecretAccessKey": func(c Credential) bool { return c.SecretAccessKey != "" },
	"SessionToken":    func(c Credential) bool { return c.SessionToken != "" },
	"Region":          func(c Credential) bool { return c.Region != "" },
	"Service":         func(c Credential) bool { return c.Service != "" },
	"TokenURL":        func(c Credential) bool { return c.TokenURL != "" },
	"ClientID":        func(c Credential) bool { return c.ClientID != "" },
	"ClientSecret":    func(c Credential) bool { return c.ClientSecret != "" },
	"Scopes":          func(c Credential) bool { return len(c.Scopes) > 0 },
	"Audience":        func(c Credential) bool { return c.Audience != "" },
}

var allFields = []string{"Token", "Username", "Password", "Header", "Value", "PrivateKey",
	"AccessKeyID", "SecretAccessKey", "SessionToken", "Region", "Service",
	"TokenURL", "ClientID", "ClientSecret", "Scopes", "Audience"}

// otherFields returns the set fields of c that its kind does not use.
func otherFields(c Credential) []string {
	var names []string
	for _, n := range allFields {
		if !slices.Contains(kindFields[c.Kind], n) {
			names = append(names, n)
		}
	}
	return setFields(c, names...)
}

// redacted replaces every secret value wherever a Credential is printed.
const redacted = "[redacted]"

// Credential is one secret held by the vault under a credential_ref name.
// Only the fields of its Kind are set; Validate rejects the others.
//
// A Credential never prints its secrets: String, GoString, Format (every
// fmt verb), MarshalJSON and LogValue all show the kind and "[redacted]", so
// a credential that ends up in a log line or an error leaks nothing.
type Credential struct {
	Kind Kind

	// Token is the bearer token (KindBearer).
	Token string

	// Username and Password are the basic-auth pair (KindBasic).
	Username, Password string

	// Header and Value are the custom header (KindHeader).
	Header, Value string

	// PrivateKey is the SSH private key (KindSSHKey). Get returns a fresh
	// copy; callers may zero it after use.
	PrivateKey []byte
	// AccessKeyID, SecretAccessKey, SessionToken (optional), Region and
	// Service sign requests (KindAWSSigV4).
	AccessKeyID, SecretAccessKey, SessionToken, Region, Service string
	// TokenURL, ClientID, ClientSecret, Scopes and Audience (both
	// optional) get access tokens (KindOAuth2ClientCredentials).
	TokenURL, ClientID, ClientSecret string
	Scopes                           []string
	Audience                         string

	// tokens is the vault's token cache for this credential (set by
	// Vault.Get for KindOAuth2ClientCredentials); nil: no cache shared
	// between calls.
	tokens *tokenCache
}

// Validate reports whether c is usable: its kind is known, the fields that
// kind needs are set and well formed, and the fields of other kinds are
// empty. Errors wrap ErrInvalidCredential and never contain secret values.
func (c Credential) Validate() error {
	var need, bad []string
	switch c.Kind {
	case KindBearer:
		if c.Token == "" {
			need = append(need, "Token")
		} else if !validHeaderValue(c.Token) || hasSpace(c.Token) {
			return invalidf("bearer token holds spaces or control characters")
		}
		bad = otherFields(c)
	case KindBasic:
		if c.Username == "" {
			need = append(need, "Username")
		} else if !validHeaderValue(c.Username) || containsByte(c.Username, ':') {
			return invalidf("basic username holds ':' or control characters")
		}
		if !validHeaderValue(c.Password) {
			return invalidf("basic password holds control characters")
		}
		bad = otherFields(c)
	case KindHeader:
		if c.Header == "" {
			need = append(need, "Header")
		} else if !validHeaderName(c.Header) {
			// The name is not echoed: a whole "Name: value" line pasted here
			// by mistake would carry the secret.
			return invalidf("header name is not a valid HTTP field name (letters, digits and !#$%%&'*+-.^_`|~ only)")
		}
		if c.Value == "" {
			need = append(need, "Value")
		} else if !validHeaderValue(c.Value) {
			return invalidf("header value holds control characters")
		}
		bad = otherFields(c)
	case KindSSHKey:
		if len(c.PrivateKey) == 0 {
			need = append(need, "PrivateKey")
		} else if _, err := ssh.ParsePrivateKey(c.PrivateKey); err != nil {
			// The parser's own message is not passed on: it is not worth the
			// risk of quoting key material in an error.
			var pm *ssh.PassphraseMissingError
			if errors.As(err, &pm) {
				return invalidf("ssh private key is passphrase-protected; store an unencrypted key (ssh-keygen -p -N '')")
			}
			return invalidf("ssh private key does not parse; want an unencrypted OpenSSH or PEM private key")
		}
		bad = otherFields(c)
	case KindAWSSigV4:
		if err := c.validateSigV4(&need); err != nil {
			return err
		}
		bad = otherFields(c)
	case KindOAuth2ClientCredentials:
		if err := c.validateOAuth2(&need); err != nil {
			return err
		}
		bad = otherFields(c)
	case "":
		return invalidf("kind is empty; want one of %s", kindList)
	default:
		return invalidf("unknown kind; want one of %s", kindList)
	}
	if len(need) > 0 {
		return invalidf("%s credential needs %v", c.Kind, need)
	}
	if len(bad) > 0 {
		return invalidf("%s credential must not set %v", c.Kind, bad)
	}
	return c.validateRedactable()
}

// validateRedactable refuses a secret field too short to be redacted from
// results (package redact: shorter than redact.MinLen bytes, or inside its
// mark): a target echoing it would get it stored. The dispatcher refuses
// to present one too; this says so when it is stored. An empty basic
// password carries nothing and is allowed.
func (c Credential) validateRedactable() error {
	for _, f := range []struct {
		name string
		v    string
	}{{"Token", c.Token}, {"Password", c.Password}, {"Value", c.Value}, {"SecretAccessKey", c.SecretAccessKey}, {"SessionToken", c.SessionToken}, {"ClientSecret", c.ClientSecret}} {
		if _, err := redact.Secrets(nil, [][]byte{[]byte(f.v)}); err != nil {
			return invalidf("%s credential's %s is too short to be redacted from results (at least %d bytes)", c.Kind, f.name, redact.MinLen)
		}
	}
	return nil
}

// kindList names the kinds, for messages.
const kindList = "bearer, basic, header, ssh_key, aws_sigv4, oauth2_client_credentials"

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidCredential}, args...)...)
}

// setFields returns which of the named fields are set in c.
func setFields(c Credential, names ...string) []string {
	var set []string
	for _, n := range names {
		if fieldSet[n](c) {
			set = append(set, n)
		}
	}
	return set
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

// kindLabel is the kind as printed: only known kinds are echoed, so a
// secret pasted into the Kind field by mistake is not printed either.
func (c Credential) kindLabel() string {
	switch c.Kind {
	case KindBearer, KindBasic, KindHeader, KindSSHKey, KindAWSSigV4, KindOAuth2ClientCredentials:
		return string(c.Kind)
	case "":
		return "none"
	default:
		return "unknown"
	}
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
