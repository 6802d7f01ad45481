package vault

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/ssh"

	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/internal/testing/testlog"
)

// testConfig is a Config for a vault file in a fresh temp dir with cheap
// argon2id parameters.
func testConfig(t testing.TB) (Config, *testlog.Logger) {
	t.Helper()
	log := testlog.New(t, hclog.Trace)
	return Config{
		Path:   filepath.Join(t.TempDir(), "vault.json"),
		Logger: log,
		KDF:    FastInsecureParams(),
	}, log
}

func mustNew(t testing.TB, cfg Config) *Vault {
	t.Helper()
	v, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%q) = %v", cfg.Path, err)
	}
	return v
}

// newUnlocked returns an initialized, unlocked passphrase vault.
func newUnlocked(t testing.TB, passphrase string) (*Vault, Config, *testlog.Logger) {
	t.Helper()
	cfg, buf := testConfig(t)
	v := mustNew(t, cfg)
	if err := v.Init([]byte(passphrase)); err != nil {
		t.Fatalf("Init() = %v", err)
	}
	return v, cfg, buf
}

// sshKeyPEM returns a fresh unencrypted OpenSSH ed25519 private key.
func sshKeyPEM(t testing.TB) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "test key")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// sampleCredentials returns one credential of each kind with distinctive
// secret values, and those values.
func sampleCredentials(t testing.TB) (map[string]Credential, []string) {
	t.Helper()
	key := sshKeyPEM(t)
	creds := map[string]Credential{
		"deploy-api":  {Kind: KindBearer, Fields: Fields{"token": "tok-SECRET-bearer-7f3a9c"}},
		"payments":    {Kind: KindBasic, Fields: Fields{"username": "svc-payments", "password": "pw-SECRET-basic-41d2"}},
		"metrics.key": {Kind: KindHeader, Fields: Fields{"header": "X-Api-Key", "value": "hdr-SECRET-value-e81b"}},
		"db_host":     {Kind: KindSSHKey, Fields: Fields{"private_key": string(key)}},
	}
	// The middle of the PEM body is key material.
	body := string(key)
	keyPart := body[len(body)/2-20 : len(body)/2+20]
	secrets := []string{"tok-SECRET-bearer-7f3a9c", "pw-SECRET-basic-41d2", "hdr-SECRET-value-e81b", keyPart, body}
	return creds, secrets
}

// assertNoSecret fails if any secret, raw or base64-encoded, is in s.
func assertNoSecret(t testing.TB, what, s string, secrets []string) {
	t.Helper()
	for _, sec := range secrets {
		for _, form := range []string{sec, base64.StdEncoding.EncodeToString([]byte(sec)), base64.RawStdEncoding.EncodeToString([]byte(sec))} {
			if strings.Contains(s, form) {
				t.Errorf("%s contains a secret (%d bytes)", what, len(sec))
			}
		}
	}
}

// encryptedSSHKey returns a passphrase-protected OpenSSH private key.
func encryptedSSHKey(t testing.TB) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "test key", []byte("key passphrase"))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// validateCase is one change to a valid credential and whether Validate
// accepts the result.
type validateCase struct {
	name string
	mod  func(*Credential)
	ok   bool
}

// checkValidate applies each case to a fresh base() and checks Validate's
// verdict, and that no error quotes secret.
func checkValidate(t *testing.T, base func() Credential, secret string, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		c := base()
		tt.mod(&c)
		err := c.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: Validate() error quotes the secret", tt.name)
		}
	}
}

// newDispatcher is an HTTP dispatcher logging to log, closed when the test
// ends: credentials are tested as the HTTP channel applies them.
func newDispatcher(t testing.TB, log hclog.Logger) *httpdispatch.Dispatcher {
	t.Helper()
	d, err := httpdispatch.New(httpdispatch.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}
