package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// maxGroup bounds how many Update functions share one commit, which keeps a
// group far below Badger's transaction size limit.
const maxGroup = 512

var journalSizeKey = []byte("m/journal_size")

// formatKey holds the layout version of the keys and records below, written
// with the first journal entry. A store written in another layout is
// refused at open instead of being misread.
var formatKey = []byte("m/format")

// Layout "2": results are committed by hash (Execution.result_sha256), and
// start-up refuses a store whose results the journal does not vouch for; a
// layout "1" dir holds results no journal record commits.
const format = "2"

// Config configures a Store.
type Config struct {
	Logger hclog.Logger
	// KV is the backend (required).
	KV KV
}

// Store is the typed, group-committing layer over a KV.
type Store struct {
	log hclog.Logger
	kv  *cachedKV

	reqs chan *request
	done chan struct{}

	closeOnce sync.Once
	closeMu   sync.RWMutex // held for read while enqueueing, for write by Close
	closed    bool

	// size is the committed journal size; only the writer changes it.
	sizeMu sync.RWMutex
	size   int64

	// onCommit, when set, is called by the writer after each commit with the
	// executions that commit changed (for watchers).
	onCommit func([]*recordv1.Execution)
	onGroup  func(Group) // metrics (observe.go)

	// gate, while open, checks unsettled executions before they are acted
	// on (startupgate.go).
	gate atomic.Pointer[StartupGate]

	// lazyDelay is lazyDelay; tests lengthen it before the first update.
	lazyDelay time.Duration

	// events derives outbox events from journal records (outbox.go);
	// eventsC is signalled after a commit that wrote one.
	events  EventSource
	eventsC chan struct{}
}

type request struct {
	fn   func(*Tx) error
	done chan error
	// lazy: the update starts no commit of its own (UpdateLazy).
	lazy bool
	// credential, from the update's context (WithCredential), is stamped
	// on the journal records fn appends.
	credential *recordv1.OperatorCredential
}

// lazyDelay bounds how long an UpdateLazy waits for another update to share
// a commit with before it is committed on its own.
const lazyDelay = 20 * time.Millisecond

// New opens a Store over cfg.KV and starts its writer.
func New(cfg Config) (*Store, error) {
	if cfg.KV == nil {
		return nil, errors.New("store: Config.KV is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Store{
		log:  cfg.Logger.Named("store"),
		kv:   newCachedKV(cfg.KV),
		reqs: make(chan *request, maxGroup),
		done: make(chan struct{}),

		lazyDelay: lazyDelay,
		eventsC:   make(chan struct{}, 1),
	}
	v, err := cfg.KV.Get(journalSizeKey)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("store: read journal size: %w", err)
	case len(v) != 8:
		return nil, fmt.Errorf("store: journal size record is %d bytes, want 8: the data dir is damaged", len(v))
	default:
		s.size = int64(binary.BigEndian.Uint64(v))
		f, err := cfg.KV.Get(formatKey)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("store: read format: %w", err)
		}
		if string(f) != format {
			return nil, fmt.Errorf("store: the data dir is in layout %q, this latch reads layout %q: open it with the latch that wrote it (and export its journal with `latch audit export`), or, if it is a disposable dev dir such as .latch-dev, remove it", f, format)
		}
	}
	go s.writer()
	return s, nil
}

// OnCommit registers fn to be called (on the writer goroutine, so it must not
// block) with the executions each commit changed. Set it before the first Update.
func (s *Store) OnCommit(fn func([]*recordv1.Execution)) { s.onCommit = fn }

// Close stops the writer after pending updates and closes the backend.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.closed = true
		close(s.reqs)
		s.closeMu.Unlock()
		<-s.done
		err = s.kv.Close()
	})
	return err
}

// Update runs fn in the single writer and returns after the group that holds
// fn's writes is durable. fn must not block; it may be retried never. When fn
// returns an error none of its writes are kept and Update returns that error.
func (s *Store) Update(ctx context.Context, fn func(*Tx) error) error {
	return s.update(ctx, &request{fn: fn, done: make(chan error, 1), credential: credentialFrom(ctx)})
}

// UpdateLazy is Update for a write nothing waits on: it starts no commit
// (no sync) of its own but joins the next group another Update starts, or,
// when none comes, commits on its own after at most lazyDelay. It returns,
// like Update, only once fn's writes are durable, so a caller that answers
// after it never reports a write that could be lost; what is lazy is when
// the sync happens, not whether it happens before the answer. For records
// whose absence after a crash is the safe side and that nothing is ordered
// after (delivered: without it, an attach returns the stored result again).
func (s *Store) UpdateLazy(ctx context.Context, fn func(*Tx) error) error {
	return s.update(ctx, &request{fn: fn, done: make(chan error, 1), lazy: true, credential: credentialFrom(ctx)})
}

