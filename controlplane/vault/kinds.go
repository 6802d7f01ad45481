package vault

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"golang.org/x/crypto/ssh"
)

// A credential kind is how a secret is presented to a target. Each kind is a
// type implementing the interface of its channel, so a new kind is a new
// type (kinds_sigv4.go, kinds_oauth2.go) and a case in Credential.HTTP; the
// dispatcher only calls the interface.
//
// The stored Credential stays one record with the fields of every kind (it
// is what the vault seals and what PutCredential carries); HTTP and SSH turn
// it into its kind.

// HTTPCredential presents a credential on an HTTP request. Implemented by
// Bearer, Basic and Header; httpdispatch.Credential is the same method set,
// defined where it is used.
type HTTPCredential interface {
	// Apply presents the credential on r. The dispatcher calls it last, on
	// the request that goes on the wire (every other header set), once per
	// attempt; r.GetBody is set during the call so a signing kind can hash
	// the payload. Apply must not change r's method, URL or body.
	Apply(r *http.Request) error
	// Headers names the request headers Apply sets: a request template may
	// not set them, and they are never stored with a result.
	Headers() []string
	// Secrets are the byte strings Apply may put on the wire; they are
	// redacted from anything stored.
	Secrets() [][]byte
}

// SSHCredential presents a credential to an SSH server. Implemented by
// SSHKey.
type SSHCredential interface {
	// Signer is the client key, parsed; the error never quotes key material.
	Signer() (ssh.Signer, error)
}

var (
	_ HTTPCredential = Bearer{}
	_ HTTPCredential = Basic{}
	_ HTTPCredential = Header{}
	_ HTTPCredential = SigV4{}
	_ HTTPCredential = (*OAuth2ClientCredentials)(nil)
	_ SSHCredential  = SSHKey{}
)

// HTTP returns c as the HTTP kind it is. An SSH key gives ErrWrongKind.
func (c Credential) HTTP() (HTTPCredential, error) {
	switch c.Kind {
	case KindBearer:
		return Bearer{Token: c.Token}, nil
	case KindBasic:
		return Basic{Username: c.Username, Password: c.Password}, nil
	case KindHeader:
		return Header{Name: c.Header, Value: c.Value}, nil
	case KindAWSSigV4:
		return SigV4{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken, Region: c.Region, Service: c.Service}, nil
	case KindOAuth2ClientCredentials:
		cache := c.tokens
		if cache == nil {
			cache = &tokenCache{}
		}
		return &OAuth2ClientCredentials{TokenURL: c.TokenURL, ClientID: c.ClientID, ClientSecret: c.ClientSecret, Scopes: slices.Clone(c.Scopes), Audience: c.Audience, cache: cache}, nil
	case KindSSHKey:
		return nil, fmt.Errorf("%w: an ssh_key credential cannot be presented over HTTP; an HTTP target needs bearer, basic, header, aws_sigv4 or oauth2_client_credentials", ErrWrongKind)
	}
	return nil, invalidf("kind %s is not an HTTP kind (bearer, basic, header, aws_sigv4, oauth2_client_credentials)", c.kindLabel())
}

// SSH returns c as the SSH kind it is. Any HTTP kind gives ErrWrongKind.
func (c Credential) SSH() (SSHCredential, error) {
	if c.Kind == KindSSHKey {
		return SSHKey{PrivateKey: c.PrivateKey}, nil
	}
	return nil, fmt.Errorf("%w: a %s credential is not an SSH key; an ssh target needs an ssh_key credential", ErrWrongKind, c.kindLabel())
}

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

// SSHKey is an unencrypted SSH private key (PEM or OpenSSH format).
type SSHKey struct{ PrivateKey []byte }

// Signer parses the key.
func (k SSHKey) Signer() (ssh.Signer, error) {
	s, err := ssh.ParsePrivateKey(k.PrivateKey)
	if err != nil {
		// x/crypto's parse errors name the problem, never the key.
		return nil, fmt.Errorf("not a usable unencrypted SSH private key (%v)", err)
	}
	return s, nil
}

// String never shows the key.
func (SSHKey) String() string { return "vault.SSHKey{" + redacted + "}" }

// Every kind prints as its String for every fmt verb (%#v included) and
// marshals to a redaction marker, like Credential: a kind that ends up in a
// log line, an error or a JSON encoder leaks nothing.

func (b Bearer) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, b.String()) }
func (b Basic) Format(f fmt.State, _ rune)  { _, _ = io.WriteString(f, b.String()) }
func (h Header) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, h.String()) }
func (k SSHKey) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

func (Bearer) MarshalJSON() ([]byte, error) { return redactedJSON(KindBearer) }
func (Basic) MarshalJSON() ([]byte, error)  { return redactedJSON(KindBasic) }
func (Header) MarshalJSON() ([]byte, error) { return redactedJSON(KindHeader) }
func (SSHKey) MarshalJSON() ([]byte, error) { return redactedJSON(KindSSHKey) }

func redactedJSON(k Kind) ([]byte, error) { return Credential{Kind: k}.MarshalJSON() }
