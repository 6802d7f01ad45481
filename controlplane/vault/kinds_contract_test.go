package vault_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/kindtest"
)

// TestBuiltInKindsContract runs the kind contract (kindtest.Run) over every
// built-in kind, each with every field set.
func TestBuiltInKindsContract(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"access-token-0123456789","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(tokens.Close)
	samples := map[vault.Kind]vault.Fields{
		vault.KindBearer: {"token": "tok-contract-0123456789"},
		vault.KindBasic:  {"username": "deployer", "password": "pw-contract-0123456789"},
		vault.KindHeader: {"header": "X-Api-Key", "value": "key-contract-0123456789"},
		vault.KindSSHKey: {"private_key": string(pem.EncodeToMemory(block))},
		vault.KindAWSSigV4: {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			"session_token": "FwoGZXIvYXdzEJr-session-0123", "region": "eu-west-1", "service": "execute-api"},
		vault.KindOAuth2ClientCredentials: {"token_url": tokens.URL + "/token", "client_id": "latch", "client_secret": "client-secret-0123456789",
			"scopes": vault.JoinList([]string{"a:read", "b:write"}), "audience": "https://api.example.com"},
	}
	for _, k := range vault.Kinds() {
		fields, ok := samples[k.Name()]
		if !ok {
			// Only the built-ins are registered in this test binary: a kind
			// with no sample would pass without running the contract.
			t.Errorf("built-in kind %s has no sample in TestBuiltInKindsContract: add one (every field set) so it runs kindtest.Run", k.Name())
			continue
		}
		t.Run(string(k.Name()), func(t *testing.T) {
			kindtest.Run(t, k, vault.Credential{Kind: k.Name(), Fields: fields})
		})
		delete(samples, k.Name())
	}
	for name := range samples {
		t.Errorf("built-in kind %s is not registered", name)
	}
}
