package datadir

import "path/filepath"

// Key names in a PostgreSQL store's latch_keys.
const (
	FingerprintKey = "fingerprint"
	JournalKey     = "journal"
)

// DB is the Badger store's directory.
func DB(dir string) string { return filepath.Join(dir, "db") }

// Keys is the directory of the key files.
func Keys(dir string) string { return filepath.Join(dir, "keys") }

// Key is the key file name in Keys (fingerprint.key, journal.key).
func Key(dir, name string) string { return filepath.Join(dir, "keys", name) }

// Verifier is the journal's verifier (public) key.
func Verifier(dir string) string { return Key(dir, "journal.pub") }

// DevVaultKey is the key file latch dev creates and unlocks the vault with.
func DevVaultKey(dir string) string { return Key(dir, "vault.key") }

// Vault is the vault file.
func Vault(dir string) string { return filepath.Join(dir, "vault.json") }

// Socket is the API's unix socket.
func Socket(dir string) string { return filepath.Join(dir, "control.sock") }

// LegacyTokens is the token file of an older release, migrated at start.
func LegacyTokens(dir string) string { return filepath.Join(dir, "tokens.json") }

// UpstreamPids holds the pid files of the stdio upstream MCP servers.
func UpstreamPids(dir string) string { return filepath.Join(dir, "upstream-pids") }

// DevInfo is what latch dev serves, as JSON (devstack.Info).
func DevInfo(dir string) string { return filepath.Join(dir, "dev.json") }

// DevToken is the dev actor's bearer token.
func DevToken(dir string) string { return filepath.Join(dir, "dev-token") }

// AgentSocket is the socket of latch dev's embedded host agent.
func AgentSocket(dir string) string { return filepath.Join(dir, "hostagent.sock") }

// AgentData is the data dir of latch dev's embedded host agent (its
// markers).
func AgentData(dir string) string { return filepath.Join(dir, "hostagent") }

// FrontState is the state dir of latch dev's MCP front (mcpfront
// Config.StateDir: the delivery reports it keeps while the control plane
// is away).
func FrontState(dir string) string { return filepath.Join(dir, "front") }