// Flush commits the lazy updates held now and returns once they are
// durable: a reader about to judge from committed state (an MCP session's
// end, which lists the results its session never received) calls it first so
// a delivered record still waiting for a group is not mistaken for missing.
// With nothing held it costs no sync (an update without writes).
func (s *Store) Flush(ctx context.Context) error {
	return s.Update(ctx, func(*Tx) error { return nil })
}

func (s *Store) update(ctx context.Context, r *request) error {
	if err := s.enqueue(ctx, r); err != nil {
		return err
	}
	// Once enqueued the update will be applied or fail as a whole; wait for
	// the answer even if ctx ends, so the caller never mistakes a committed
	// write for a lost one.
	return <-r.done
}

// enqueue hands r to the writer.
func (s *Store) enqueue(ctx context.Context, r *request) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writer builds groups and hands them to the committer, one in flight at a
// time: while group N is being synced, group N+1 is built on top of N's
// writes (reads see them through the batch chain), taking every update that
// arrives until N is durable. If N fails, N+1 was
// built on writes that never happened, so it is failed whole and the writer
// starts again from the committed state.
func (s *Store) writer() {
	defer close(s.done)
	commits := make(chan *batch, 1)
	committerDone := make(chan struct{})
	go func() {
		defer close(committerDone)
		for b := range commits {
			s.commit(b)
		}
	}()
	var prev *batch
	size := s.JournalSize()
	// held are lazy updates waiting for a group to join (UpdateLazy).
	var held []*request
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	closed := false
	for !closed || len(held) > 0 {
		var group []*request
		select {
		case r, ok := <-s.reqs:
			switch {
			case !ok:
				closed = true
			case r.lazy && len(held) < maxGroup:
				held = append(held, r)
				if len(held) == 1 {
					timer.Reset(s.lazyDelay)
				}
				continue
			default:
				group = append(group, r)
			}
		case <-timer.C:
		}
		// Held updates go first: they were asked for before this one.
		group = append(held, group...)
		held = nil
		timer.Stop()
	fill:
		for !closed && len(group) < maxGroup {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					closed = true
					break fill
				}
				group = append(group, r)
			default:
				break fill
			}
		}
		if len(group) == 0 {
			continue
		}
		if prev != nil {
			select {
			case <-prev.committed:
				// It finished while the writer waited for work: its
				// writes are in the KV or, if it failed, never happened;
				// either way the next group is built on the KV alone.
				prev, size = nil, s.JournalSize()
			default:
			}
		}
		b := s.build(group, prev, size)
		if prev != nil {
			// While prev is being synced, updates that arrive join b: they
			// are sent with it the moment prev is durable, instead of
			// waiting in the queue for the group after it (a whole commit
			// more). b is still bounded by maxGroup.
			var err error
		absorb:
			for {
				if closed || len(b.group) >= maxGroup {
					err = <-prev.committed
					break
				}
				select {
				case err = <-prev.committed:
					break absorb
				case r, ok := <-s.reqs:
					if !ok {
						closed = true
						continue
					}
					s.add(b, r)
				}
			}
			if err != nil {
				b.fail(fmt.Errorf("store: not committed: the group before it failed: %w", err))
				prev, size = nil, s.JournalSize()
				continue
			}
			prev.writes = nil // committed: reads go to the KV again
		}
		s.seal(b)
		commits <- b
		prev, size = b, b.size
	}
	close(commits)
	<-committerDone
}

// build runs a group's update functions against a new batch layered over
// prev (the group being committed, if any). More may join it (add) until it
// is sealed.
func (s *Store) build(group []*request, prev *batch, size int64) *batch {
	b := &batch{kv: s.kv, prev: prev, observed: s.onGroup != nil, writes: map[string]*Write{}, size: size, base: size,
		committed: make(chan error, 1), events: s.events}
	for _, r := range group {
		s.add(b, r)
	}
	return b
}

