package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// TestVaultPutFields: `vault put` reads each kind's fields as its
// registry entry says (a flag, a file named by a flag, the one line on
// stdin, or JSON on stdin) and puts them in the request field of the same
// name; --stdin-json reads any kind as JSON; a flag the kind does not read
// is refused.
func TestVaultPutFields(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(keyFile, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		kind      string
		flags     map[string]string
		stdinJSON bool
		stdin     string
		want      *controlplanev1.VaultPutRequest
		wantErr   string
	}{
		{name: "bearer prompt", kind: "bearer", stdin: "tok-1\n", want: &controlplanev1.VaultPutRequest{Token: "tok-1"}},
		{name: "basic flag and prompt", kind: "basic", flags: map[string]string{"username": "u"}, stdin: "pw\n",
			want: &controlplanev1.VaultPutRequest{Username: "u", Password: "pw"}},
		{name: "ssh key file", kind: "ssh_key", flags: map[string]string{"key-file": keyFile}, want: &controlplanev1.VaultPutRequest{PrivateKey: []byte("PEM")}},
		{name: "bearer as JSON", kind: "bearer", stdinJSON: true, stdin: `{"token":"tok-2"}`, want: &controlplanev1.VaultPutRequest{Token: "tok-2"}},
		{name: "oauth2 JSON list", kind: "oauth2_client_credentials", stdin: `{"client_id":"c","scopes":["a","b"]}`,
			want: &controlplanev1.VaultPutRequest{ClientId: "c", Scopes: []string{"a", "b"}}},
		{name: "flag of another kind", kind: "bearer", flags: map[string]string{"header": "X-K"}, stdin: "tok\n", wantErr: "--header is not read for --kind bearer"},
		{name: "unknown kind", kind: "magic", wantErr: "--kind must be one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := map[string]*string{}
			for _, n := range fieldFlagNames() {
				v := tt.flags[n]
				flags[n] = &v
			}
			env := &Env{Stdin: strings.NewReader(tt.stdin), Stdout: io.Discard, Stderr: io.Discard}
			fields, err := readFields(env, tt.kind, flags, tt.stdinJSON)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("readFields() = %v, want an error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			req := &controlplanev1.VaultPutRequest{}
			setPutFields(req, fields)
			if diff := cmp.Diff(tt.want, req, protocmp.Transform()); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
