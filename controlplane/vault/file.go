package vault

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"

	"golang.org/x/crypto/nacl/secretbox"

	"github.com/latchhq/latch/internal/atomicfile"
)

// Format constants; doc.go describes the file.
const (
	fileVersion = 1

	algArgon2id = "argon2id"
	algKeyFile  = "keyfile"

	idSize    = 16
	saltSize  = 16
	keySize   = 32
	nonceSize = 24

	// checkMagic starts the plaintext of the check value.
	checkMagic = "latch-vault-check-v1\x00"
	checkSize  = nonceSize + secretbox.Overhead + len(checkMagic) + idSize + keySize

	// minSealed is the size of a sealed empty message.
	minSealed = nonceSize + secretbox.Overhead
	// maxSealed bounds one sealed entry (an SSH key is a few KiB).
	maxSealed = 1 << 20
	// maxFileSize bounds what New reads.
	maxFileSize = 64 << 20
	// maxEntries bounds the number of credentials in one file.
	maxEntries = 100_000
)

// nameRE is the credential name syntax.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// ValidName reports whether name is a valid credential name:
// ^[a-z0-9][a-z0-9_.-]{0,63}$.
func ValidName(name string) bool { return nameRE.MatchString(name) }

func checkName(name string) error {
	if !ValidName(name) {
		// The bad name is not quoted: a caller may have passed a secret
		// where the name belongs.
		return fmt.Errorf("%w: want 1-64 characters of a-z 0-9 _ . - starting with a letter or digit", ErrInvalidName)
	}
	return nil
}

// fileV1 is the JSON document on disk. []byte fields are standard base64.
type fileV1 struct {
	Version int               `json:"version"`
	ID      []byte            `json:"id"`
	KDF     kdfV1             `json:"kdf"`
	Check   []byte            `json:"check"`
	Entries map[string][]byte `json:"entries"`
	MAC     []byte            `json:"mac"`
}

// kdfV1 records how the key-encryption key is made.
type kdfV1 struct {
	Algorithm string `json:"algorithm"`
	Salt      []byte `json:"salt,omitempty"`
	Time      uint32 `json:"time,omitempty"`
	MemoryKiB uint32 `json:"memory_kib,omitempty"`
	Threads   uint8  `json:"threads,omitempty"`
}

func (k kdfV1) params() Params {
	return Params{Time: k.Time, MemoryKiB: k.MemoryKiB, Threads: k.Threads}
}

// parseFile decodes and checks the structure of a vault file. It checks
// everything that can be checked without the key; the MAC and the sealed
// contents are checked at Unlock and Get. Errors wrap ErrCorrupt.
func parseFile(data []byte) (*fileV1, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%w: file larger than %d bytes", ErrCorrupt, maxFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f fileV1
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: not a vault file: %v", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the vault document", ErrCorrupt)
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads version %d", ErrCorrupt, f.Version, fileVersion)
	}
	if len(f.ID) != idSize {
		return nil, fmt.Errorf("%w: id is %d bytes, want %d", ErrCorrupt, len(f.ID), idSize)
	}
	switch f.KDF.Algorithm {
	case algArgon2id:
		if len(f.KDF.Salt) != saltSize {
			return nil, fmt.Errorf("%w: kdf salt is %d bytes, want %d", ErrCorrupt, len(f.KDF.Salt), saltSize)
		}
		if err := f.KDF.params().validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	case algKeyFile:
		if f.KDF.Salt != nil || f.KDF.Time != 0 || f.KDF.MemoryKiB != 0 || f.KDF.Threads != 0 {
			return nil, fmt.Errorf("%w: keyfile kdf carries argon2 parameters", ErrCorrupt)
		}
	default:
		return nil, fmt.Errorf("%w: unknown kdf algorithm; want %s or %s", ErrCorrupt, algArgon2id, algKeyFile)
	}
	if len(f.Check) != checkSize {
		return nil, fmt.Errorf("%w: check value is %d bytes, want %d", ErrCorrupt, len(f.Check), checkSize)
	}
	if len(f.MAC) != macSize {
		return nil, fmt.Errorf("%w: mac is %d bytes, want %d", ErrCorrupt, len(f.MAC), macSize)
	}
	if len(f.Entries) > maxEntries {
		return nil, fmt.Errorf("%w: %d entries, at most %d", ErrCorrupt, len(f.Entries), maxEntries)
	}
	if f.Entries == nil {
		f.Entries = map[string][]byte{}
	}
	for name, sealed := range f.Entries {
		if !ValidName(name) {
			return nil, fmt.Errorf("%w: entry with an invalid name", ErrCorrupt)
		}
		if len(sealed) < minSealed || len(sealed) > maxSealed {
			return nil, fmt.Errorf("%w: entry %q is %d bytes, want %d to %d", ErrCorrupt, name, len(sealed), minSealed, maxSealed)
		}
	}
	return &f, nil
}

func (f *fileV1) marshal() ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("vault: encode file: %w", err)
	}
	return append(b, '\n'), nil
}

// clone copies f deeply enough to change its entries and MAC.
func (f *fileV1) clone() *fileV1 {
	g := *f
	g.Entries = make(map[string][]byte, len(f.Entries)+1)
	for k, v := range f.Entries {
		g.Entries[k] = v
	}
	return &g
}

// names returns the entry names, sorted.
func (f *fileV1) names() []string {
	names := make([]string, 0, len(f.Entries))
	for n := range f.Entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// macInput is the unambiguous encoding of every field of f but the MAC:
// each field length-prefixed, entries in name order.
func (f *fileV1) macInput() []byte {
	var b []byte
	field := func(p []byte) {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	num := func(n uint64) { b = binary.AppendUvarint(b, n) }
	field([]byte("latch-vault-mac-v1"))
	num(uint64(f.Version))
	field(f.ID)
	field([]byte(f.KDF.Algorithm))
	field(f.KDF.Salt)
	num(uint64(f.KDF.Time))
	num(uint64(f.KDF.MemoryKiB))
	num(uint64(f.KDF.Threads))
	field(f.Check)
	num(uint64(len(f.Entries)))
	for _, n := range f.names() {
		field([]byte(n))
		field(f.Entries[n])
	}
	return b
}

// writeAtomic writes data to path with mode 0600, durably, through
// atomicfile: a crash leaves the old file or the new one, never a mix.
// noClobber installs it only if path does not exist yet (ErrExists).
func writeAtomic(path string, data []byte, noClobber bool) error {
	if !noClobber {
		if err := atomicfile.Write(path, data, 0o600, true); err != nil {
			return fmt.Errorf("vault: write %s: %w", path, err)
		}
		return nil
	}
	if err := atomicfile.WriteNew(path, data, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, path)
		}
		return fmt.Errorf("vault: write %s: %w", path, err)
	}
	return nil
}
