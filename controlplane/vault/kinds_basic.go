package vault

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// basicKind is sent as HTTP basic authentication.
type basicKind struct{}

func (basicKind) Name() Kind { return KindBasic }

func (basicKind) Fields() []Field {
	return []Field{
		{Name: "username", Required: true, Flag: "username", Help: "the user name"},
		// An empty password is allowed: it carries nothing to redact.
		{Name: "password", Secret: true, Prompt: true, Help: "the password (one line on stdin)"},
	}
}

func (basicKind) Validate(c Credential) error {
	if u := c.Get("username"); !validHeaderValue(u) || containsByte(u, ':') {
		return invalidf("basic username holds ':' or control characters")
	}
	if !validHeaderValue(c.Get("password")) {
		return invalidf("basic password holds control characters")
	}
	return nil
}

func (basicKind) HTTP(c Credential) HTTPCredential {
	return Basic{Username: c.Get("username"), Password: c.Get("password")}
}

// Basic is sent as HTTP basic authentication.
type Basic struct{ Username, Password string }

// Apply sets the Authorization header.
func (b Basic) Apply(r *http.Request) error {
	if b.Username == "" || containsByte(b.Username, ':') || !validHeaderValue(b.Username) || !validHeaderValue(b.Password) {
		return errors.New("basic credential needs a username without ':' and printable fields")
	}
	r.Header.Set("Authorization", "Basic "+b.encoded())
	return nil
}

func (b Basic) encoded() string {
	return base64.StdEncoding.EncodeToString([]byte(b.Username + ":" + b.Password))
}

// Headers is Authorization.
func (Basic) Headers() []string { return []string{"Authorization"} }

// Secrets are the password, the "user:pass" pair it is sent as and that
// pair encoded (the redactor derives the pair's other encodings).
func (b Basic) Secrets() [][]byte {
	if b.Password == "" {
		return [][]byte{[]byte(b.encoded())}
	}
	return [][]byte{[]byte(b.Password), []byte(b.Username + ":" + b.Password), []byte(b.encoded())}
}

// String never shows the password.
func (Basic) String() string { return "vault.Basic{" + redacted + "}" }

func (b Basic) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, b.String()) }

func (Basic) MarshalJSON() ([]byte, error) { return redactedJSON(KindBasic) }
