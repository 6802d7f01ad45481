// Package store is the control plane's durable state: executions, their
// results, the matching index and the activity journal, all in one key-value
// backend (Badger on disk, or an in-memory map for unit tests) behind one
// single writer that commits concurrent updates in groups.
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
//	m/format                          layout version of these keys ("1"), checked at open
//	t/<token id>                      AgentToken (protobuf): an agent's bearer token, hash only
//	h/<token sha256, hex>             token id (index: authenticate a token with one Get)
//	m/catalog                         CatalogVersion (protobuf): the tool catalog in force
//	k/<catalog version>               that catalog's source bytes (what executions were accepted under)
//
// Tokens are journaled like sessions: token_created, token_revoked and
// token_migrated entries carry the AgentToken without its hash; a token's
// last_used_at is coarse (moved at most once a minute), so authenticating
// is a read, not a write per call. The t/, h/, m/catalog and k/ keys are
// additive: a store written before them reads as "no tokens, no catalog
// recorded", so the layout version stays "1".
//
// Matching is one Get of f/<fingerprint>: its cost does not grow with the
// number of stored executions. Execution IDs are ULIDs, so x/ keys sort by
// creation time.
//
// The store is deterministic: callers pass IDs and timestamps in; it never
// reads the clock or a random source.
package store
