package datadir

import (
	"path/filepath"
	"testing"
)

// TestLayout pins the layout: a data dir written by one release is opened
// by the next, so a path that moves strands what the old one wrote.
func TestLayout(t *testing.T) {
	const dir = "/var/lib/latch"
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"DB", DB(dir), "db"},
		{"Keys", Keys(dir), "keys"},
		{"Key", Key(dir, "journal.key"), "keys/journal.key"},
		{"Verifier", Verifier(dir), "keys/journal.pub"},
		{"DevVaultKey", DevVaultKey(dir), "keys/vault.key"},
		{"Vault", Vault(dir), "vault.json"},
		{"Socket", Socket(dir), "control.sock"},
		{"LegacyTokens", LegacyTokens(dir), "tokens.json"},
		{"UpstreamPids", UpstreamPids(dir), "upstream-pids"},
		{"DevInfo", DevInfo(dir), "dev.json"},
		{"DevToken", DevToken(dir), "dev-token"},
		{"AgentSocket", AgentSocket(dir), "hostagent.sock"},
		{"AgentData", AgentData(dir), "hostagent"},
		{"FrontState", FrontState(dir), "front"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := filepath.Join(dir, tc.want); tc.got != want {
				t.Errorf("%s(%q) = %q, want %q", tc.name, dir, tc.got, want)
			}
		})
	}
}
