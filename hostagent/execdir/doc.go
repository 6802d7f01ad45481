// Package execdir is the on-disk layout of one execution run by the host
// agent, shared by the agent and its per-execution shim.
//
// Each execution has a directory DIR/exec/<execution_id>/ (mode 0700):
//
//	argv.json    written by the agent before the shim starts: a protojson
//	             hostagentv1.Marker with execution_id, argv, cwd and
//	             created_unix_nano (never the environment: it may hold secrets)
//	shim.pid     "<pid> <start_ticks> <boot_id>" of the shim, written by the shim
//	command.pid  the same for the command, written by the shim before it asks
//	             the agent to record `running`
//	output       stdout and stderr of the command, combined, with the values
//	             of the request's secret_env replaced by [REDACTED] (by the
//	             shim, before writing), capped
//	shim.log     the shim's own stdout/stderr
//	status       the outcome, written once by the shim (temp file, fsync,
//	             rename, fsync of the directory): a protojson
//	             hostagentv1.Marker whose state is EXITED (exit_code, or
//	             signal with exit_code -1) or NOT_STARTED (the gate never
//	             opened), plus output_size and output_truncated
//
// Script markers (the marker API) are mirrored in DIR/scripts.log, an
// append-only log written by package markers in the store's group commit
// (MirrorLog), so that a store moved aside loses none of them. Agents
// before that log kept one DIR/scripts/<execution_id>.json (protojson
// hostagentv1.Marker) per marker; a rebuild still reads those first.
//
// The status file is the only record of an exit status that survives the
// agent: only the shim (the command's parent) can read it, and it writes it
// durably before telling the agent. A status file is never rewritten.
package execdir
