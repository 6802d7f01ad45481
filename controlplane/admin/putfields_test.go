package admin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/vault"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// TestPutFields: a VaultPutRequest's fields reach the credential under
// their names, whether in a message field of that name (bytes and lists
// included) or in the fields map; a field given both ways is refused.
func TestPutFields(t *testing.T) {
	tests := []struct {
		name    string
		req     *controlplanev1.VaultPutRequest
		want    vault.Fields
		wantErr string
	}{
		{"named fields", &controlplanev1.VaultPutRequest{Name: "n", Kind: "basic", Username: "u", Password: "p"},
			vault.Fields{"username": "u", "password": "p"}, ""},
		{"bytes and lists", &controlplanev1.VaultPutRequest{Name: "n", Kind: "x", PrivateKey: []byte("pem"), Scopes: []string{"a", "b"}},
			vault.Fields{"private_key": "pem", "scopes": vault.JoinList([]string{"a", "b"})}, ""},
		{"fields map", &controlplanev1.VaultPutRequest{Name: "n", Kind: "hmac", Fields: map[string]string{"key_id": "k", "secret": "s"}},
			vault.Fields{"key_id": "k", "secret": "s"}, ""},
		{"both ways", &controlplanev1.VaultPutRequest{Name: "n", Kind: "bearer", Token: "t", Fields: map[string]string{"token": "t2"}},
			nil, "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := putFields(tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("putFields() = %v, want an error %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "t2") {
					t.Errorf("putFields() error quotes a value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("putFields() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
