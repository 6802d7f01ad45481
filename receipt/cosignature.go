package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// A witness (c2sp.org/tlog-witness) co-signs a checkpoint it has checked
// to be consistent with every earlier one of the same log it saw. Its
// cosignature is one more signature line on the checkpoint note, in the
// c2sp.org/tlog-cosignature "cosignature/v1" form: the Ed25519 signature
// of
//
//	cosignature/v1
//	time <seconds since the epoch>
//	<the checkpoint text>
//
// encoded as the 8-byte big-endian time followed by the 64-byte signature.
// Its verifier key is "<name>+<hash>+<base64(0x04 || public key)>" (a
// journal key uses 0x01).

// algCosignatureV1 is the signed-note key type of cosignature/v1 keys.
const algCosignatureV1 = 0x04

// ErrWitness: the checkpoint carries no valid cosignature of a witness
// the verifier asked for.
var ErrWitness = errors.New("receipt: the checkpoint is not co-signed by the witness")

// WitnessVerifier verifies cosignature/v1 cosignatures of one witness.
// It is a note.Verifier, so note.Open checks a cosigned checkpoint with it
// like with any other signer's key.
type WitnessVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

var _ note.Verifier = (*WitnessVerifier)(nil)

// NewWitnessVerifier parses a witness's cosignature verifier key
// ("<name>+<hash>+<key>", as the witness prints it).
func NewWitnessVerifier(vkey string) (*WitnessVerifier, error) {
	vkey = strings.TrimSpace(vkey)
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	hash, err1 := strconv.ParseUint(hash16, 16, 32)
	key, err2 := base64.StdEncoding.DecodeString(key64)
	if !ok1 || !ok2 || name == "" || len(hash16) != 8 || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: witness key %q is not <name>+<hash>+<base64 key>", ErrBadKey, vkey)
	}
	if len(key) != 1+ed25519.PublicKeySize || key[0] != algCosignatureV1 {
		return nil, fmt.Errorf("%w: witness key %q is not a cosignature/v1 Ed25519 key (type 0x04); a journal key (type 0x01) is given with --key", ErrBadKey, vkey)
	}
	if strings.ContainsAny(name, " \t\n") {
		return nil, fmt.Errorf("%w: witness key name %q holds white space", ErrBadKey, name)
	}
	if uint32(hash) != keyHash(name, key) {
		return nil, fmt.Errorf("%w: witness key %q: its hash is not the hash of its name and key", ErrBadKey, vkey)
	}
	return &WitnessVerifier{name: name, hash: uint32(hash), key: ed25519.PublicKey(key[1:])}, nil
}

// keyHash is the signed-note key hash: the first four bytes of
// SHA-256(name || "\n" || key), big-endian.
func keyHash(name string, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte("\n"))
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// Name is the witness's name, the name on its signature lines.
func (v *WitnessVerifier) Name() string { return v.name }

// KeyHash is the key hash on its signature lines.
func (v *WitnessVerifier) KeyHash() uint32 { return v.hash }

// Verify reports whether sig is this witness's cosignature of msg, a
// checkpoint text.
func (v *WitnessVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > math.MaxInt64 {
		return false
	}
	return ed25519.Verify(v.key, CosignedMessage(t, msg), sig[8:])
}

// CosignedMessage is the message a cosignature/v1 signature at time t
// (seconds since the epoch) signs for the checkpoint text msg.
func CosignedMessage(t uint64, msg []byte) []byte {
	return fmt.Appendf(nil, "cosignature/v1\ntime %d\n%s", t, msg)
}

// Cosigned is one witness's valid cosignature of a checkpoint.
type Cosigned struct {
	// Witness is the witness's name.
	Witness string
	// Time is when it co-signed (its signature's time, in seconds).
	Time time.Time
}

// checkWitnesses requires a valid cosignature by every witness in keys on
// the checkpoint note msg.
func checkWitnesses(msg []byte, keys []string) ([]Cosigned, error) {
	var out []Cosigned
	for _, k := range keys {
		w, err := NewWitnessVerifier(k)
		if err != nil {
			return nil, err
		}
		c, err := Cosignature(msg, w)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Cosignature returns w's valid cosignature on the checkpoint note msg, or
// an error wrapping ErrWitness when it carries none.
func Cosignature(msg []byte, w *WitnessVerifier) (Cosigned, error) {
	if len(msg) > maxCheckpoint {
		return Cosigned{}, fmt.Errorf("%w: checkpoint is %d bytes, more than %d", ErrMalformed, len(msg), maxCheckpoint)
	}
	n, err := note.Open(msg, note.VerifierList(w))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return Cosigned{}, fmt.Errorf("%w: no cosignature by %q on the checkpoint (the witness never saw it, or refused it)", ErrWitness, w.Name())
		case errors.As(err, &invalid):
			return Cosigned{}, fmt.Errorf("%w: the cosignature by %q does not verify", ErrWitness, w.Name())
		}
		return Cosigned{}, fmt.Errorf("%w: checkpoint does not parse: %w", ErrMalformed, err)
	}
	for _, s := range n.Sigs {
		if s.Name != w.Name() || s.Hash != w.KeyHash() {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(s.Base64)
		if err != nil || len(raw) < 12 {
			continue
		}
		t := binary.BigEndian.Uint64(raw[4:12])
		return Cosigned{Witness: w.Name(), Time: time.Unix(int64(t), 0).UTC()}, nil
	}
	return Cosigned{}, fmt.Errorf("%w: no cosignature by %q on the checkpoint", ErrWitness, w.Name())
}
