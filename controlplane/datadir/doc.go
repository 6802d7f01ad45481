// Package datadir owns the on-disk layout of a control plane's data
// directory (the --data DIR of latch serve and latch dev): every path in it
// is computed here, so the server, the composition root (stack), the dev
// assembly (devstack), audit and the CLI agree on where things are. It is a
// leaf: it imports only the standard library, and any control-plane
// package may import it.
//
// The layout:
//
//	DIR/
//	  db/                  the Badger store (absent on a PostgreSQL store)
//	  keys/
//	    fingerprint.key    HMAC key of intent fingerprints (Badger store only)
//	    journal.key        Ed25519 key signing the journal's checkpoints
//	    journal.pub        its verifier key, for latch audit verify
//	    vault.key          the vault key file latch dev creates
//	  vault.json           the vault (imported into a PostgreSQL store once)
//	  control.sock         the API's unix socket
//	  tokens.json          tokens of an older release, migrated at start
//	  upstream-pids/       one PID.pid per running stdio upstream MCP server
//	  dev.json             what latch dev serves (latch demo and bench read it)
//	  dev-token            the dev actor's bearer token (latch dev)
//	  hostagent.sock       latch dev's embedded host agent
//	  hostagent/           its data dir (markers, latch dev)
//	  front/               latch dev's MCP front's state dir (its delivery
//	                       reports kept while the control plane is away)
//
// On a PostgreSQL store the keys live sealed in the store's latch_keys
// under the names JournalKey and FingerprintKey.
package datadir
