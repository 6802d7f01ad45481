package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The whole-store state checks (CheckState) built on the per-execution
// check of consistency.go.

// CheckScope says how much of the store a state check covers.
type CheckScope int

const (
	// CheckAll rebuilds every execution's history from the journal itself
	// and checks every execution record, history index, result and
	// fingerprint index entry against it (audit verify; start-up when the
	// store is small).
	CheckAll CheckScope = iota + 1
	// CheckUnsettled checks, through their history indexes, the executions
	// the control plane acts on at start-up: every one not yet settled
	// (lifecycle.Settled), and not_executed (which may be re-dispatched).
	CheckUnsettled
	// CheckAllLive is CheckAll on a store that is being written (the
	// background pass after a CheckUnsettled start-up): a mismatch about an
	// execution that changed after the pass began, or an index entry that
	// moved, is checked again on a fresh read before it is reported.
	CheckAllLive
)

// StateReport is the outcome of a state check.
type StateReport struct {
	Scope      CheckScope
	Executions int // execution records checked
	Results    int // stored results checked
	Index      int // fingerprint index entries checked
	Tokens     int // agent token records checked (CheckAll)
	Sessions   int // agent session records checked (CheckAll)
	Journal    int // journal records read
	Mismatches []Mismatch
}

// OK reports whether the state agrees with the journal.
func (r *StateReport) OK() bool { return len(r.Mismatches) == 0 }

// Err is a *StateError for the mismatches, or nil.
func (r *StateReport) Err() error { return stateErr(r.Mismatches) }

func (r *StateReport) String() string {
	var b strings.Builder
	what := "all state"
	switch r.Scope {
	case CheckUnsettled:
		what = "unsettled executions"
	case CheckAllLive:
		what = "all state, while serving"
	}
	if r.OK() {
		fmt.Fprintf(&b, "state ok: %d execution records, %d results, %d fingerprint index entries, %d agent tokens and %d agent sessions agree with %d journal records (%s)", r.Executions, r.Results, r.Index, r.Tokens, r.Sessions, r.Journal, what)
		return b.String()
	}
	fmt.Fprintf(&b, "state DISAGREES with the journal: %d mismatch(es) in %d execution records, %d results, %d fingerprint index entries (%s)", len(r.Mismatches), r.Executions, r.Results, r.Index, what)
	for _, m := range r.Mismatches {
		b.WriteString("\n  ")
		b.WriteString(m.String())
	}
	return b.String()
}

// SmallStore is the journal size up to which start-up checks all state
// rather than only the unsettled executions (StartupScope): about 10,000
// executions, whose full check takes well under a second (the full check
// costs about 12 µs per journal record on a 2-core machine).
const SmallStore = 50_000

// StartupScope is the check start-up runs synchronously: everything for a
// store of at most fullUpTo journal records (0: SmallStore; negative:
// never), the unsettled executions otherwise (the rest is checked by a
// background CheckAllLive pass while attach checks each prior it answers from).
func (s *Store) StartupScope(fullUpTo int64) CheckScope {
	if fullUpTo == 0 {
		fullUpTo = SmallStore
	}
	if s.JournalSize() <= fullUpTo {
		return CheckAll
	}
	return CheckUnsettled
}

// CheckState checks committed state against the journal. It reads a
// consistent store only when nothing writes meanwhile (offline, or before
// the engine starts); a background pass on a live store re-checks every
// execution it finds disagreeing through a fresh read before reporting it.
func (s *Store) CheckState(ctx context.Context, scope CheckScope) (*StateReport, error) {
	switch scope {
	case CheckAll:
		return s.checkAll(ctx)
	case CheckAllLive:
		size := s.JournalSize()
		rep, err := s.checkAll(ctx)
		if err != nil {
			return nil, err
		}
		rep.Scope, rep.Mismatches = CheckAllLive, s.recheck(rep.Mismatches, size)
		return rep, nil
	case CheckUnsettled:
		return s.checkUnsettled(ctx)
	}
	return nil, fmt.Errorf("store: unknown check scope %d", scope)
}

