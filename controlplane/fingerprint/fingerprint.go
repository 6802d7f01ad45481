package fingerprint

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
)

// KeySize is the size of keys GenerateKey makes and the minimum New accepts.
const KeySize = 32

// Prefix starts every fingerprint and every hidden secret argument.
const Prefix = "hmac-sha256:"

// HKDF info strings of the two sub-keys. Changing either changes every
// fingerprint: bump the version suffix, never edit in place.
const (
	infoSecret      = "latch secret argument v1"
	infoFingerprint = "latch intent fingerprint v1"
)

var (
	// ErrShortKey is returned by New for a key shorter than KeySize bytes.
	ErrShortKey = errors.New("fingerprint: server key too short")
)

// Intent is the canonical intent record of docs/design §3. It has no field for
// transport details (request ids, progress tokens, _meta, session ids): by
// construction they cannot enter the fingerprint.
type Intent struct {
	Actor   string `json:"actor"`
	Tool    string `json:"tool"`
	Channel string `json:"channel"`
	// Target is, for HTTP, scheme+host+path template; for SSH, the pinned
	// host key fingerprint and the account.
	Target        string `json:"target"`
	CredentialRef string `json:"credential_ref"`
	// Method is the HTTP method; Command the argv of an SSH or local tool.
	Method  string   `json:"method,omitempty"`
	Command []string `json:"command,omitempty"`
	// Cwd is set when it affects behaviour.
	Cwd string `json:"cwd,omitempty"`
	// Arguments are the tool arguments with the contract's defaults already
	// materialised. Values may be any JSON-marshalable Go value, including
	// json.Number and json.RawMessage. A nil map is recorded as {}.
	Arguments   map[string]any `json:"arguments"`
	IntentScope string         `json:"intent_scope"`
	// RepeatOf is the execution ID a deliberate repeat cites.
	RepeatOf string `json:"repeat_of,omitempty"`
}

// Fingerprinter computes intent records and fingerprints under one server
// key. It is safe for concurrent use.
type Fingerprinter struct {
	secretKey      []byte
	fingerprintKey []byte
}

// GenerateKey returns a new random server key of KeySize bytes.
func GenerateKey() ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("fingerprint: generate key: %w", err)
	}
	return key, nil
}

// New returns a Fingerprinter keyed by the server key (at least KeySize
// bytes). The key itself is not retained: only the two HKDF sub-keys are.
func New(key []byte) (*Fingerprinter, error) {
	if len(key) < KeySize {
		return nil, fmt.Errorf("%w: got %d bytes, need at least %d; make one with fingerprint.GenerateKey", ErrShortKey, len(key), KeySize)
	}
	sk, err := hkdf.Key(sha256.New, key, nil, infoSecret, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: derive secret sub-key: %w", err)
	}
	fk, err := hkdf.Key(sha256.New, key, nil, infoFingerprint, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: derive fingerprint sub-key: %w", err)
	}
	return &Fingerprinter{secretKey: sk, fingerprintKey: fk}, nil
}

// Record returns the canonical JSON (RFC 8785) of in, with the arguments
// named in ignore dropped and each argument named in secret replaced by
// "hmac-sha256:<hex>", the HMAC-SHA256 of its canonical JSON value under
// the secret sub-key. A name in both lists is dropped. Names that match no
// argument are not an error (an optional argument may be absent). in is not
// modified.
//
// The record is safe to store and log: it holds no secret argument.
func (f *Fingerprinter) Record(in Intent, ignore, secret []string) ([]byte, error) {
	args := make(map[string]any, len(in.Arguments))
	maps.Copy(args, in.Arguments)
	for _, name := range ignore {
		delete(args, name)
	}
	hidden := make(map[string]bool, len(secret))
	for _, name := range secret {
		v, ok := args[name]
		if !ok || hidden[name] { // absent, or named twice
			continue
		}
		hidden[name] = true
		canon, err := CanonicalizeValue(v)
		if err != nil {
			// The error may quote the value, which is a secret: keep only
			// its class.
			return nil, fmt.Errorf("fingerprint: secret argument %q: %w", name, redact(err))
		}
		args[name] = Prefix + f.mac(f.secretKey, canon)
	}
	in.Arguments = args
	rec, err := CanonicalizeValue(in)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: intent of tool %q: %w", in.Tool, err)
	}
	return rec, nil
}

// Sum returns the fingerprint of a record made by Record:
// "hmac-sha256:" + lowercase hex HMAC-SHA256 under the fingerprint sub-key.
// Sum does not re-canonicalize: pass Record's output unchanged.
func (f *Fingerprinter) Sum(record []byte) string {
	return Prefix + f.mac(f.fingerprintKey, record)
}

// Fingerprint is Record followed by Sum.
func (f *Fingerprinter) Fingerprint(in Intent, ignore, secret []string) (record []byte, sum string, err error) {
	record, err = f.Record(in, ignore, secret)
	if err != nil {
		return nil, "", err
	}
	return record, f.Sum(record), nil
}

func (f *Fingerprinter) mac(key, data []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))
}

// redact returns the sentinel err belongs to, without err's message, which
// may quote the input.
func redact(err error) error {
	for _, s := range []error{ErrSyntax, ErrInvalidUTF8, ErrDuplicateKey, ErrNumberRange, ErrTrailingData, ErrTooDeep} {
		if errors.Is(err, s) {
			return s
		}
	}
	return ErrNotCanonicalizable
}
