// Package store is the control plane's durable state: executions, their
// results, the matching index and the activity journal, all in one key-value
// backend (Badger on disk, PostgreSQL, or an in-memory map for unit tests)
// behind one single writer that commits concurrent updates in groups.
//
// # Backends
//
// The backend is a backend.KV (package backend: the contract, and the
// capabilities a shared backend adds, found by interface assertion):
// memkv (tests), badgerkv (DATA/db) and pgkv (PostgreSQL, shared by
// replicas: a Leaser, KeyRows, VaultRow and ReplicaTable). Package backends opens
// the one a --store value names; package internal/testing/kvtest is the contract suite
// each runs. The store relies on nothing else of a backend: a backend
// that lends its scans' bytes (backend.LentScanner) is read without
// copies by the state check.
//
// # Group commit
//
// Every mutation is a function run by Update. One goroutine (the writer)
// takes all pending functions, runs them one after another against a shared
// batch, and commits the batch with one durable write (one fsync with Badger
// SyncWrites). Update returns only after that commit. Because the writer is
// the only mutator and runs functions serially, a function that reads and then
// writes (match-or-create) is atomic without locks or conflict retries. Each
// function sees the writes of the functions before it in the same group. A
// function that returns an error leaves no trace: its writes live in a
// private overlay that is merged into the group only on success.
//
// # Keys
//
//	x/<execution id>                  Execution (protobuf)
//	r/<execution id>                  Result (protobuf)
//	S/<session id>                    Session (protobuf)
//	f/<fingerprint>                   execution id of the latest execution of that intent
//	a/<actor>\x00<execution id>       "" (index for List by actor)
//	n/<session id>\x00<execution id>  "" (the executions an agent session created)
//	s/<state number>/<execution id>   "" (index of executions by current state)
//	e/<execution id>                  the journal indexes of one execution (8 bytes each, big endian)
//	j/<index, 16 hex digits>          leaf record: the tlog stored hashes this leaf completed, then
//	                                  the JournalEntry (deterministic protobuf) that is the Merkle leaf
//	c/<tree size, 16 hex>             signed checkpoint note
//	m/journal_size                    number of journal entries, 8 bytes big endian
//	k/<execution id>                  sealed secret arguments (AEAD ciphertext; sealed.go), until it settles
//	m/format                          layout version of these keys ("2"), checked at open
//	t/<token id>                      AgentToken (protobuf): an agent's bearer token, hash only
//	h/<token sha256, hex>             token id (index: authenticate a token with one Get)
//	tj/<token id>                     journal index of the token's last journal record (8 bytes, big endian)
//	m/tokens_indexed                  journal size N (8 bytes, big endian): tj/ covers every token record below N
//	sj/<session id>                   journal index of the session's last journal record (8 bytes, big endian)
//	m/sessions_indexed                journal size the session index was built at (8 bytes): sj/ exists
//	m/catalog                         CatalogVersion (protobuf): the tool catalog in force
//	k/<catalog version>               that catalog's source bytes (what executions were accepted under)
//	u/<catalog tool>                  UpstreamToolPin (protobuf): the accepted schema, description and
//	                                  annotations of an upstream tool, written with its journal record
//
// Tokens are journaled like sessions: token_created, token_revoked and
// token_migrated entries carry the AgentToken without its hash; a token's
// last_used_at is coarse (moved at most once a minute), so authenticating
// is a read, not a write per call. The t/, h/, m/catalog and k/ keys are
// additive: a store written before them reads as "no tokens, no catalog
// recorded", so the layout version stays "2". So are tj/ and
// m/tokens_indexed: Append writes tj/ with every journal record that
// carries a token and sets the marker (0) with a store's first journal
// record. IndexTokens, at every start, checks each stored token against
// the record its entry names; when one disagrees (a latch without the
// index, say a replica not yet upgraded, journaled tokens meanwhile) it
// reads the journal records from the marker on again, and either way
// moves the marker to the journal's end. A store written before the index
// has no marker: its whole journal is read once, while serving.
//
// Matching is one Get of f/<fingerprint>: its cost does not grow with the
// number of stored executions. Execution IDs are ULIDs, so x/ keys sort by
// creation time.
//
// The store is deterministic: callers pass IDs and timestamps in; it never
// reads the clock or a random source.
//
// # Results are committed by hash
//
// PutResult stores a Result as its deterministic protobuf encoding
// (proto.MarshalOptions{Deterministic: true}) and returns the SHA-256 of
// exactly those bytes; the completed record's execution carries it as
// result_sha256 and names it in result_ref ("sha256:<64 hex>"). The hash is
// over the stored bytes, not over a re-encoding, so it never depends on how
// a later protobuf library orders fields or map entries: a reader hashes what
// it read. Everything the result holds is covered (status, the headers
// kept, body, body_truncated, exit code, signal, summary), after whatever
// the engine removed before storing it (redaction).
//
// # State is a function of the journal
//
// Every execution record x/<id> equals the execution snapshot of its last
// journal record that changes it, normalised in exactly two ways:
//
//   - fields fixed at acceptance (canonical_intent, arguments, evidence) are
//     carried only by the accepted record (engine appendJournaled); they
//     are compared with that record;
//   - journal_index is the index of that last record itself (a snapshot is
//     encoded before its index is known, so it holds the previous one).
//
// "attach" records carry the execution as it was and change nothing; every
// other write of an execution record (transitions, recovery attempts with
// their next_recovery_at, evidence) is a journal record in the same commit:
// there is no unjournaled write of x/. A stored result r/<id> hashes to the
// result_sha256 the journal committed for <id>; a result with no committed
// hash is a mismatch. A fingerprint index entry f/<fp> points at an
// execution whose record carries fp (actor and intent scope are inside the
// fingerprint and compared again at match time). The history index e/<id>
// lists exactly the journal records of <id>.
//
// Every agent session record S/<id> equals the session its last journal
// record carries (session_started, _authorized, _revoked, _ended,
// _orphaned), but for last_seen_at, which is moved without a journal
// record (sessioncheck.go): the session rule lets an authorized session's
// calls proceed without an operator, so a session planted by hand or
// flipped back from revoked is a mismatch like a forged execution. The
// session rule does not wait for that check (a large store serves first):
// before an authorized session lets a call proceed it is held against the
// journal record sj/ names, and that record is proven included in the
// newest signed checkpoint when it covers it (CheckSession,
// sessionindex.go; the engine clears a session once per record and
// index, then pays one read of sj/ per call); Append writes
// sj/ with every session record, and IndexSessions builds it once, at
// start, for a store written before it. A latch without the index (a
// replica not yet upgraded) leaves sj/ behind: the session's calls then
// wait for an operator (fail closed) until one authorizes it again.
//
// The record of the catalog in force m/catalog equals the catalog its last
// catalog_loaded journal record carries (start-up reads it to decide
// whether the catalog it loads needs a journal record), and every catalog
// source k/sha256:<hex> hashes to its version, one a catalog_loaded record
// carries (catalogcheck.go).
//
// Every console session row cs/<id> is the one its operator_signed_in
// record opened (named by the hash of its key), and every upstream tool pin
// u/<tool> is the pin of the last upstream_tool_pinned or
// upstream_tool_accepted record of its tool (rowcheck.go).
//
// Not compared (they decide nothing a retry depends on, or are derived):
// the list indexes a/, n/, s/ (the start-up scope cross-checks s/ against
// the records it lists).
//
// consistency.go checks this. CheckAll (latch audit verify, and start-up up
// to SmallStore journal records) reads the journal itself (measured on a
// loaded 2-core machine: 3m35s for 1M executions, 5M journal records), and
// holds the agent token records t/ and h/ against the token journal records
// too (tokencheck.go: a token planted by hand has none), and the session
// records S/ against the session journal records (sessioncheck.go). A larger store
// starts behind a StartupGate (startupgate.go): the control plane serves at
// once while the gate's pass checks the executions start-up acts on (every
// unsettled one, and not_executed) through their history index, as
// CheckUnsettled does, and until the pass is done every update that reads
// such an execution (Tx.Execution) and every Store.Execution read checks it
// first, so nothing acts on one before it is checked; then a CheckAllLive
// pass checks the rest (1M executions of which 100,000 unsettled, loaded
// 2-core machine: start to serving 29-660 ms, where the synchronous
// CheckUnsettled took 34 s-1m47s). Token records do not wait for that
// pass: before a stored token first authenticates, the tokens service
// checks it with CheckToken (tokencheck.go) against the journal record
// tj/ names, and proves that record's inclusion in the newest signed
// checkpoint when it covers it, on a store of any size.
// Independently, Verified (every result read) and Tx.Check (every attach)
// check one execution before it is answered from: against the newest
// journal record its history index lists (a record that changed it, or an
// attach, which carries the whole record as answered), so the cost does
// not grow with the history; and Tx.Latest refuses an
// index entry that points at a missing execution or another intent. The
// Merkle journal itself is verified by the journal package (audit verify);
// the state check trusts journal leaves as stored.
package store