func (s *Store) checkUnsettled(ctx context.Context) (*StateReport, error) {
	rep := &StateReport{Scope: CheckUnsettled}
	for st := range recordv1.State_name {
		state := recordv1.State(st)
		if state == recordv1.State_STATE_UNSPECIFIED || (lifecycle.Settled(state) && state != recordv1.State_STATE_NOT_EXECUTED) {
			continue
		}
		prefix := []byte("s/" + strconv.Itoa(int(state)) + "/")
		var ids []string
		if err := s.kv.Scan(prefix, false, func(k, _ []byte) bool {
			ids = append(ids, string(k[len(prefix):]))
			return ctx.Err() == nil
		}); err != nil {
			return nil, fmt.Errorf("store: state check: %w", err)
		}
		for _, id := range ids {
			x, err := s.execution(id)
			if errors.Is(err, ErrNotFound) {
				rep.Mismatches = append(rep.Mismatches, Mismatch{ExecutionID: id, JournalIndex: -1, Key: "x/" + id, Kind: MismatchMissing,
					Detail: "the state index lists this execution as " + lifecycle.Name(state) + " but its record is gone"})
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("store: state check: %w", err)
			}
			rep.Executions++
			if x.GetState() != state {
				rep.Mismatches = append(rep.Mismatches, Mismatch{ExecutionID: id, JournalIndex: int64(x.GetJournalIndex()), Key: "s/" + id, Kind: MismatchRecord,
					Detail: "the state index says " + lifecycle.Name(state) + ", the record says " + lifecycle.Name(x.GetState())})
			}
			ms, _ := checkOne(s.kv.Get, id, x)
			rep.Mismatches = append(rep.Mismatches, ms...)
		}
	}
	return rep, ctx.Err()
}

// journaled is what the full check keeps of one execution while it reads
// the journal: digests, not records, so a million executions fit in a
// couple of hundred megabytes and every later step is a sequential scan.
type journaled struct {
	first, last int64    // journal index of the accepted record and of the last that changed the record
	n           int      // journal records of the execution
	hist        uint64   // FNV-1a over the indexes in order (the e/ list must hash the same)
	record      [16]byte // digest of the expected record without the fields fixed at acceptance
	fixed       [16]byte // digest of those fields, from the accepted record
	fp          [16]byte // digest of the fingerprint
	result      []byte   // committed result hash, if any
	state       recordv1.State
	// recordWire, fixedWire: record, fixed are digests of wire bytes
	// (statewire.go), comparable only with the record's wire digests.
	recordWire, fixedWire bool

	seen, histSeen, resultSeen bool
	// pendRest, pendFixed: the records of the journal pass's current
	// chunk that set record and fixed when it settles (-1: none).
	pendRest, pendFixed int32
}

func digest(m proto.Message) [16]byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m) // a decoded message always encodes
	s := sha256.Sum256(b)
	return [16]byte(s[:16])
}

func fpDigest(fp string) [16]byte {
	s := sha256.Sum256([]byte(fp))
	return [16]byte(s[:16])
}

// recordDigests splits a record (or expected record) into the digest of the
// fields fixed at acceptance and the digest of the rest.
// x is left as it was (the fields are lent out, not copied).
func recordDigests(x *recordv1.Execution) (rest, fixed [16]byte) {
	f := &recordv1.Execution{CanonicalIntent: x.CanonicalIntent, Arguments: x.Arguments, Evidence: x.Evidence}
	x.CanonicalIntent, x.Arguments, x.Evidence = nil, nil, nil
	rest = digest(x)
	x.CanonicalIntent, x.Arguments, x.Evidence = f.CanonicalIntent, f.Arguments, f.Evidence
	return rest, digest(f)
}

func fnvIndex(h uint64, i int64) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

const fnvOffset = 14695981039346656037

// checkAll reads the journal once, in index order, and keeps a digest of
// the record each execution's journal records imply; then it holds every
// record, history index, result and fingerprint index entry against that,
// each in one sequential scan. Only a disagreement is looked at again
// record by record, to say which fields differ.
func (s *Store) checkAll(ctx context.Context) (*StateReport, error) {
	return s.checkAllFrom(ctx, s.readJournalLeaves, false)
}

