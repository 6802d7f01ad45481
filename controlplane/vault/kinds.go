package vault

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// A credential kind is how a secret is presented to a target. Every kind is
// a CredentialKind in the registry: the built-ins are listed in builtIn
// below, one line each, each declared in its own file (kinds_<name>.go);
// another package adds one with Register. A kind declares its fields (what
// Validate checks, what the vault seals, what `latch vault put` reads and
// VaultPutRequest carries), checks them, and presents the credential
// through the capabilities it implements: HTTPKind, SSHKind, EnvKind.
// Callers ask a Credential for a capability (HTTP, SSH, Env); nothing
// outside a kind's file switches on kind names.

// builtIn are the kinds every vault knows, one line per kind.
var builtIn = []CredentialKind{
	bearerKind{},
	basicKind{},
	headerKind{},
	sshKeyKind{},
	sigV4Kind{},
	oauth2Kind{},
}

// Kind names a credential kind (the kind of VaultPutRequest, `latch vault
// put --kind`, and the sealed entry).
type Kind string

// The names of the built-in kinds.
const (
	// KindBearer is sent as "Authorization: Bearer <token>".
	KindBearer Kind = "bearer"
	// KindBasic is sent as HTTP basic authentication.
	KindBasic Kind = "basic"
	// KindHeader is sent as a custom header "<header>: <value>".
	KindHeader Kind = "header"
	// KindSSHKey is an unencrypted SSH private key (PEM or OpenSSH format).
	KindSSHKey Kind = "ssh_key"
	// KindAWSSigV4 signs each request with AWS Signature Version 4.
	KindAWSSigV4 Kind = "aws_sigv4"
	// KindOAuth2ClientCredentials fetches access tokens with the client
	// credentials grant and sends them as bearer tokens.
	KindOAuth2ClientCredentials Kind = "oauth2_client_credentials" //nolint:gosec // a kind name, not a credential
)

// FieldType says how a field's value is encoded where it is not a plain
// string: in the sealed entry, on stdin as JSON, and in VaultPutRequest.
type FieldType uint8

const (
	// FieldText is a string.
	FieldText FieldType = iota
	// FieldBytes is a byte string (base64 in JSON, bytes in proto).
	FieldBytes
	// FieldList is a list of strings, held in Fields joined by "\n"
	// (ListValue splits it; a JSON array, a repeated proto field).
	FieldList
)

// ListValue splits the value of a FieldList field; "" is no items.
func ListValue(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, "\n")
}

// JoinList is the Fields value of a FieldList field holding items.
func JoinList(items []string) string { return strings.Join(items, "\n") }

// Field is one field of a kind.
type Field struct {
	// Name is snake_case: the key in Fields, in the sealed entry, in the
	// JSON `latch vault put` reads and the VaultPutRequest field of that
	// name (when there is one; else it travels in VaultPutRequest.fields).
	Name string
	Type FieldType
	// Required: Validate refuses the credential without it.
	Required bool
	// Secret: the value is redacted from results and must be long enough
	// for that (package redact). Non-secret fields (a user name, a header
	// name, a region) may appear in messages about the credential.
	Secret bool
	// Help describes the field in `latch vault put -h`.
	Help string

	// How `latch vault put` reads the field when not given as JSON on
	// stdin: Flag names the command-line flag that holds it (File: the
	// flag names a file whose contents are the value), Prompt reads it as
	// one line from stdin. A kind with neither on any field reads all its
	// fields as one JSON object from stdin.
	Flag   string
	File   bool
	Prompt bool
}

// Fields are a credential's field values by Field.Name.
type Fields map[string]string

// CredentialKind is one kind of credential. Implemented by the built-ins
// in this package (builtIn) and by any kind a program Registers.
type CredentialKind interface {
	// Name is the kind's name, ^[a-z][a-z0-9_]{0,31}$.
	Name() Kind
	// Fields are the fields the kind uses, in the order they are shown.
	Fields() []Field
	// Validate checks the values of c. Credential.Validate has checked
	// that only the kind's fields are set, the required ones are, and the
	// secret ones can be redacted. Errors wrap ErrInvalidCredential and
	// name fields, never values.
	Validate(c Credential) error
}

