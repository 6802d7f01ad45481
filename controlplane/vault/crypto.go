package vault

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/nacl/secretbox"
)

const macSize = sha256.Size

// Params are the argon2id parameters used to turn a passphrase into the
// key-encryption key. They are recorded in the vault file at Init, and
// Unlock uses the recorded ones.
type Params struct {
	// Time is the number of passes over memory.
	Time uint32
	// MemoryKiB is the memory used, in KiB.
	MemoryKiB uint32
	// Threads is the degree of parallelism.
	Threads uint8
}

// DefaultParams are used when Config.KDF is zero: 3 passes over 64 MiB with
// 2 threads (about 0.1-0.3 s on a small server), above the RFC 9106 second
// recommendation of 64 MiB.
func DefaultParams() Params { return Params{Time: 3, MemoryKiB: 64 * 1024, Threads: 2} }

// FastInsecureParams are cheap parameters for tests: one pass over 1 MiB.
// Never use them for a real vault: they make passphrase guessing cheap.
func FastInsecureParams() Params { return Params{Time: 1, MemoryKiB: 1024, Threads: 1} }

// Bounds on parameters, so a damaged or hostile file cannot make Unlock
// allocate without limit.
const (
	maxTime      = 64
	maxMemoryKiB = 4 << 20 // 4 GiB
)

func (p Params) validate() error {
	switch {
	case p.Time < 1 || p.Time > maxTime:
		return fmt.Errorf("argon2id time %d out of range 1..%d", p.Time, maxTime)
	case p.Threads < 1:
		return fmt.Errorf("argon2id threads must be at least 1")
	case p.MemoryKiB < 8*uint32(p.Threads) || p.MemoryKiB > maxMemoryKiB:
		return fmt.Errorf("argon2id memory %d KiB out of range %d..%d", p.MemoryKiB, 8*uint32(p.Threads), maxMemoryKiB)
	}
	return nil
}

// kekFromPassphrase derives the key-encryption key with argon2id.
func kekFromPassphrase(passphrase []byte, k kdfV1) *[keySize]byte {
	raw := argon2.IDKey(passphrase, k.Salt, k.Time, k.MemoryKiB, k.Threads, keySize)
	var kek [keySize]byte
	copy(kek[:], raw)
	clear(raw)
	return &kek
}

// kekFromKeyFile derives the key-encryption key from key-file bytes, bound
// to this vault's id so two vaults sharing one key file still use
// different keys.
func kekFromKeyFile(keyFile []byte, id []byte) (*[keySize]byte, error) {
	raw, err := hkdf.Key(sha256.New, keyFile, id, "latch/vault/kek/keyfile", keySize)
	if err != nil {
		return nil, fmt.Errorf("vault: derive key: %w", err)
	}
	var kek [keySize]byte
	copy(kek[:], raw)
	clear(raw)
	return &kek, nil
}

// seal encrypts msg under key with a fresh random nonce: nonce || box.
func seal(msg []byte, key *[keySize]byte) ([]byte, error) {
	var nonce [nonceSize]byte
	if _, err := io.ReadFull(rand.Reader, nonce[:]); err != nil {
		return nil, fmt.Errorf("vault: read random nonce: %w", err)
	}
	return secretbox.Seal(nonce[:], msg, &nonce, key), nil
}

// open reverses seal; false when the box was not sealed under key or was
// modified (Poly1305 verification is constant-time).
func open(sealed []byte, key *[keySize]byte) ([]byte, bool) {
	if len(sealed) < minSealed {
		return nil, false
	}
	var nonce [nonceSize]byte
	copy(nonce[:], sealed[:nonceSize])
	return secretbox.Open(nil, sealed[nonceSize:], &nonce, key)
}

// sealCheck makes the check value: the data key sealed under the
// key-encryption key, after a magic string and the vault id.
func sealCheck(dek, kek *[keySize]byte, id []byte) ([]byte, error) {
	msg := make([]byte, 0, len(checkMagic)+idSize+keySize)
	msg = append(msg, checkMagic...)
	msg = append(msg, id...)
	msg = append(msg, dek[:]...)
	defer clear(msg)
	return seal(msg, kek)
}

// openCheck returns the data key if kek opens the check value of f.
func openCheck(f *fileV1, kek *[keySize]byte) (*[keySize]byte, error) {
	msg, ok := open(f.Check, kek)
	if !ok {
		return nil, ErrWrongPassphrase
	}
	defer clear(msg)
	prefix := len(checkMagic) + idSize
	want := append([]byte(checkMagic), f.ID...)
	if len(msg) != prefix+keySize || subtle.ConstantTimeCompare(msg[:prefix], want) != 1 {
		return nil, fmt.Errorf("%w: check value does not belong to this vault", ErrCorrupt)
	}
	var dek [keySize]byte
	copy(dek[:], msg[prefix:])
	return &dek, nil
}

// subKey derives a key for one internal purpose from the data key.
func subKey(dek *[keySize]byte, id []byte, info string, n int) []byte {
	k, err := hkdf.Key(sha256.New, dek[:], id, info, n)
	if err != nil {
		// hkdf.Key fails only for an output length past 255*32 bytes; n is
		// at most 64 here.
		panic("vault: hkdf: " + err.Error())
	}
	return k
}

