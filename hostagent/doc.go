// Package hostagent holds what the host agent's pieces share with its users:
// the exit codes of the `latch-hostagent` CLI and the error reasons the
// HostAgent gRPC service attaches to refusals. The agent itself lives in the
// subpackages: markers (Badger marker store), shim (per-execution
// supervisor and gate), execdir (on-disk layout of an execution), proc
// (process identity), agent (the gRPC service and reconcile), client (dial
// helpers for the control plane) and cmd/latch-hostagent (the binary).
//
// Nothing under hostagent may import the control plane, the MCP front or the
// MCP SDK; cmd/latch-hostagent's deps test enforces it.
//
// # Data directory
//
//	DIR/lock                    flock held by the running agent (one agent per DIR)
//	DIR/markers/                Badger v4 marker store (see package markers)
//	DIR/markers.corrupt-<unix>  a store that would not open, moved aside
//	DIR/exec/<execution_id>/    one directory per Run (see package execdir)
//	DIR/scripts.log             append-only mirror log of script markers (for rebuilds; see package markers)
//	DIR/scripts.log.rebuilding  the log a rebuild reads from, until it is done
//	DIR/scripts/<id>.json       per-marker mirrors of older agents (read by a rebuild only)
//
// # Marker lifecycle
//
// Run markers: starting → running{pid, start_ticks, boot_id} → exited{code |
// signal}, or not_started (the gate never opened: provably nothing ran), or
// lost (it ran and its outcome is unknown). A lost command is never re-run.
// Script markers (the marker API): begun → completed | failed. The table is
// markerNext in markerstate.go: the agent checks it (CheckMarker) before every
// marker write, and the control plane's host channel reads markers through
// MarkerOpen and MarkerName, so both sides know one machine.
//
// # CLI exit codes
//
// Every `latch-hostagent` command exits with one of these; scripts branch on
// them:
//
//	0   ok: marker begun, completed, failed as asked, or printed
//	1   runtime error (the agent answered with an error, I/O failure)
//	2   bad arguments
//	3   agent not reachable (socket missing, refused, or this uid not allowed)
//	10  already completed: the marker was completed before
//	11  in progress: the marker was begun and is not finished
//	12  failed before: the marker was marked failed
//	13  no such marker (complete/fail/status of an ID never begun)
package hostagent
