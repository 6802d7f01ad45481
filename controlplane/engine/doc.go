// Package engine is the heart of the control plane: it gives every requested
// action an execution ID and an intent fingerprint, matches retries to prior
// executions atomically, moves executions through the lifecycle with a
// durable journal record per step, dispatches them through their channel and
// recovers unknown outcomes from evidence.
//
// It is used by the control plane's gRPC service and by `latch dev`; nothing
// outside controlplane imports it.
//
// # Channels
//
// The engine knows a channel (HTTP, SSH, a host agent on this machine) only
// through the Channel interface and the Config.Channels map, keyed by the
// catalog's channel name; no code in this package (nor in the MCP front)
// branches on a channel's name. A channel supplies:
//
//   - Identity: its part of the canonical intent record (which target, which
//     action: an HTTP method and path template, a command and cwd). It
//     enters the fingerprint, so it must never change for an unchanged
//     catalog entry: pin it with a test, as httpchannel and hostchannel do.
//     A tool whose channel no Channel serves is refused at Submit
//     (ErrUnknownTool): it cannot be fingerprinted.
//   - Dispatch: one attempt under the execution ID, classified as Observed
//     (the target answered), NotSent (provably nothing reached it), or
//     Unknown (something may have). A channel never retries: the engine
//     decides whether and when to try again (retry.go). Final marks a
//     NotSent that no later dispatch of the same ID can change.
//   - Query: what the target knows of the execution, without acting:
//     Observed, Absent (with Durable or InFlight when the target's absence
//     is proof; evidence.go), Unknown, or Unsupported. The status request
//     (which URL, which RPC) is the channel's own business.
//   - The result view: the recordv1.Result of an Observed attempt, with the
//     fields its kind of answer has. A protocol status goes in status (and
//     headers), a process exit in exited + exit_code (+ signal), a line
//     for people in summary, the payload in body. The execution's
//     target_status is the exit code when exited, else status (0 when the
//     channel's answers have neither); the MCP front shows exit_code only
//     when exited. Secrets are redacted by the engine (redact.go), not by
//     the channel.
//
// # Adding a channel
//
// A channel kind is one package and one registration line; nothing changes
// in engine, api, store, journal, mcpfront, the catalog loader or the stack
// (controlplane/channels TestNewKindEndToEnd adds a "queue" kind, with its
// own catalog keys, from internal/testing/example/queuekind; here
// TestNewChannelThroughTheSeam drives an unknown channel through this
// package's exported API alone). The non-test files it touches:
//
//  1. its own package, controlplane/<name>channel: the catalog half, a
//     tools.Kind (its name, the target keys it takes and their checks into
//     Target.Spec, its tools' action keys into Tool.Action, the replay
//     classes its Query can back), through the tools.TargetSpec and
//     tools.ToolSpec accessors; the control-plane half, a type implementing
//     Channel (with `var _ engine.Channel = (*T)(nil)`), its New(Config);
//     and its tests, including the Identity pin;
//  2. controlplane/channels/builtin.go: one line in BuiltIn (its catalog
//     kinds, how the stack builds it from channels.Deps, and optionally how
//     `latch dev` adapts its targets), with its constructor beside it.
//
// The docs that describe it: docs/reference/catalog.md (its keys) and the
// package map (its row).
package engine
