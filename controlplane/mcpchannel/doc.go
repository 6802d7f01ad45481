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
//   - a JSON-RPC error → Observed with the error as the result, except
//     method not found and invalid params, which prove the upstream refused
//     the call before running it → NotSent, final.
//
// Latch never cancels a call it has written: a timeout or a shutdown stops
// the waiting only (no notifications/cancelled is sent), as a dropped agent
// never cancels a dispatched execution.
//
// # Schemas
//
// The input schema of an upstream tool is the upstream's: Source binds it
// into the catalog when the catalog is loaded (tools.Tool.BindUpstreamSchema)
// and the catalog's version covers it. A tool the upstream does not offer,
// whose schema cannot be used, or whose upstream could not be reached is
// held: left out of the catalog, with the reason logged and shown by
// `latch catalog upstream-tools`. At dispatch the upstream's current schema
// (listed on every connect and on notifications/tools/list_changed) is
// compared with the one in force; a change holds the tool (the call is
// not_executed, nothing sent) until the operator reloads the catalog.
//
// # Tasks
//
// The go-sdk v1.8.0 client has no tasks support (no task-augmented
// tools/call, no tasks/get) and no public way to send a raw request, so this
// channel does not call upstreams task-augmented yet: replay status_query is
// refused for upstream tools by the catalog loader, and Query answers
// Unsupported.
package mcpchannel
