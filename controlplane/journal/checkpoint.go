package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// maxCheckpointSize bounds the checkpoint notes OpenCheckpoint parses.
const maxCheckpointSize = 1 << 16

// timeExtension prefixes the optional extension line carrying the time.
const timeExtension = "time "

// Checkpoint is an opened (signature-verified) checkpoint.
type Checkpoint struct {
	// Origin is the journal's origin line; it equals the key name.
	Origin string
	// Size is the number of leaves the checkpoint covers.
	Size int64
	// Root is the root hash of the tree of the first Size leaves.
	Root tlog.Hash
	// Time is the signing time, zero when the checkpoint carries none.
	Time time.Time
}

// GenerateKey returns a new Ed25519 note key pair named origin, in the
// golang.org/x/mod/sumdb/note text forms. The signer key is a secret: keep
// it in the vault; publish the verifier key. origin must be a valid note
// key name (non-empty, no spaces or '+'), e.g. "latch.example/activity".
func GenerateKey(origin string) (signerKey, verifierKey string, err error) {
	if !validOrigin(origin) {
		return "", "", fmt.Errorf("%w: origin %q must be non-empty UTF-8 without spaces, control characters or '+'", ErrBadKey, origin)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", "", fmt.Errorf("%w: generate key for origin %q: %v", ErrBadKey, origin, err)
	}
	return skey, vkey, nil
}

// Signer signs checkpoints of one journal. It is safe for concurrent use.
type Signer struct {
	signer note.Signer
}

// NewSigner parses a signer key made by GenerateKey. The key's name is
// the origin of every checkpoint it signs.
func NewSigner(skey string) (*Signer, error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		// Never echo the key: it is a secret.
		return nil, fmt.Errorf("%w: signer key does not parse: %v", ErrBadKey, err)
	}
	return &Signer{signer: s}, nil
}

// Origin is the origin line of the checkpoints s signs.
func (s *Signer) Origin() string { return s.signer.Name() }

// Sign returns the signed checkpoint note for a tree of size leaves with
// the given root hash. A zero t omits the time extension line; otherwise
// it is written in UTC with nanoseconds.
func (s *Signer) Sign(size int64, root tlog.Hash, t time.Time) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrMalformedCheckpoint, size)
	}
	text := formatCheckpoint(s.signer.Name(), size, root, t)
	msg, err := note.Sign(&note.Note{Text: text}, s.signer)
	if err != nil {
		return nil, fmt.Errorf("journal: sign checkpoint of size %d: %w", size, err)
	}
	return msg, nil
}

func formatCheckpoint(origin string, size int64, root tlog.Hash, t time.Time) string {
	var b strings.Builder
	b.WriteString(origin)
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(size, 10))
	b.WriteByte('\n')
	b.WriteString(base64.StdEncoding.EncodeToString(root[:]))
	b.WriteByte('\n')
	if !t.IsZero() {
		b.WriteString(timeExtension)
		b.WriteString(t.UTC().Format(time.RFC3339Nano))
		b.WriteByte('\n')
	}
	return b.String()
}

// OpenCheckpoint verifies msg, a signed checkpoint note, under verifierKey
// and parses it. It fails with ErrBadSignature when the note is not signed
// by that key (or the signature is invalid), ErrMalformedCheckpoint when
// the note or its text does not parse or its origin is not the key's name,
// and ErrBadKey when verifierKey does not parse.
func OpenCheckpoint(msg []byte, verifierKey string) (*Checkpoint, error) {
	v, err := note.NewVerifier(verifierKey)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key does not parse: %v", ErrBadKey, err)
	}
	return openCheckpoint(msg, v)
}

func openCheckpoint(msg []byte, v note.Verifier) (*Checkpoint, error) {
	if len(msg) > maxCheckpointSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformedCheckpoint, len(msg), maxCheckpointSize)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return nil, fmt.Errorf("%w: no signature by %q", ErrBadSignature, v.Name())
		case errors.As(err, &invalid):
			return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
		default:
			return nil, fmt.Errorf("%w: %v", ErrMalformedCheckpoint, err)
		}
	}
	c, err := parseCheckpoint(n.Text)
	if err != nil {
		return nil, err
	}
	if c.Origin != v.Name() {
		return nil, fmt.Errorf("%w: origin %q is not the key name %q", ErrMalformedCheckpoint, c.Origin, v.Name())
	}
	return c, nil
}

// parseCheckpoint parses the checkpoint text (the signed body of the note,
// ending in a newline).
func parseCheckpoint(text string) (*Checkpoint, error) {
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("%w: text does not end in a newline", ErrMalformedCheckpoint)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return nil, fmt.Errorf("%w: %d lines, want origin, size and root hash", ErrMalformedCheckpoint, len(lines))
	}
	c := &Checkpoint{Origin: lines[0]}
	if c.Origin == "" {
		return nil, fmt.Errorf("%w: empty origin line", ErrMalformedCheckpoint)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || lines[1] != strconv.FormatInt(size, 10) {
		return nil, fmt.Errorf("%w: size line %q is not a decimal tree size", ErrMalformedCheckpoint, lines[1])
	}
	c.Size = size
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return nil, fmt.Errorf("%w: root hash line %q is not a base64 SHA-256 hash", ErrMalformedCheckpoint, lines[2])
	}
	copy(c.Root[:], root)
	for _, ext := range lines[3:] {
		if ext == "" {
			return nil, fmt.Errorf("%w: empty extension line", ErrMalformedCheckpoint)
		}
		rest, ok := strings.CutPrefix(ext, timeExtension)
		if !ok {
			continue // unknown extension lines are allowed by C2SP
		}
		if !c.Time.IsZero() {
			return nil, fmt.Errorf("%w: two time lines", ErrMalformedCheckpoint)
		}
		t, err := time.Parse(time.RFC3339Nano, rest)
		if err != nil || t.IsZero() {
			return nil, fmt.Errorf("%w: time line %q is not an RFC 3339 time", ErrMalformedCheckpoint, ext)
		}
		c.Time = t
	}
	return c, nil
}

// peekCheckpoint parses the text of a note without verifying it, to name
// a checkpoint whose signature failed. ok is false when it does not parse.
func peekCheckpoint(msg []byte) (c *Checkpoint, ok bool) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 || len(msg) > maxCheckpointSize {
		return nil, false
	}
	c, err := parseCheckpoint(string(msg[:i+1]))
	return c, err == nil
}

// validOrigin reports whether origin can be both a note key name and a
// checkpoint origin line.
func validOrigin(origin string) bool {
	if origin == "" || !utf8.ValidString(origin) || strings.Contains(origin, "+") {
		return false
	}
	for _, r := range origin {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}