// add runs one update function against b and keeps its writes when it
// succeeds.
func (s *Store) add(b *batch, r *request) {
	b.group = append(b.group, r)
	tx := &Tx{b: b, own: map[string]*Write{}, size: b.size, gate: s.gate.Load(), credential: r.credential}
	err := safeRun(r.fn, tx)
	if err == nil {
		err = tx.err
	}
	b.results = append(b.results, err)
	if err != nil {
		return
	}
	for k, w := range tx.own {
		if _, seen := b.writes[k]; !seen {
			b.order = append(b.order, k)
		}
		b.writes[k] = w
	}
	b.size = tx.size
	b.changed = append(b.changed, tx.changed...)
	b.transitions = append(b.transitions, tx.transitions...)
}

// seal adds the journal size (and, for the first entries, the layout) to a
// batch whose group is complete.
func (s *Store) seal(b *batch) {
	if b.size != b.base {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(b.size))
		b.order = append(b.order, string(journalSizeKey))
		b.writes[string(journalSizeKey)] = &Write{Key: journalSizeKey, Value: v[:]}
		if b.base == 0 {
			b.order = append(b.order, string(formatKey))
			b.writes[string(formatKey)] = &Write{Key: formatKey, Value: []byte(format)}
		}
	}
}

// commit makes a batch durable, then answers its callers. Even a batch
// without writes passes through here, so answers keep commit order.
func (s *Store) commit(b *batch) {
	var err error
	if len(b.order) > 0 {
		writes := make([]Write, 0, len(b.order))
		for _, k := range b.order {
			writes = append(writes, *b.writes[k])
		}
		if err = s.kv.Commit(writes); err != nil {
			s.log.Error("group commit failed", "updates", len(b.group), "error", err)
			b.fail(fmt.Errorf("store: commit: %w", err))
			b.committed <- err
			return
		}
		s.sizeMu.Lock()
		s.size = b.size
		s.sizeMu.Unlock()
	}
	b.committed <- nil
	if b.wroteEvent {
		select {
		case s.eventsC <- struct{}{}:
		default:
		}
	}
	if s.onGroup != nil && len(b.order) > 0 {
		s.onGroup(Group{Updates: len(b.group), Transitions: b.transitions})
	}
	if len(b.changed) > 0 && s.onCommit != nil {
		s.onCommit(b.changed)
	}
	for i, r := range b.group {
		r.done <- b.results[i]
	}
}

// safeRun turns a panic in an update function into an error so one bad
// update cannot take the writer (and every other caller) down.
func safeRun(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: update panicked: %v", p)
		}
	}()
	return fn(tx)
}

// JournalSize is the number of committed journal entries.
func (s *Store) JournalSize() int64 {
	s.sizeMu.RLock()
	defer s.sizeMu.RUnlock()
	return s.size
}

// batch is one group: the writes of its successful functions, the callers
// to answer, and the result of its commit.
type batch struct {
	kv *cachedKV
	// prev is the batch committed while this one was built; its writes
	// are visible to this one's reads until it is committed.
	prev      *batch
	writes    map[string]*Write
	order     []string
	base      int64 // journal size before the batch
	size      int64 // journal size after it
	group     []*request
	results   []error
	changed   []*recordv1.Execution
	committed chan error

	// transitions are the state changes of its successful functions,
	// collected when observed (OnGroup is set).
	transitions []Transition
	observed    bool

	// events derives outbox events (outbox.go); wroteEvent is set when an
	// update wrote one.
	events     EventSource
	wroteEvent bool
}

func (b *batch) get(key []byte) ([]byte, error) {
	for x := b; x != nil; x = x.prev {
		if w, ok := x.writes[string(key)]; ok {
			if w.Delete {
				return nil, ErrNotFound
			}
			return w.Value, nil
		}
		if x != b {
			break // only one batch is ever in flight
		}
	}
	return b.kv.lend(key) // read as the batch's own writes are: never modified
}

// fail answers every caller of the batch with err (nothing was committed).
func (b *batch) fail(err error) {
	for i, r := range b.group {
		if b.results[i] == nil {
			b.results[i] = err
		}
		r.done <- b.results[i]
	}
}

// Tx is one update function's view: committed state, plus the group's writes
// so far, plus its own. Methods are not safe for use outside fn.
type Tx struct {
	b       *batch
	own     map[string]*Write
	size    int64
	changed []*recordv1.Execution
	err     error
	known   map[string]known

	// transitions are the state changes it appended (for OnGroup).
	transitions []Transition
	// gate is the start-up gate open when the update began (nil: none).
	gate *StartupGate
	// credential is stamped on appended records that carry none.
	credential *recordv1.OperatorCredential
}

