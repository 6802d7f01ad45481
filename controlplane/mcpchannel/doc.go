// Package mcpchannel connects the engine to upstream MCP servers: the
// catalog's upstreams: (stdio processes the control plane starts and
// supervises, or Streamable HTTP endpoints) and the upstream tools that have
// a contract in the catalog ("<upstream>.<tool>").
//
// It is imported by the control plane's stack wiring (controlplane/cli) and
// by nothing else.
//
// # What a dispatch proves
//
// Every call carries the execution ID in its _meta (io.latch/execution_id)
// and, when the contract names one, in the upstream's idempotency argument.
// The channel watches the bytes leave: for stdio, the line written to the
// process's stdin; for HTTP, httptrace's WroteRequest. An attempt is then
// classified like an HTTP target's:
//
//   - nothing written (upstream down, process not started, vault locked,
//     the upstream refused the connection) → NotSent;
//   - written, no answer (the process died, the stream was cut, the tool's
//     timeout passed) → Unknown, which a review tool turns into
//     needs_review and an idempotency_key tool recovers by sending again
//     under the same execution ID;
//   - an isError result → Observed, failed_at_target; any other result →
//     Observed, succeeded;
//   - a stdio answer over the frame cap (Config.MaxFrame) → Observed like
//     the answer it is, its result stored truncated with the reason; the
//     line is read to its end and the session lives on (frame.go);
//   - a JSON-RPC error → Observed with the error as the result, except
//     method not found and invalid params, which prove the upstream refused
//     the call before running it → NotSent, final.
//
// Latch never cancels a call it has written: a timeout or a shutdown stops
// the waiting only (no notifications/cancelled is sent), as a dropped agent
// never cancels a dispatched execution.
//
// # Stdio processes
//
// A stdio upstream runs in its own process group, which stopping it
// signals (stdin closed, then SIGTERM, then SIGKILL). On Linux the kernel
// SIGKILLs it when the control plane dies (Pdeathsig, armed from an OS
// thread held until the process is reaped), and a pid file per process in
// Config.PidDir lets the next run stop a group the kill left (what the
// upstream started under it) before it starts its own: pidfile.go.
//
// # Schemas
//
// The input schema of an upstream tool is the upstream's: Source binds it
// into the catalog when the catalog is loaded (tools.Tool.BindUpstreamSchema)
// and the catalog's version covers it. A tool the upstream does not offer,
// whose schema cannot be used, or whose upstream could not be reached is
// held: left out of the catalog, with the reason logged and shown by
// `latch catalog upstream-tools`. At dispatch the upstream's current offer
// (listed on every connect and on notifications/tools/list_changed) is
// compared with the one in force; a change holds the tool (the call is
// not_executed, nothing sent).
//
// What an upstream offers for a tool with a contract (input schema,
// description, annotations) is pinned by hash in the store at the first
// catalog load that sees it (journaled: upstream_tool_pinned), so a restart
// or a failover keeps the pin. Any other offer holds the tool, at every
// catalog load (a reload, SIGHUP, a restart, a failover, the reload when an
// upstream is reached) and at dispatch, until an operator accepts it:
// `latch catalog upstream-tools accept NAME` shows the diff, journals
// upstream_tool_accepted and reloads the catalog (pins.go). Descriptions
// reach agents cut at Config.MaxDescription (4 KiB), with a note saying so.
//
// # Tasks
//
// An upstream that runs a tool as a task (2025-11-25:
// capabilities.tasks.requests.tools.call and the tool's execution.taskSupport
// optional or required; 2026-07-28: the io.modelcontextprotocol/tasks
// extension in server/discover) is called task-augmented (tasks.go). The
// go-sdk v1.8.0 client cannot make these calls, so the channel sends them
// itself beside the SDK's session: on stdio on the connection the session
// runs over (tap.go says why this seam), on Streamable HTTP as POSTs of its
// own through the session's http.Client (httpraw.go). The upstream answers CreateTaskResult once the task is durable on
// its side; the channel records the task ID through engine.Call.RecordTask
// (journaled on the execution as target_task_id) before it waits, then polls
// tasks/get within the tool's timeout. What a task's status proves:
//
//   - completed → Observed with the result (tasks/result in 2025-11-25, the
//     inlined result in 2026-07-28); failed → Observed, failed_at_target,
//     the JSON-RPC error as the result; cancelled (by the upstream; Latch
//     never cancels) → Observed, failed_at_target;
//   - working, input_required after the timeout, a cut, a stop → Unknown;
//     Query (replay status_query) asks tasks/get again for the recorded ID;
//   - the task unknown to the upstream (-32602) → Unsupported, so
//     needs_review: only issued IDs are recorded, and a task that existed
//     and is gone (expired, lost in a restart) proves nothing about its
//     effect; no task ID recorded (Latch stopped between the upstream's
//     answer and its own write) → Unsupported, needs_review.
//
// replay status_query is allowed for an upstream tool only when its
// upstream, reached at load, runs it as a task; otherwise Source holds it
// (and heldReason does at dispatch), on either transport.
package mcpchannel
