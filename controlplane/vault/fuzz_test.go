package vault

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzSeed builds a key-file vault with one entry of each kind and returns
// its file bytes and the key-encryption key's source (the key file bytes).
func fuzzSeed(f *testing.F) (file, keyFile []byte) {
	f.Helper()
	cfg, _ := testConfig(f)
	cfg.Logger = nil
	keyPath := filepath.Join(f.TempDir(), "vault.key")
	v := mustNew(f, cfg)
	if err := v.InitWithKeyFile(keyPath); err != nil {
		f.Fatal(err)
	}
	creds, _ := sampleCredentials(f)
	for name, c := range creds {
		if err := v.Put(name, c); err != nil {
			f.Fatal(err)
		}
	}
	file, err := os.ReadFile(cfg.Path)
	if err != nil {
		f.Fatal(err)
	}
	keyFile, err = os.ReadFile(keyPath)
	if err != nil {
		f.Fatal(err)
	}
	return file, keyFile
}

// FuzzParseFile: no input makes the parser panic, and whatever it accepts
// survives an encode/decode round trip unchanged.
func FuzzParseFile(f *testing.F) {
	file, _ := fuzzSeed(f)
	f.Add(file)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"kdf":{"algorithm":"argon2id","time":4294967295,"memory_kib":4294967295,"threads":255}}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	pass, _, _ := newUnlocked(f, "pass")
	if data, err := os.ReadFile(pass.path); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseFile(data)
		if err != nil {
			if p != nil {
				t.Fatalf("parseFile returned a file and an error")
			}
			return
		}
		out, err := p.marshal()
		if err != nil {
			t.Fatalf("marshal() of a parsed file = %v", err)
		}
		q, err := parseFile(out)
		if err != nil {
			t.Fatalf("parseFile(marshal(parseFile(x))) = %v", err)
		}
		if diff := cmp.Diff(p, q); diff != "" {
			t.Fatalf("round trip changed the file (-first +second):\n%s", diff)
		}
	})
}

// FuzzOpenVault runs a corrupted key-file vault through everything Unlock
// and Get do with the right key: nothing panics, and only the untouched
// file unlocks.
func FuzzOpenVault(f *testing.F) {
	file, keyFile := fuzzSeed(f)
	f.Add(file)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseFile(data)
		if err != nil {
			return
		}
		if p.KDF.Algorithm != algKeyFile {
			return // argon2id with fuzzed parameters is slow, and covered by FuzzParseFile
		}
		kek, err := kekFromKeyFile(keyFile, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		dek, err := openCheck(p, kek)
		if err != nil {
			return
		}
		macErr := verifyMAC(p, dek)
		for _, name := range p.names() {
			c, err := openEntry(p.ID, name, p.Entries[name], dek)
			if err == nil && c.Kind == "" {
				t.Fatalf("openEntry(%q) returned a credential without a kind", name)
			}
		}
		if macErr == nil {
			// Accepted by the MAC: must be the seed, semantically.
			seed, err := parseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(seed, p) && !bytes.Equal(data, file) {
				t.Fatalf("MAC accepted a file that differs from the one latch wrote")
			}
		}
	})
}
