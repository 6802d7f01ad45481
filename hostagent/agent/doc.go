// Package agent is the host agent: the HostAgent gRPC service on a unix
// socket, the Run flow that starts each command under a shim behind a gate,
// the watchers that record exit statuses, and the reconcile pass that
// settles every open marker when the agent starts.
//
// Run, in order (each step durable before the next):
//
//  1. marker run/<id> created as `starting` (create-if-absent: a second or
//     concurrent Run for the ID gets the existing marker and starts nothing);
//  2. DIR/exec/<id>/argv.json written, shim spawned, spec sent;
//  3. the shim starts the command behind the gate and reports pid,
//     start_ticks, boot_id;
//  4. marker updated to `running{pid,start_ticks,boot_id}`;
//  5. the shim is told to open the gate;
//  6. the shim writes the status file and says done; the marker becomes
//     `exited` (or `not_started` when the gate never opened).
//
// Reconcile, for every open run marker at start:
//
//	starting                          → not_started (the gate opens only on
//	                                    an agent's word after `running`)
//	running, status file present      → what the status file says
//	running, boot id changed          → lost
//	running, command or shim alive    → still running; a watcher polls until
//	                                    both are gone, then reads the status file
//	running, both gone, no status     → lost
//
// A lost command is never re-run. A marker store that will not open is moved
// aside and rebuilt from the execution directories and the script marker
// mirror log (DIR/scripts.log), and the agent says so loudly at error level.
//
// The shim is this process's own binary re-executed (/proc/self/exe) with the
// hidden subcommands `shim` and `gate`: a binary that embeds the agent must
// route those to shim.Main and shim.Gate before anything else, as
// cmd/latch-hostagent does. Running latch-hostagent as a separate process is
// simpler.
package agent