// JournalLeaves reads a journal in key order: fn gets each record's key
// index and, when the record is a leaf record (leaf true), its entry's
// data; it stops when fn returns false. data must stay unchanged until
// the check that reads it returns (it reads the journal in chunks, on every
// CPU).
type JournalLeaves func(fn func(keyIndex int64, data []byte, leaf bool) bool) error

// CheckAllFrom is CheckState(ctx, CheckAll) reading the journal through
// read instead of from the store: for a reader that already holds the
// store's journal as it is now (audit verify reads it once for the
// journal check and this one). read must hand over every journal record
// of the store, in key order.
//
// Unlike the store's own check, it reads the state (execution records,
// histories, results, fingerprint index) while read runs, each prefix in
// its own goroutine, keeping about 150 to 250 bytes per execution until the
// comparison: a caller holding the journal in memory can spare that.
func (s *Store) CheckAllFrom(ctx context.Context, read JournalLeaves) (*StateReport, error) {
	return s.checkAllFrom(ctx, read, true)
}

// readJournalLeaves is the store's own journal as JournalLeaves.
func (s *Store) readJournalLeaves(fn func(keyIndex int64, data []byte, leaf bool) bool) error {
	var derr error
	err := s.kv.Scan([]byte("j/"), false, func(k, v []byte) bool {
		i, err := strconv.ParseInt(string(k[2:]), 16, 64)
		if err != nil {
			derr = fmt.Errorf("store: journal key %q is malformed", k)
			return false
		}
		_, data, ok := decodeLeaf(v)
		return fn(i, data, ok)
	})
	if err == nil {
		err = derr
	}
	return err
}

