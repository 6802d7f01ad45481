// Package sim is the deterministic simulator: the engine, the store (the
// in-memory backend with injected faults), the recovery queue and the
// channels' target semantics in one process, inside a testing/synctest
// bubble, with every choice drawn from one seed. Its code is all in tests:
//
//	go test ./controlplane/sim -run TestSimulate -sim.seeds=10000
//	go test ./controlplane/sim -run TestSimulate -sim.seed=1234 -v   # replay one, printing its schedule
//
// # How a schedule runs
//
// A driver (world.run) repeats one step: wait until every goroutine of the
// bubble is durably blocked (synctest.Wait), check the invariants, list what
// can happen next in an order that does not depend on goroutine timing
// (requests waiting at a target, requests still in flight, clients ready to
// call, faults), and make one of them happen, chosen by the seed. Time
// passes only when the driver sleeps (the bubble's clock), so a dispatch
// timeout, a recovery backoff or an attach window runs out exactly where the
// schedule says. The engine's own sources of time and chance are seams
// (engine.Config Clock and NewID, set from the seed; retry jitter is a hash
// of the execution ID, RetryPolicy.BackoffOf). A run records its trace
// (every choice, every commit fault the store drew, and after each step the
// state of every execution); TestReplayIsExact runs seeds twice and compares
// the traces line by line.
//
// # What it injects
//
//   - store (kv_test.go): a commit that fails (nothing written), a commit whose
//     answer is lost (written, reported unknown: the process must restart),
//     a crash just before or just after a commit; a restart opens the store
//     and the engine afresh on what was committed;
//   - targets (targets_test.go), with the semantics of the channel kinds: an HTTP
//     target that honours the Idempotency-Key, an HTTP ledger that does not
//     and has an eventually consistent status endpoint, a host agent with
//     durable markers (a not_started marker refuses a late run); answers
//     lost after the effect, requests refused before it, requests that stay
//     in flight and land later (never after their timeout), lost query
//     answers;
//   - replicas: a lease that lapses (the replica keeps running, fenced by
//     engine.Fenced) and a standby that takes over the same store, after
//     which the old replica's commits fail as fenced;
//   - clients (clients_test.go): agents that call once, retry after a timeout or
//     an unknown outcome, and double-dispatch the same intent.
//
// # What it checks (check_test.go), after every step
//
// No intent has a second effect at any target; no execution is dispatched
// for an intent while an earlier one of it may have acted (no silent
// re-execution); an execution whose request reached its target never rests
// at a state that tells a caller it did not happen; nothing is sent by a
// replica whose lease lapsed; every execution a client was given survives a
// restart; and at the end, with every fault off and time run out, every
// execution rests and the state agrees with the journal (Store.CheckState).
//
// TestMutantsAreCaught (build tag latch_mutants) proves the simulator can
// fail: it runs the engine broken three ways (engine/mutants.go) and wants
// each caught within 10,000 schedules.
//
// What it does not simulate: the MCP front's HTTP layer and the gRPC API
// (clients call the engine as the API does), the channels' wire code
// (httpdispatch, SSH; their semantics are modelled at the engine.Channel
// seam), PostgreSQL's own behaviour (the fencing is modelled on its
// epoch rule), and goroutine interleavings inside one step: the Go runtime
// gives no seeded scheduler, so a step's work runs to quiescence in
// whatever order the runtime picks, and the replay test is what shows that
// this order does not change the outcome.
package sim