func (t *Tx) get(key []byte) ([]byte, error) {
	if w, ok := t.own[string(key)]; ok {
		if w.Delete {
			return nil, ErrNotFound
		}
		return w.Value, nil
	}
	return t.b.get(key)
}

func (t *Tx) set(key, value []byte) {
	t.own[string(key)] = &Write{Key: key, Value: value}
}

func (t *Tx) del(key []byte) {
	t.own[string(key)] = &Write{Key: key, Delete: true}
}

// Key constructors.
func execKey(id string) []byte    { return []byte("x/" + id) }
func resultKey(id string) []byte  { return []byte("r/" + id) }
func sessionKey(id string) []byte { return []byte("S/" + id) }
func fpKey(fp string) []byte      { return []byte("f/" + fp) }
func actorKey(actor, id string) []byte {
	return []byte("a/" + actor + "\x00" + id)
}
func sessionExecKey(session, id string) []byte {
	return []byte("n/" + session + "\x00" + id)
}
func stateKey(st recordv1.State, id string) []byte {
	return []byte("s/" + strconv.Itoa(int(st)) + "/" + id)
}
func journalKey(i int64) []byte    { return indexKey('j', i) }
func historyKey(id string) []byte  { return []byte("e/" + id) }
func checkpointKey(n int64) []byte { return indexKey('c', n) }

// indexKey is prefix, '/' and i as 16 hex digits, so keys sort as their
// indexes do (fmt's "%c/%016x", without its cost on every append and read).
func indexKey(prefix byte, i int64) []byte {
	if i < 0 {
		return fmt.Appendf(nil, "%c/%016x", prefix, i) // never written; kept as fmt spells it
	}
	const digits = "0123456789abcdef"
	k := make([]byte, 18)
	k[0], k[1] = prefix, '/'
	for p, u := 17, uint64(i); p >= 2; p, u = p-1, u>>4 {
		k[p] = digits[u&15]
	}
	return k
}

// Execution returns the execution as this update sees it.
//
// While a start-up gate is open, the first read of an execution in an
// update checks it against its journal when its state is one the start-up
// check covers (startupgate.go); a mismatch is an error (and stops the
// control plane).
func (t *Tx) Execution(id string) (*recordv1.Execution, error) {
	x, err := decodeExecution(t.get(execKey(id)))
	if err == nil {
		if _, ok := t.known[id]; !ok {
			if t.gate != nil {
				if err := t.gate.admitTx(t.get, id, x); err != nil {
					return nil, err
				}
			}
			t.remember(id, known{state: x.GetState()})
		}
	}
	return x, err
}

// Fresh declares that id was made for this update and was never stored (a
// new ULID), so the update does not look it up: not as an execution, not in
// the history index.
func (t *Tx) Fresh(id string) {
	t.remember(id, known{created: true})
}

// known is what an update knows of an execution's stored record, so
// PutExecution need not decode it again.
type known struct {
	state   recordv1.State
	created bool // by this update: its index keys were never committed
}

func (t *Tx) remember(id string, k known) {
	if t.known == nil {
		t.known = map[string]known{}
	}
	t.known[id] = k
}

// Latest returns the latest execution recorded for a fingerprint. An index
// entry that points at a missing execution, or at one of another
// fingerprint, is a *StateError (ErrStateMismatch), never "no prior": a
// deleted or redirected record must not turn a retry into a new execution.
// WarmLatest reads what Latest(fingerprint) reads into the read cache, on
// the caller's goroutine: called before the Update that matches, it keeps
// the backend round trip (on PostgreSQL, one per new intent) out of the
// single writer, where it would delay every update of the group. The cache
// stays exact (cachedKV.Get), so this changes no answer.
func (s *Store) WarmLatest(fingerprint string) {
	id, err := s.kv.Get(fpKey(fingerprint))
	if err == nil {
		s.kv.Get(execKey(string(id))) //nolint:errcheck // a warm-up: Latest reports any error
	}
}

func (t *Tx) Latest(fingerprint string) (*recordv1.Execution, error) {
	id, err := t.get(fpKey(fingerprint))
	if err != nil {
		return nil, err
	}
	x, err := t.Execution(string(id))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, stateErr([]Mismatch{{ExecutionID: string(id), JournalIndex: -1, Key: "f/" + fingerprint, Kind: MismatchIndex,
			Detail: "the fingerprint index points at an execution that has no record"}})
	case err != nil:
		return nil, err
	case x.GetFingerprint() != fingerprint:
		return nil, stateErr([]Mismatch{{ExecutionID: string(id), JournalIndex: int64(x.GetJournalIndex()), Key: "f/" + fingerprint, Kind: MismatchIndex,
			Detail: "the fingerprint index points at an execution of another intent"}})
	}
	return x, nil
}

