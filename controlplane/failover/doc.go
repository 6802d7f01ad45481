// Package failover tests Latch's replicas on PostgreSQL under failure,
// with real processes: `latch serve` replicas on one database, MCP fronts
// (`latch-mcp`) that know every replica, agents calling through them, and
// the counting HTTP target (internal/testing/countingtarget) in the test process,
// which knows which process sent each request (it looks the sending socket
// up in /proc). It holds no code
// a binary can import; everything is in its _test.go files.
//
// Tests:
//
//   - TestFreezeStopsDispatch: the active replica's database connections
//     are frozen through a TCP proxy the test controls (connections held
//     open, nothing forwarded). The active must stop dispatching before its
//     lease can expire; a standby takes over; the target sees no request
//     from the old active after the new active's epoch began.
//   - TestDatabaseFailover: the database's own failover. PostgreSQL runs as
//     a primary with a synchronous streaming standby; the replicas connect
//     with a multi-host connection string (target_session_attrs=read-write).
//     The primary is SIGKILLed under load and the standby promoted; every
//     execution an agent saw acknowledged is there afterwards, with its
//     journal. TestDatabaseFailoverAsync does the same with asynchronous
//     replication and logs what was lost (it asserts nothing about loss:
//     losing the last acknowledged commits is what asynchronous
//     replication permits). It is off unless -failover.async.
//   - TestFailoverUnderLoad: three replicas, eight agents, SIGKILL of the
//     active at random moments, while the target holds a request and just
//     after it answered, and one freeze of the active's database
//     connections. It asserts that every acknowledged execution survives
//     with its journal, that no intent has two effects at the target, that
//     no request reached the target from a replica after a newer epoch had
//     begun (no execution dispatched by two actives), and that every
//     execution that reached the target is visible in a state that says it
//     may have happened. It logs the failover times (active killed → first
//     Submit accepted by the new active), p50 and max.
//
// By default TestFailoverUnderLoad runs a bounded slice (-failover.kills=3,
// plus the freeze); the full run is
//
//	go test -run TestFailoverUnderLoad ./controlplane/failover -failover.kills=24 -timeout 30m
//
// -failover.seed replays the random choices of a run (their timing
// against real processes is real, so a race may need a few replays), and
// LATCH_FAILOVER_KEEP=1 keeps the directories (every process's log).
package failover
