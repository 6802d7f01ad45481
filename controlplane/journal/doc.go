// Package journal holds the tamper-evident journal logic of docs/design §10:
// what a journal leaf is, how the Merkle tree over the leaves is hashed,
// how checkpoints are signed and opened, how a journal (live or exported)
// is verified, and the export file format. It is a pure library: it stores
// nothing. The control plane's store (Badger) persists entries, stored
// hashes and checkpoints and calls this package; `latch audit verify`
// calls Verify on a stopped data dir or on an export file.
//
// # Leaves
//
// Leaf i of a journal is the deterministic protobuf encoding
// (proto.MarshalOptions{Deterministic: true}) of a recordv1.JournalEntry
// whose index field is i. Leaves are hashed into an RFC 6962 Merkle tree
// with golang.org/x/mod/sumdb/tlog: leaf hash SHA-256(0x00 || data),
// interior hash SHA-256(0x01 || left || right).
//
// # Stored hashes
//
// When the store appends leaf n it calls StoredHashes(n, data, r) and writes
// the returned hashes at the consecutive stored-hash indexes
// tlog.StoredHashIndex(0, n), tlog.StoredHashIndex(0, n)+1, ...; the first
// is the leaf hash of n, the rest are the complete subtrees n closes.
// TreeHash, inclusion proofs (tlog.ProveRecord) and consistency proofs
// (tlog.ProveTree) read them back through a tlog.HashReader. Stored hashes
// are an index, not a trust anchor: whoever can rewrite the records can
// rewrite them. They serve to pin a modified record to its index.
//
// # Checkpoints
//
// A checkpoint is a C2SP checkpoint (https://c2sp.org/tlog-checkpoint)
// signed as a golang.org/x/mod/sumdb/note with an Ed25519 key whose name is
// the journal's origin:
//
//	<origin>
//	<tree size, decimal>
//	<root hash, standard base64>
//	time <RFC 3339 time, UTC, nanoseconds>   (optional extension line)
//
//	— <origin> <base64 key hash and signature>
//
// Signed checkpoints are the trust anchors: the control plane copies them
// to a file or witness outside the data dir, and a journal is only as
// tamper-evident as its latest checkpoint kept elsewhere.
//
// # Invariants Verify checks
//
//   - position i holds the entry whose index field is i (no record
//     missing, inserted or reordered);
//   - each record hashes to its stored leaf hash, and the stored tree
//     hashes are those the records produce;
//   - for every checkpoint: the signature verifies under the verifier key,
//     the journal holds at least its size records, and the tree of the
//     first size records has its root hash.
//
// # Export file
//
// Export writes JSON Lines, in this order:
//
//	{"type":"header","format":"latch-journal-export/v1","size":N}
//	{"type":"record","index":0,"leaf_hash":"<base64>","data":"<base64>","entry":{...}}
//	... one record line per position 0..N-1 ...
//	{"type":"checkpoint","note":"<signed note text>"}
//	... one line per checkpoint ...
//
// data (the protobuf bytes) is authoritative; leaf_hash is the store's
// stored leaf hash at that position (or the hash of data when the store had
// none) and lets Verify pin a modified record in an export too. A position
// the store could not produce is written as
// {"type":"record","index":i,"missing":true}. Record positions are the
// order of the record lines. An export carries no interior stored hashes: a
// record modified together with its leaf_hash is localised only between two
// checkpoint sizes.
//
// An export is verified whole. entry (protojson of the decoded entry) and
// index (the entry's index field) are the line's readable part: ReadExport
// rebuilds both from data, and Verify reports every difference as a
// KindReadable problem at that position naming the field (a value edited,
// a field added or removed, a key given twice), as it does for a key the
// format does not have. A change of form that keeps every value
// (whitespace, string escapes) is not a difference. Header and checkpoint
// lines with an unknown or repeated key do not parse.
//
// # Anchoring
//
// Records after the newest checkpoint are "not yet anchored": no signature
// vouches for them yet (Report.UnanchoredFrom). That is not a problem of
// the journal (the control plane checkpoints every 30 s and at shutdown, so
// a crash leaves a short unanchored tail) but it is reported, and a caller
// may require none. When a checkpoint copy kept elsewhere is given
// (Options.CheckpointCopy), only its checkpoints count as anchors: the
// journal's own are signed with a key kept beside them. A journal truncated
// with its checkpoints deleted is then caught by the copy's larger
// checkpoint (KindTruncated); without a copy it shows as records with no
// checkpoint at all, all unanchored.
package journal