// fileMAC authenticates the whole file: header, check value and the set of
// entries, so entries removed, added or replaced by older ones are seen at
// Unlock.
func fileMAC(f *fileV1, dek *[keySize]byte) []byte {
	k := subKey(dek, f.ID, "latch/vault/internal/file-mac", keySize)
	defer clear(k)
	m := hmac.New(sha256.New, k)
	m.Write(f.macInput())
	return m.Sum(nil)
}

func verifyMAC(f *fileV1, dek *[keySize]byte) error {
	if !hmac.Equal(fileMAC(f, dek), f.MAC) {
		return fmt.Errorf("%w: file authentication failed (entries added, removed or altered outside latch); restore the vault file from a backup", ErrCorrupt)
	}
	return nil
}

// The sealed plaintext of one entry is one JSON object: "vault" (the vault
// id) and "name" bind the ciphertext to its place (a box copied to another
// name or another vault fails to open as that name), "kind" names the
// kind, and each set field of the kind is a key of its own, encoded as its
// FieldType says (a string, base64 bytes, an array of strings).

func sealEntry(id []byte, name string, c Credential, dek *[keySize]byte) ([]byte, error) {
	p := map[string]any{"vault": id, "name": name, "kind": c.Kind}
	k, _ := Lookup(c.Kind) // Put validated c: k is registered
	for fname, v := range c.Fields {
		if v == "" {
			continue
		}
		f, _ := field(k, fname)
		switch f.Type {
		case FieldBytes:
			p[fname] = []byte(v)
		case FieldList:
			p[fname] = ListValue(v)
		default:
			p[fname] = v
		}
	}
	msg, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("vault: encode credential: %w", err)
	}
	defer clear(msg)
	return seal(msg, dek)
}

func openEntry(id []byte, name string, sealed []byte, dek *[keySize]byte) (Credential, error) {
	msg, ok := open(sealed, dek)
	if !ok {
		return Credential{}, fmt.Errorf("%w: entry %q does not decrypt (modified or sealed under another key)", ErrCorrupt, name)
	}
	defer clear(msg)
	// The decoder's messages may quote plaintext: none is passed on.
	notValid := fmt.Errorf("%w: entry %q holds no valid credential", ErrCorrupt, name)
	var p map[string]json.RawMessage
	if err := json.Unmarshal(msg, &p); err != nil {
		return Credential{}, notValid
	}
	var head struct {
		Vault []byte
		Name  string
		Kind  Kind
	}
	for key, dst := range map[string]any{"vault": &head.Vault, "name": &head.Name, "kind": &head.Kind} {
		if raw, ok := p[key]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return Credential{}, notValid
			}
		}
		delete(p, key)
	}
	if subtle.ConstantTimeCompare(head.Vault, id) != 1 || head.Name != name {
		return Credential{}, fmt.Errorf("%w: entry %q was sealed for another name or vault (entries moved or swapped)", ErrCorrupt, name)
	}
	// Not validated again: Put validated it and the box is authenticated,
	// and a stricter Validate in a later release must not make stored
	// credentials unreadable. A kind no longer registered keeps its text
	// fields (HTTP and SSH then refuse it by name).
	k, known := Lookup(head.Kind)
	c := Credential{Kind: head.Kind, Fields: make(Fields, len(p))}
	for key, raw := range p {
		var f Field
		if known {
			if f, ok = field(k, key); !ok {
				return Credential{}, notValid
			}
		}
		var err error
		switch f.Type {
		case FieldBytes:
			var b []byte
			err = json.Unmarshal(raw, &b)
			c.Fields[key] = string(b)
			clear(b)
		case FieldList:
			var l []string
			err = json.Unmarshal(raw, &l)
			c.Fields[key] = JoinList(l)
		default:
			var s string
			err = json.Unmarshal(raw, &s)
			c.Fields[key] = s
		}
		if err != nil {
			return Credential{}, notValid
		}
	}
	return c, nil
}

// GenerateKeyFile writes 32 random bytes to a new file at path with mode
// 0600, for dev vaults (InitWithKeyFile). It refuses to overwrite: an
// existing file gives an error wrapping ErrExists.
func GenerateKeyFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("vault: create key file directory: %w", err)
	}
	var key [keySize]byte
	defer clear(key[:])
	if _, err := io.ReadFull(rand.Reader, key[:]); err != nil {
		return fmt.Errorf("vault: read random key: %w", err)
	}
	return writeAtomic(path, key[:], true)
}

// readKeyFile reads a key file: exactly 32 bytes, not readable by group or
// others.
func readKeyFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vault: key file: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("vault: key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("vault: key file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("vault: key file %s has mode %#o, readable by others; run chmod 600 %s", path, perm, path)
	}
	key := make([]byte, keySize+1)
	n, err := io.ReadFull(fh, key)
	if n != keySize || !errors.Is(err, io.ErrUnexpectedEOF) {
		clear(key)
		return nil, fmt.Errorf("vault: key file %s must hold exactly %d bytes; make one with GenerateKeyFile", path, keySize)
	}
	return key[:keySize], nil
}
