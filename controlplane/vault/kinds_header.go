package vault

import (
	"fmt"
	"io"
	"net/http"
)

// headerKind is sent as a custom header "<header>: <value>".
type headerKind struct{}

func (headerKind) Name() Kind { return KindHeader }

func (headerKind) Fields() []Field {
	return []Field{
		{Name: "header", Required: true, Flag: "header", Help: "the header name"},
		{Name: "value", Required: true, Secret: true, Prompt: true, Help: "the header value (one line on stdin)"},
	}
}

func (headerKind) Validate(c Credential) error {
	if !validHeaderName(c.Get("header")) {
		// The name is not echoed: a whole "Name: value" line pasted here
		// by mistake would carry the secret.
		return invalidf("header name is not a valid HTTP field name (letters, digits and !#$%%&'*+-.^_`|~ only)")
	}
	if !validHeaderValue(c.Get("value")) {
		return invalidf("header value holds control characters")
	}
	return nil
}

func (headerKind) HTTP(c Credential) HTTPCredential {
	return Header{Name: c.Get("header"), Value: c.Get("value")}
}

// Env is the value.
func (headerKind) Env(c Credential) string { return c.Get("value") }

// Header is sent as a custom header "<Name>: <Value>".
type Header struct{ Name, Value string }

// Apply sets the header.
func (h Header) Apply(r *http.Request) error {
	if !validHeaderName(h.Name) {
		return fmt.Errorf("header credential names an unusable header %q", h.Name)
	}
	if h.Value == "" || !validHeaderValue(h.Value) {
		return fmt.Errorf("header credential %s has an empty or malformed value", http.CanonicalHeaderKey(h.Name))
	}
	r.Header.Set(h.Name, h.Value)
	return nil
}

// Headers is the header's canonical name.
func (h Header) Headers() []string { return []string{http.CanonicalHeaderKey(h.Name)} }

// Secrets is the value.
func (h Header) Secrets() [][]byte { return [][]byte{[]byte(h.Value)} }

// String never shows the value.
func (Header) String() string { return "vault.Header{" + redacted + "}" }

func (h Header) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, h.String()) }

func (Header) MarshalJSON() ([]byte, error) { return redactedJSON(KindHeader) }
