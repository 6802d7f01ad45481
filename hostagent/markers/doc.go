// Package markers is the host agent's durable marker store: one
// hostagentv1.Marker per execution ID, kept in Badger v4 with SyncWrites on.
//
// On disk (the directory is DIR/markers of the agent's data dir):
//
//	run/<execution_id>     Marker of a command started by Run
//	script/<execution_id>  Marker of a migration script (marker begin/complete/fail)
//
// Values are binary protobuf (hostagentv1.Marker). The two namespaces are
// separate so that a script run by Run can `marker begin` with its own
// LATCH_EXECUTION_ID without colliding with the Run marker.
//
// Invariants:
//   - Create is create-if-absent in one transaction that reads the key before
//     writing it, so two concurrent Creates of one ID conflict in Badger and
//     exactly one of them wins; the loser sees the winner's marker.
//   - Writes are group-committed (group.go): one committer goroutine puts
//     every write already waiting into one transaction with one WAL fsync,
//     and answers each writer only after that commit; durability per call is
//     unchanged, concurrent writers share the sync.
//   - With Config.MirrorLog, every script marker change is also appended
//     to an append-only mirror log outside the Badger directory, as one
//     fsynced frame per group, before the group's commit (mirror.go): the
//     log holds every state the store holds, and Open makes it say exactly
//     what the store says. ReadMirror reads it to rebuild a store.
//   - The store never reads the clock: callers set timestamps (Config.Now
//     only names a damaged mirror log moved aside).
//   - One process per directory (Badger takes a flock); scripts and CLIs go
//     through the agent's gRPC API, never this package.
//
// Only the host agent imports this package.
package markers