// PutExecution stores x, keeps the state and actor indexes right, and, when
// index is true, makes x the latest execution of its fingerprint.
func (t *Tx) PutExecution(x *recordv1.Execution, index bool) error {
	if x.GetId() == "" {
		return errors.New("store: execution without id")
	}
	id := x.GetId()
	prev, ok := t.known[id]
	if !ok {
		_, err := t.Execution(id)
		switch {
		case errors.Is(err, ErrNotFound):
			prev = known{created: true}
		case err != nil:
			return err
		default:
			prev = t.known[id]
		}
	}
	switch {
	case prev.state == recordv1.State_STATE_UNSPECIFIED: // not stored before
		t.set(actorKey(x.GetActor(), id), nil)
		if sid := x.GetSessionId(); sid != "" {
			t.set(sessionExecKey(sid, id), nil)
		}
	case prev.state != x.GetState():
		key := stateKey(prev.state, id)
		if prev.created {
			delete(t.own, string(key)) // never committed: nothing to delete
		} else {
			t.del(key)
		}
	}
	data, err := proto.Marshal(x)
	if err != nil {
		return fmt.Errorf("store: encode execution: %w", err)
	}
	t.set(execKey(id), data)
	t.set(stateKey(x.GetState(), id), nil)
	if index && x.GetFingerprint() != "" {
		t.set(fpKey(x.GetFingerprint()), []byte(id))
	}
	t.remember(id, known{state: x.GetState(), created: prev.created})
	t.changed = append(t.changed, x)
	return nil
}

// Unindex removes the fingerprint index entry when it points at id, so the
// next identical request creates a new execution.
func (t *Tx) Unindex(fingerprint, id string) {
	if cur, err := t.get(fpKey(fingerprint)); err == nil && string(cur) == id {
		t.del(fpKey(fingerprint))
	}
}

// Session returns the session as this update sees it.
func (t *Tx) Session(id string) (*recordv1.Session, error) {
	return decodeSession(t.get(sessionKey(id)))
}

// PutSession stores a session.
func (t *Tx) PutSession(x *recordv1.Session) error {
	data, err := proto.Marshal(x)
	if err != nil {
		return fmt.Errorf("store: encode session: %w", err)
	}
	t.set(sessionKey(x.GetId()), data)
	return nil
}

// PutResult stores an execution's observed result and returns the SHA-256
// of the bytes stored (ResultSum), which the completed journal record must
// carry as Execution.result_sha256: the result is stored exactly as hashed.
func (t *Tx) PutResult(id string, r *recordv1.Result) ([]byte, error) {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("store: encode result: %w", err)
	}
	t.set(resultKey(id), data)
	return ResultSum(data), nil
}

// Append adds e to the journal as the next leaf, setting e.Index, and
// stores the Merkle tree hashes the new leaf completes. It returns the index.
func (t *Tx) Append(e *recordv1.JournalEntry) (int64, error) {
	n := t.size
	e.Index = uint64(n)
	// The kind's name too, as records before entry_kind had it: a binary
	// one release older (a rollback, an older latch audit) still reads
	// what each record is about. Readers use lifecycle.EntryKindOf.
	if e.Kind == "" {
		e.Kind = lifecycle.EntryKindName(e.GetEntryKind())
	}
	if t.credential != nil && e.GetCredential() == nil {
		e.Credential = proto.Clone(t.credential).(*recordv1.OperatorCredential)
	}
	data, err := journal.EncodeEntry(e)
	if err != nil {
		return 0, err
	}
	hashes, err := journal.StoredHashes(n, data, hashReader(t.get))
	if err != nil {
		return 0, fmt.Errorf("store: journal hashes: %w", err)
	}
	t.set(journalKey(n), encodeLeaf(hashes, data))
	t.indexToken(e, n)                  // tj/ (tokens.go)
	t.indexSession(e, n)                // sj/ (sessionindex.go)
	t.indexSecret(e, n)                 // xd/ (secretcheck.go)
	if err := t.outbox(e); err != nil { // ob/, oq/ (outbox.go)
		return 0, err
	}
	if tr, ok := transitionOf(e); ok && t.b.observed {
		t.transitions = append(t.transitions, tr)
	}
	if id := e.GetExecutionId(); id != "" {
		hist, err := t.history(id)
		if err != nil {
			return 0, fmt.Errorf("store: history of %s: %w", id, err)
		}
		t.set(historyKey(id), binary.BigEndian.AppendUint64(hist, uint64(n)))
	}
	t.size = n + 1
	return n, nil
}

