// Package vault holds the credentials that the control plane injects at
// dispatch (the credential_ref of a tool contract: bearer tokens, basic
// auth, custom headers, SSH private keys), encrypted at rest in one file.
// Only control-plane packages import it; credentials never leave the
// control plane towards agents.
//
// # Keys
//
// A random 32-byte data key (DEK) encrypts the entries. The DEK is sealed
// under a key-encryption key (KEK), made either
//
//   - from a passphrase with argon2id (salt and parameters in the file
//     header; DefaultParams: time 3, 64 MiB, 2 threads), or
//   - for dev, from a 32-byte key file (mode 0600) with HKDF-SHA256 salted
//     by the vault id.
//
// The sealed DEK is the check value: Unlock opens it with the KEK, and a
// wrong passphrase fails Poly1305 verification (constant time), giving
// ErrWrongPassphrase. A DEK independent of the passphrase means the keys
// derived from it (DeriveKey: the sealers of secret arguments and of the
// control plane's keys in a shared store) do not depend on how the vault
// is unlocked.
//
// While locked no key is in memory; Lock zeroes the DEK. Plaintext buffers
// the vault owns are zeroed after use; Go strings in a Credential cannot be
// zeroed, so that is best effort, not a guarantee.
//
// # File format (version 1)
//
// One JSON document, written atomically (temporary file, fsync, rename,
// fsync of the directory) with mode 0600. Byte strings are standard base64.
//
//	{
//	  "version": 1,
//	  "id": "<16 random bytes>",
//	  "kdf": {"algorithm": "argon2id", "salt": "<16 bytes>",
//	          "time": 3, "memory_kib": 65536, "threads": 2},
//	         | {"algorithm": "keyfile"},
//	  "check": "<nonce(24) || secretbox(magic || id || DEK, KEK)>",
//	  "entries": {"<name>": "<nonce(24) || secretbox(payload, DEK)>", ...},
//	  "mac": "<HMAC-SHA256 over every other field>"
//	}
//
// magic is "latch-vault-check-v1\x00". Each entry has its own random 24-byte
// nonce. Its payload is JSON {"vault": id, "name": name, "kind": ..., and the
// kind's fields}: secretbox has no associated data, so the entry name and
// the vault id are sealed inside and checked on open. A ciphertext copied or
// swapped to another name, or from another vault, fails with ErrCorrupt.
//
// The mac key is HKDF-SHA256(DEK, salt id, "latch/vault/internal/file-mac");
// its input is every field but the mac, length-prefixed, entries in name
// order. Unlock verifies it, so entries added, removed or replaced outside
// latch make Unlock fail with ErrCorrupt. Not detected: replacing the whole
// file with an older copy written by latch (a rollback); keep the file where
// only the control plane can write.
//
// Entry names (^[a-z0-9][a-z0-9_.-]{0,63}$) are in clear: they are
// credential_ref values from the tool catalogs, not secrets. So List and
// Status work while the vault is locked.
//
// One process owns the file: New reads it once; afterwards the vault only
// writes it. Admin tools go through the control plane's API.
//
// # Storage
//
// The document lives where Config.Storage says: a file (FileStorage, the
// default: Config.Path), or a shared store, so that every replica of a
// control plane on one PostgreSQL database opens the same vault
// (pgkv.KV.VaultStorage: one row, written only by the active
// replica, fenced, each write naming the version it replaces). Storage sees
// the same bytes a file holds: sealed entries and a sealed data key, never
// a secret in clear. Create is insert-if-absent, so replicas racing to
// create the vault agree on one (the losers get ErrExists and Reload the
// winner's). Reload reads the document again (a standby taking over reads
// what the previous active stored), refusing another vault's document or
// one whose MAC does not verify.
//
// # Lock epoch
//
// Status.Epoch increases on every lock and unlock and lives in memory only
// (it restarts at 0 with the process, which also starts locked). The
// control plane voids pending approvals when it moves; Config.OnChange
// reports each change.
//
// # Secrets in output
//
// Credential prints as its kind and "[redacted]" under every fmt verb, in
// JSON and in log/slog; so do the kinds it turns into.
//
// # Kinds
//
// Credential is the stored record. Credential.HTTP and Credential.SSH turn
// it into its kind, which implements HTTPCredential (Apply on an
// *http.Request: Bearer, Basic, Header) or SSHCredential (Signer: SSHKey).
// The dispatchers call only those interfaces, so adding a kind (a request
// signer) touches this package alone (kinds.go, Validate, the sealed fields). No error or log line of this package contains a
// secret value, nor a rejected name or header name (a secret may have been
// pasted there by mistake).
package vault
