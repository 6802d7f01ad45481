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
// latch make Unlock fail with ErrCorrupt. The MAC alone does not detect
// replacing the whole file with an older copy written by latch (a
// rollback to a credential the operator rotated away), nor with another
// vault's document that the same key file opens: the Witness does.
//
// # Witness
//
// The control plane journals each write of the document (its sha256, in a
// "vault_written" record of the tamper-evident journal) and, once its store
// is open on the active replica, gives the vault the store's witness
// (SetWitness, *store.VaultWitness; controlplane/store/secretcheck.go
// describes the records). From then on every load and reload holds the
// document against the latest record, and a document the journal did not
// record is refused with ErrForged: SetWitness and Reload fail, and Get,
// List, Put and Delete return it until a Reload passes. A write is
// journaled first, with the document kept in the store as a pending
// marker, then made, then confirmed; a crash in between leaves the
// document before it stored, which the next load tells apart from a
// rollback (the marker holds the journaled document) and finishes the
// write. A document that has no record yet (a store written before the
// records, a vault created at start before the store opened) is recorded
// as found (trust on first use, said in the record).
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
// Credential is the stored record: a kind and its field values. Each kind
// is a CredentialKind in a registry (kinds.go lists the built-ins, one
// line each, one file each; Register adds another package's): it declares
// its fields, validates them, and presents the credential through the
// capabilities it has, HTTPKind (an HTTPCredential: Apply on an
// *http.Request), SSHKind (an SSHCredential: Signer) and EnvKind (a
// credential_env value). Credential.HTTP, SSH and Env ask the kind, so the
// dispatchers, the admin service and the CLI name no kind. The sealed
// entry keeps each field under its name. No error or log line of this
// package contains a secret value, nor a rejected name or header name (a
// secret may have been pasted there by mistake).
package vault