// history returns a copy of an execution's list of journal indexes as this
// update sees it (a copy: the value may belong to the group in flight).
func (t *Tx) history(id string) ([]byte, error) {
	key := historyKey(id)
	if t.known[id].created { // never committed: only this update holds it
		if w, ok := t.own[string(key)]; ok {
			return bytes.Clone(w.Value), nil
		}
		return nil, nil
	}
	v, err := t.get(key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return bytes.Clone(v), err
}

// TreeHash is the Merkle root of the journal as this update sees it.
func (t *Tx) TreeHash() (int64, tlog.Hash, error) {
	h, err := journal.TreeHash(t.size, hashReader(t.get))
	return t.size, h, err
}

// PutCheckpoint stores a signed checkpoint for tree size n.
func (t *Tx) PutCheckpoint(n int64, note []byte) {
	t.set(checkpointKey(n), bytes.Clone(note))
}

// hashReader reads tlog stored hashes through a getter.
type hashReader func([]byte) ([]byte, error)

func (r hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok, err := readStoredHash(r, idx)
		if err != nil {
			return nil, fmt.Errorf("store: journal hash %d: %w", idx, err)
		}
		if !ok {
			return nil, fmt.Errorf("store: journal hash %d is missing or malformed: the data dir is damaged", idx)
		}
		out[i] = h
	}
	return out, nil
}

// A leaf record (the value under j/<n>) holds the tlog stored hashes that
// leaf n completed and then the leaf's data:
//
//	count (1 byte) | count × 32-byte hash (levels 0, 1, ...) | leaf data
//
// Leaf n completes 1 + trailing-ones(n) hashes. Keeping them with the leaf
// writes one key per journal entry instead of three on average.
func encodeLeaf(hashes []tlog.Hash, data []byte) []byte {
	v := make([]byte, 0, 1+len(hashes)*tlog.HashSize+len(data))
	v = append(v, byte(len(hashes)))
	for _, h := range hashes {
		v = append(v, h[:]...)
	}
	return append(v, data...)
}

// decodeLeaf splits a leaf record; ok is false when it is malformed.
func decodeLeaf(v []byte) (hashes, data []byte, ok bool) {
	if len(v) == 0 {
		return nil, nil, false
	}
	end := 1 + int(v[0])*tlog.HashSize
	if v[0] == 0 || len(v) < end {
		return nil, nil, false
	}
	return v[1:end], v[end:], true
}

// readStoredHash finds stored hash index in the record of the leaf that
// completed it: node n at level l is completed by leaf (n+1)<<l - 1, which
// keeps it at position l. ok is false when the hash is absent or the record
// is malformed.
func readStoredHash(get func([]byte) ([]byte, error), index int64) (tlog.Hash, bool, error) {
	level, n := tlog.SplitStoredHashIndex(index)
	v, err := get(journalKey((n+1)<<level - 1))
	if errors.Is(err, ErrNotFound) {
		return tlog.Hash{}, false, nil
	}
	if err != nil {
		return tlog.Hash{}, false, err
	}
	hashes, _, ok := decodeLeaf(v)
	if !ok || len(hashes) < (level+1)*tlog.HashSize {
		return tlog.Hash{}, false, nil
	}
	var h tlog.Hash
	copy(h[:], hashes[level*tlog.HashSize:])
	return h, true, nil
}

func decodeExecution(data []byte, err error) (*recordv1.Execution, error) {
	if err != nil {
		return nil, err
	}
	x := &recordv1.Execution{}
	if err := proto.Unmarshal(data, x); err != nil {
		return nil, fmt.Errorf("store: decode execution: %w", err)
	}
	return x, nil
}

func decodeSession(data []byte, err error) (*recordv1.Session, error) {
	if err != nil {
		return nil, err
	}
	x := &recordv1.Session{}
	if err := proto.Unmarshal(data, x); err != nil {
		return nil, fmt.Errorf("store: decode session: %w", err)
	}
	return x, nil
}

// StoredJournalSize reads the journal length kept in kv (0 for a store
// never written) without opening a Store: for status reports on a store
// another process is writing.
func StoredJournalSize(kv KV) (int64, error) {
	v, err := kv.Get(journalSizeKey)
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(v) != 8:
		return 0, fmt.Errorf("store: journal size record is %d bytes, want 8", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}
