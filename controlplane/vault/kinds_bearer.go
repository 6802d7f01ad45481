package vault

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// bearerKind is sent as "Authorization: Bearer <token>".
type bearerKind struct{}

func (bearerKind) Name() Kind { return KindBearer }

func (bearerKind) Fields() []Field {
	return []Field{{Name: "token", Required: true, Secret: true, Prompt: true, Help: "the bearer token (one line on stdin)"}}
}

func (bearerKind) Validate(c Credential) error {
	if t := c.Get("token"); !validHeaderValue(t) || hasSpace(t) {
		return invalidf("bearer token holds spaces or control characters")
	}
	return nil
}

func (bearerKind) HTTP(c Credential) HTTPCredential { return Bearer{Token: c.Get("token")} }

// Env is the token.
func (bearerKind) Env(c Credential) string { return c.Get("token") }

// Bearer is sent as "Authorization: Bearer <Token>".
type Bearer struct{ Token string }

// Apply sets the Authorization header.
func (b Bearer) Apply(r *http.Request) error {
	if b.Token == "" || !validHeaderValue(b.Token) {
		return errors.New("bearer credential has an empty or malformed token")
	}
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return nil
}

// Headers is Authorization.
func (Bearer) Headers() []string { return []string{"Authorization"} }

// Secrets is the token.
func (b Bearer) Secrets() [][]byte { return [][]byte{[]byte(b.Token)} }

// String never shows the token.
func (Bearer) String() string { return "vault.Bearer{" + redacted + "}" }

func (b Bearer) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, b.String()) }

func (Bearer) MarshalJSON() ([]byte, error) { return redactedJSON(KindBearer) }
