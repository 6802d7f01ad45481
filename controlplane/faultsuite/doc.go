// Package faultsuite is Latch's randomized fault suite: the project's own
// version of the checks users trust, Jepsen-style, with real processes. It
// holds no code a binary can import; everything is in its _test.go files.
//
// Each lane runs the real binaries (`latch serve`, `latch-mcp` and
// `latch-hostagent`) on loopback, in front of a counting HTTP target
// (internal/testing/countingtarget) that lives in the test process behind a
// faultproxy, and a local host-agent tool whose command appends to a file.
// A trial picks, from its seed:
//
//   - a fault point: a cut before the target receives the request, a cut
//     while the target holds it, a cut after its effect and before the
//     answer, SIGKILL of the control plane while the target holds the
//     request or just after it answered, SIGKILL of the host agent while its
//     command runs, or a target slower than the dispatch timeout;
//   - a retry behaviour: an immediate re-issue on a new MCP session, a
//     delayed one, two concurrent ones, one in the other protocol era
//     (2025-11-25 stateful or 2026-07-28 stateless), latch_execution_status
//     first and then a re-issue, or none;
//   - a replay class: idempotency_key, status_query or review.
//
// The target knows the truth: which execution IDs (Idempotency-Key) reached
// it for which intent, which are held, which committed an effect. Per trial
// the suite asserts that no intent has a second effect (duplicate effects),
// that no call was answered `new` while an earlier execution of the same
// intent had, or could still have, an effect (silent re-executions), and
// that every execution that may have had an effect is visible, through the
// built-in latch_execution_status tool, in a state that says so (invisible).
// After the last trial it waits for recovery to settle and counts the
// effects again.
//
// The suite is off by default. Run it with
//
//	go test -run TestFaultSuite ./controlplane/faultsuite -faultsuite.trials=100
//
// or LATCH_FAULT_TRIALS=100. It prints the seed; trial i of a run has seed
// S+i and every choice of a trial (fault point, retry, class, era, delays,
// proxy mode) comes from its seed, so -faultsuite.seed=S (or
// LATCH_FAULT_SEED) with -faultsuite.trials=1 replays the trial with seed S
// on a fresh stack and logs every journal of it; its timing against the
// processes is real, so a race may need a few replays. -faultsuite.lanes
// (LATCH_FAULT_LANES) sets how many independent stacks run trials side by
// side; LATCH_FAULT_KEEP=1 keeps the lanes' directories (logs, data).
//
// Processes live across trials: a trial uses an intent of its own, so it
// needs no fresh data dir; only the processes its fault kills are started
// again, on the same data dir. Every wait is bounded.
package faultsuite