// checkAllFrom is the full check on the journal read hands over; with
// prescan, the state is read while the journal is (statecheck_read.go),
// else prefix by prefix after it.
func (s *Store) checkAllFrom(ctx context.Context, read JournalLeaves, prescan bool) (*StateReport, error) {
	rep := &StateReport{Scope: CheckAll}
	scanCtx, cancel := context.WithCancel(ctx)
	var rd *stateReader
	if prescan {
		rd = s.prescanState(scanCtx)
	} else {
		rd = s.streamState(scanCtx)
	}
	defer func() {
		cancel()
		rd.wait()
	}()
	pass := newJournalPass(ctx, rep, s.JournalSize())
	err := read(pass.add)
	if err == nil {
		pass.flush()
	}
	if err != nil {
		return nil, fmt.Errorf("store: state check: read the journal: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	info, tokens, sessions, catalogs := pass.info, pass.tokens, pass.sessions, pass.catalogs
	add := func(id string, idx int64, key string, kind MismatchKind, format string, args ...any) {
		rep.Mismatches = append(rep.Mismatches, Mismatch{ExecutionID: id, JournalIndex: idx, Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	var differ []string
	err = rd.records(func(r scannedRecord) bool {
		id := r.id
		rep.Executions++
		j := info[id]
		if j == nil {
			add(id, -1, "x/"+id, MismatchUnjournaled, "no journal record of this execution exists; the record was not written by this control plane")
			return true
		}
		if j.recordWire && j.fixedWire && r.wire {
			// The journal's digests are of wire bytes: the record's,
			// read the same way, agree only when its bytes are the
			// snapshot's (then it is the record the journal implies).
			j.seen = true
			if len(j.result) > 0 {
				rep.Results++
			}
			if j.last < 0 || j.first < 0 || r.rest != j.record || r.fixed != j.fixed || r.journalIndex != uint64(j.last) {
				differ = append(differ, id)
			}
			return true
		}
		v := r.raw
		if r.wire {
			// Read plainly, but the journal's digests are of decoded
			// records (or not all of wire bytes): decode it.
			var gerr error
			if v, gerr = s.kv.Get(execKey(id)); gerr != nil {
				j.seen = true
				add(id, j.last, "x/"+id, MismatchRecord, "cannot read the record again: %v", gerr)
				return true
			}
		}
		x, err := decodeExecution(v, nil)
		if err != nil {
			j.seen = true
			add(id, j.last, "x/"+id, MismatchRecord, "%v", err)
			return true
		}
		j.seen = true
		if len(j.result) > 0 {
			rep.Results++
		}
		rest, fixed := recordDigests(x)
		if j.last < 0 || j.first < 0 || j.recordWire || j.fixedWire || rest != j.record || fixed != j.fixed {
			differ = append(differ, id)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("store: state check: read execution records: %w", err)
	}
	for _, id := range differ {
		j := info[id]
		x, err := s.execution(id)
		if err != nil {
			add(id, j.last, "x/"+id, MismatchRecord, "cannot read the record again: %v", err)
			continue
		}
		if j.last < 0 || j.first < 0 {
			add(id, j.last, "x/"+id, MismatchHistory, "the journal holds no accepted record and state of this execution")
			continue
		}
		first, ferr := entryAt(s.kv.Get, j.first)
		last, lerr := entryAt(s.kv.Get, j.last)
		if ferr != nil || lerr != nil {
			add(id, j.last, "x/"+id, MismatchRecord, "differs from the journal (its records cannot be read again: %v %v)", ferr, lerr)
			continue
		}
		want := expectedRecord(first, last)
		if j.recordWire || j.fixedWire {
			// Only the bytes differed (see statewire.go): the decoded
			// records decide, as the digests of checkAll's slow path do.
			wrest, wfixed := recordDigests(want)
			if rest, fixed := recordDigests(x); rest == wrest && fixed == wfixed {
				continue
			}
		}
		add(id, j.last, "x/"+id, MismatchRecord, "differs from the journal in %s", diffFields(want, x))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var missing []string
	for id, j := range info {
		if !j.seen {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	for _, id := range missing {
		j := info[id]
		add(id, j.last, "x/"+id, MismatchMissing, "the journal records this execution (last as %s) but its record is gone", lifecycle.Name(j.state))
	}
	err = rd.histories(func(h scannedHistory) bool {
		id := h.id
		j := info[id]
		if j == nil {
			add(id, -1, "e/"+id, MismatchUnjournaled, "a history index exists for an execution the journal does not hold")
			return true
		}
		j.histSeen = true
		if h.ragged || h.n != j.n || h.hist != j.hist {
			stored, _ := historyOf(s.kv.Get, id)
			add(id, j.last, "e/"+id, MismatchHistory, "the history index lists journal records %v, not the %d records the journal holds for it", stored, j.n)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("store: state check: read history indexes: %w", err)
	}
	for _, id := range missing {
		if j := info[id]; !j.histSeen {
			add(id, j.last, "e/"+id, MismatchHistory, "the history index of this execution is gone")
		}
	}
	for id, j := range info {
		if j.seen && !j.histSeen {
			add(id, j.last, "e/"+id, MismatchHistory, "the history index of this execution is gone")
		}
	}
	err = rd.results(func(r scannedResult) bool {
		id := r.id
		j := info[id]
		switch {
		case j == nil || !j.seen:
			rep.Results++
			add(id, j.lastIndex(), "r/"+id, MismatchUnjournaled, "a result is stored for an execution that has no record")
		case len(j.result) == 0:
			add(id, j.last, "r/"+id, MismatchResult, "a result is stored but no journal record commits one")
		case !bytes.Equal(r.sum[:], j.result):
			add(id, j.last, "r/"+id, MismatchResult, "the stored result hashes to %s, the journal commits %s", ResultRef(r.sum[:]), ResultRef(j.result))
		}
		if j != nil {
			j.resultSeen = true
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("store: state check: read results: %w", err)
	}
	for id, j := range info {
		if j.seen && len(j.result) > 0 && !j.resultSeen {
			add(id, j.last, "r/"+id, MismatchResult, "the journal commits result %s but no result is stored", ResultRef(j.result))
		}
	}
	var foreign []int // mismatches whose intent's own execution is looked up below
	err = rd.index(func(f scannedIndex) bool {
		rep.Index++
		fp, id := f.fp, f.id
		j := info[id]
		switch {
		case j == nil || !j.seen:
			add(id, j.lastIndex(), "f/"+fp, MismatchIndex, "the fingerprint index points at an execution that has no record")
		case j.fp != f.fpd:
			foreign = append(foreign, len(rep.Mismatches))
			add(id, j.last, "f/"+fp, MismatchIndex, "the fingerprint index points at %s, an execution of another intent", id)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("store: state check: read the fingerprint index: %w", err)
	}
	if len(foreign) > 0 {
		s.nameOwners(rep.Mismatches, foreign, info)
	}
	if rep.Tokens, err = s.checkTokens(ctx, tokens, int64(rep.Journal), add); err != nil {
		return nil, err
	}
	if rep.Sessions, err = s.checkSessions(ctx, sessions, int64(rep.Journal), add); err != nil {
		return nil, err
	}
	if err = s.checkCatalog(ctx, catalogs, int64(rep.Journal), add); err != nil {
		return nil, err
	}
	if err = s.checkRows(ctx, pass.pins, int64(rep.Journal), add); err != nil {
		return nil, err
	}
	sort.SliceStable(rep.Mismatches, func(a, b int) bool {
		x, y := rep.Mismatches[a], rep.Mismatches[b]
		if x.ExecutionID != y.ExecutionID {
			return x.ExecutionID < y.ExecutionID
		}
		return x.Key < y.Key
	})
	return rep, ctx.Err()
}

// lastIndex is the last journal index of j, -1 for none.
func (j *journaled) lastIndex() int64 {
	if j == nil {
		return -1
	}
	return j.last
}

// nameOwners rewrites redirected-index mismatches to name the newest
// execution whose record carries the indexed fingerprint (one more scan of
// x/, only when such a mismatch exists).
func (s *Store) nameOwners(ms []Mismatch, which []int, info map[string]*journaled) {
	want := map[[16]byte]int{}
	for _, i := range which {
		want[fpDigest(strings.TrimPrefix(ms[i].Key, "f/"))] = i
	}
	s.kv.Scan([]byte("x/"), false, func(k, v []byte) bool { //nolint:errcheck // naming is best effort
		x, err := decodeExecution(v, nil)
		if err != nil {
			return true
		}
		if i, ok := want[fpDigest(x.GetFingerprint())]; ok {
			ms[i].ExecutionID = x.GetId()
			ms[i].JournalIndex = info[x.GetId()].lastIndex()
			if !strings.Contains(ms[i].Detail, "; the newest") {
				ms[i].Detail += "; the newest execution of this intent is " + x.GetId()
			} else {
				ms[i].Detail = ms[i].Detail[:strings.Index(ms[i].Detail, "; the newest")] + "; the newest execution of this intent is " + x.GetId()
			}
		}
		return true
	})
}

// recheck re-reads what each mismatch is about and keeps it only when it
// still stands: an execution written since the pass began (journal size
// then: size) is checked again through its history index; an index entry
// that now points at a matching execution is dropped.
func (s *Store) recheck(ms []Mismatch, size int64) []Mismatch {
	var out []Mismatch
	done := map[string]bool{}
	for _, m := range ms {
		if m.Kind == MismatchIndex {
			fp := strings.TrimPrefix(m.Key, "f/")
			if id, err := s.kv.Get(fpKey(fp)); err == nil {
				if x, err := s.execution(string(id)); err == nil && x.GetFingerprint() == fp {
					continue
				}
			}
			out = append(out, m)
			continue
		}
		x, err := s.execution(m.ExecutionID)
		changed := err == nil && int64(x.GetJournalIndex()) >= size
		if h, herr := historyOf(s.kv.Get, m.ExecutionID); err == nil && herr == nil && lastOf(h) >= size {
			changed = true // an attach record since (it changes no record)
		}
		if !changed {
			out = append(out, m)
			continue
		}
		if !done[m.ExecutionID] {
			done[m.ExecutionID] = true
			if _, again, _, err := s.checkCommitted(m.ExecutionID); err != nil {
				out = append(out, m)
			} else {
				out = append(out, again...)
			}
		}
	}
	return out
}

func lastOf(h []int64) int64 {
	if len(h) == 0 {
		return -1
	}
	return h[len(h)-1]
}
