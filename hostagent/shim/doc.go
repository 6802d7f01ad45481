// Package shim is the per-execution supervisor of the host agent and the
// agent's side of talking to it.
//
// The agent re-executes its own binary (/proc/self/exe, so an upgrade that
// replaced the file on disk does not matter) as `latch-hostagent shim` in a
// new session (setsid), with stdin on /dev/null, stdout/stderr on the
// execution's shim.log, and fd 3 one end of a unix socketpair: the control
// channel. The shim outlives the agent: when the agent dies, the channel reads
// EOF and writes fail with EPIPE, which the shim handles; nothing the agent
// holds is in the shim's stdio.
//
// Control protocol (JSON lines on the socketpair):
//
//	agent → shim  {"spec": {...}}               what to run (argv, cwd, env, timeout, cap, secret_env)
//	shim  → agent {"started": {pid, start_ticks, boot_id}}   the command waits at the gate
//	agent → shim  {"open": true}                sent only after `running` is durable
//	shim  → agent {"done": true}                the status file is durable
//	shim  → agent {"error": "..."}              nothing was started
//
// The gate: the shim starts `latch-hostagent gate -- argv...` in its own
// process group with fd 3 the read end of a pipe. The gate blocks reading
// fd 3; on the byte 'g' it execve's the real argv (same pid, same start
// time), on EOF it exits 125 without running anything. The shim writes 'g'
// only on {"open": true}; on EOF of the control channel, an abort, or a
// timeout it closes the pipe. So a command runs only if the agent wrote
// `running{pid,start_ticks,boot_id}` first, and a marker left in `starting`
// proves nothing ran.
//
// The socketpair was chosen over files the shim polls because it needs no
// polling delay, it carries the spec (the environment may hold secrets and
// never touches the disk), and the death of either side is seen at once as
// EOF.
//
// Secret values: the spec names the env entries that hold them
// (secret_env); the shim redacts those values from the output as it copies
// it (package internal/redact's streaming Writer, so a secret split over two
// reads of the pipe is still caught) and from the status file's reason. It
// holds them in memory only, for the run.
//
// Only the host agent imports this package.
package shim
