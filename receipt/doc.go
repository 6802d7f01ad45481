// Package receipt verifies Latch receipts offline, without trusting Latch
// and without any of its control plane: it imports only the receipt message
// (proto/latch/receipt/v1), golang.org/x/mod/sumdb (notes and Merkle
// proofs) and protowire. Agents, auditors and `latch receipt verify` import
// it; the JavaScript module receipt.mjs next to it (embedded as JS, served
// by the console) is its twin, and both pass the vectors in testdata.
//
// # What a receipt proves
//
// A receipt names one execution (ID, tool, actor, fingerprint), the state
// and outcome it was in, the target's status and the SHA-256 of the stored
// result, and carries the journal record that wrote that state (the leaf's
// protobuf bytes), the record's leaf hash, an RFC 6962 inclusion proof and
// a C2SP checkpoint note signed by the journal's Ed25519 key. Verify checks,
// in this order:
//
//  1. the receipt is well-formed (format "latch-receipt/v1", every field of
//     the right type, no unknown key);
//  2. leaf_hash is SHA-256(0x00 || record);
//  3. the record is a journal entry whose index is journal_index, and whose
//     execution has exactly the receipt's execution_id, tool, actor,
//     fingerprint, state, outcome, target_status and result_sha256;
//  4. the checkpoint is signed by the key given (never by a key the receipt
//     names) and covers journal_index;
//  5. the proof takes the leaf hash at journal_index to the checkpoint's
//     root hash.
//
// A receipt so verified shows that whoever holds the journal key signed a
// journal whose record journal_index is this record. That journal is only
// as tamper-evident as its checkpoints kept outside Latch: compare the
// checkpoint with those an auditor or a witness holds (`latch audit verify
// --checkpoints`).
//
// # Canonical JSON
//
// The receipt's JSON form is one object with these keys, sorted, no
// whitespace, strings escaped as RFC 8785 (JCS) does, bytes as standard
// base64 with padding, integers as JSON numbers (journal_index stays below
// 2^53):
//
//	actor checkpoint execution_id fingerprint format journal_index leaf_hash
//	outcome proof record result_sha256 state target_status tool
//
// Marshal writes it; Parse reads any JSON form of it (a client that
// re-indents the object does not break it), refusing unknown and missing
// keys. Digest, the receipt's short name in the one-line text form, is the
// lowercase hex leaf hash: it names the record, so a receipt re-issued
// later against a newer checkpoint has the same digest.
package receipt
