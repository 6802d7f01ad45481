// Package fingerprint builds the canonical intent record of docs/design §3 and
// its keyed fingerprint, the identifier the control plane uses to find a
// prior execution when the protocol correlation (JSON-RPC id, MCP session)
// has changed.
//
// # Canonical form
//
// The record is JSON in the RFC 8785 JSON Canonicalization Scheme (JCS):
// object members sorted by the UTF-16 code units of their names, no
// insignificant whitespace, strings with only the escapes RFC 8785 allows
// (\" \\ \b \f \n \r \t and \u00xx for the other control characters; all
// else literal UTF-8), numbers in the ECMAScript Number.prototype.toString
// form of their IEEE-754 double value. Two requests that differ only in key
// order, whitespace or number spelling (1.0 and 1, 1e2 and 100) therefore
// produce the same record and the same fingerprint. Input that JCS cannot
// represent faithfully is refused: invalid UTF-8, lone UTF-16 surrogate
// escapes, duplicate member names, numbers beyond the double range, and
// anything after the JSON text.
//
// # Record fields and what never enters
//
// [Intent] holds exactly the fields docs/design §3 lists: actor, tool, channel,
// target, credential_ref, method or command, cwd, arguments, intent_scope
// and repeat_of. Transport fields (JSON-RPC ids, MCP session ids, progress
// tokens, _meta) have no field in Intent, so they cannot enter the record;
// callers strip them before building the arguments. The caller must also
// have materialised the tool contract's defaults into Arguments.
// [Fingerprinter.Record] drops the arguments the contract marks ignore and
// replaces each argument it marks secret by "hmac-sha256:<hex>", a keyed
// HMAC of the argument's canonical value, so the secret never appears in
// the record, the journal or a log line.
//
// # Keys
//
// The server key (at least 32 bytes, held by the vault) is never used
// directly: two sub-keys are derived from it with HKDF-SHA256, info
// "latch secret argument v1" for secret arguments and "latch intent
// fingerprint v1" for the fingerprint itself. The fingerprint is
// "hmac-sha256:" followed by the lowercase hex HMAC-SHA256 of the record.
// A keyed digest matters: an unsalted hash of a low-entropy secret would
// turn the audit store into a guessing oracle.
//
// This package is a pure library with no I/O; any control-plane package may
// import it.
package fingerprint