// HTTPKind is a kind presented on HTTP requests. Implemented by bearer,
// basic, header, aws_sigv4 and oauth2_client_credentials.
type HTTPKind interface {
	CredentialKind
	// HTTP returns c, which Validate accepted, as its presentation.
	HTTP(c Credential) HTTPCredential
}

// SSHKind is a kind presented to SSH servers. Implemented by ssh_key.
type SSHKind interface {
	CredentialKind
	SSH(c Credential) SSHCredential
}

// EnvKind is a kind whose secret can be handed to a stdio upstream as one
// environment variable (an MCP upstream's credential_env). Implemented by
// bearer and header.
type EnvKind interface {
	CredentialKind
	// Env is the variable's value.
	Env(c Credential) string
}

// HTTPCredential presents a credential on an HTTP request;
// httpdispatch.Credential is the same method set, defined where it is
// used. Implemented by Bearer, Basic, Header, SigV4 and
// *OAuth2ClientCredentials, and by the kinds other packages register.
type HTTPCredential interface {
	// Apply presents the credential on r. The dispatcher calls it last, on
	// the request that goes on the wire (every other header set), once per
	// attempt; r.GetBody is set during the call so a signing kind can hash
	// the payload. Apply must not change r's method, URL or body.
	Apply(r *http.Request) error
	// Headers names the request headers Apply sets: a request template may
	// not set them, and they are never stored with a result.
	Headers() []string
	// Secrets are every byte string Apply may put on the wire that is
	// secret (a password and the "user:pass" pair it is encoded from, a
	// fetched token): they are redacted, in each form package redact
	// derives (base64, hex, URL and JSON escapes), from anything stored.
	Secrets() [][]byte
}

// SSHCredential presents a credential to an SSH server. Implemented by
// SSHKey.
type SSHCredential interface {
	// Signer is the client key, parsed; the error never quotes key material.
	Signer() (ssh.Signer, error)
}

var kindNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

var registry struct {
	sync.RWMutex
	kinds map[Kind]CredentialKind
}

func init() {
	for _, k := range builtIn {
		Register(k)
	}
}

// Register adds a kind. It panics (a programming error, at start) on a
// malformed or taken name, on a field named twice or named like the
// sealed entry's own keys, or on two fields read from one prompt.
func Register(k CredentialKind) {
	name := k.Name()
	if !kindNameRE.MatchString(string(name)) {
		panic(fmt.Sprintf("vault: Register: kind name %q must match %s", name, kindNameRE))
	}
	seen := map[string]bool{"vault": true, "name": true, "kind": true, "fields": true}
	prompts := 0
	for _, f := range k.Fields() {
		if !kindNameRE.MatchString(f.Name) || seen[f.Name] {
			panic(fmt.Sprintf("vault: Register: kind %s: field name %q is malformed, reserved or repeated", name, f.Name))
		}
		seen[f.Name] = true
		if f.Prompt {
			prompts++
		}
	}
	if prompts > 1 {
		panic(fmt.Sprintf("vault: Register: kind %s reads %d fields from the stdin prompt; at most one", name, prompts))
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.kinds == nil {
		registry.kinds = make(map[Kind]CredentialKind)
	}
	if _, dup := registry.kinds[name]; dup {
		panic(fmt.Sprintf("vault: Register: kind %s is registered twice", name))
	}
	registry.kinds[name] = k
}

// Lookup returns the registered kind called name.
func Lookup(name Kind) (CredentialKind, bool) {
	registry.RLock()
	defer registry.RUnlock()
	k, ok := registry.kinds[name]
	return k, ok
}

// Kinds returns the registered kinds sorted by name.
func Kinds() []CredentialKind {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]CredentialKind, 0, len(registry.kinds))
	for _, k := range registry.kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b CredentialKind) int { return strings.Compare(string(a.Name()), string(b.Name())) })
	return out
}

// kindNames lists the registered kinds that pass keep, for messages.
func kindNames(keep func(CredentialKind) bool) string {
	var names []string
	for _, k := range Kinds() {
		if keep == nil || keep(k) {
			names = append(names, string(k.Name()))
		}
	}
	return strings.Join(names, ", ")
}

// field returns k's field called name.
func field(k CredentialKind, name string) (Field, bool) {
	for _, f := range k.Fields() {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}
