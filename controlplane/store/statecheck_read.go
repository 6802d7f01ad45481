package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/store/backend"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The full state check's reading (checkAllFrom): the journal pass, which
// collects the journal in chunks and reads each chunk's records on every
// CPU before it folds them into the per-execution digests in order, and
// the scans of the state held against them (x/, e/, r/, f/), which hand
// over of each key only what the comparison needs: inside each scan, after
// the journal (streamState, the store's own check), or read beforehand, all
// four beside the journal (prescanState, CheckAllFrom). The comparison
// itself (statecheck.go) is the same for both, in the order it always ran.

// stateChunk is how many journal records the journal pass collects before
// reading them (a variable for the tests of chunk boundaries).
var stateChunk = 1 << 12

// entryFacts is what the journal pass reads of one journal record.
type entryFacts struct {
	i    int64
	data []byte
	leaf bool
	// sound: a leaf record that decodes (the journal check reports the
	// others; the state check passes over them).
	sound   bool
	id      []byte // the execution's ID; aliases data (or x)
	changes bool   // changesRecord
	state   recordv1.State
	// fingerprint and result are the snapshot's; they alias data (or x).
	fingerprint, result []byte
	exec                []byte              // the snapshot's wire form, on the fast path (statewire.go)
	x                   *recordv1.Execution // the decoded snapshot, on the slow path
	token               *recordv1.AgentToken
	session             *recordv1.Session
	catalog             *recordv1.CatalogVersion
	pin                 *recordv1.UpstreamToolPin
}

// read reads f's record: from its wire form when the fast path reads it
// (readWireEntry, execFacts), else decoded. Runs on distinct facts at once.
func (f *entryFacts) read() {
	if !f.leaf {
		return
	}
	we, fast := readWireEntry(f.data)
	var w wireDigests
	if fast {
		f.id, f.changes = we.executionID, we.hasExec && !we.attach()
		if we.hasExec {
			w, fast = execFacts(we.execution) // also what makes the entry sound
		}
	}
	if fast {
		f.sound, f.exec, f.state, f.fingerprint, f.result = true, we.execution, w.state, w.fingerprint, w.result
		return
	}
	e := &recordv1.JournalEntry{}
	if proto.Unmarshal(f.data, e) != nil {
		return
	}
	x := e.GetExecution()
	f.sound, f.id, f.changes, f.exec, f.x = true, []byte(e.GetExecutionId()), changesRecord(e), nil, x
	f.state, f.fingerprint, f.result = x.GetState(), []byte(x.GetFingerprint()), x.GetResultSha256()
	if t := e.GetToken(); t != nil && t.GetId() != "" {
		f.token = t
	}
	if ss := e.GetSession(); ss != nil && ss.GetId() != "" {
		f.session = ss
	}
	if c := e.GetCatalog(); c != nil && c.GetVersion() != "" {
		f.catalog = c
	}
	if pin := e.GetUpstreamToolPin(); pin != nil && pin.GetTool() != "" {
		f.pin = pin
	}
}

// journalPass folds the journal into per-execution digests (journaled).
type journalPass struct {
	ctx    context.Context
	rep    *StateReport
	info   map[string]*journaled
	tokens map[string]*recordv1.AgentToken // the last journal record of each token
	// sessions: the last journal record of each agent session
	sessions map[string]journaledSession
	// catalogs: the catalog records, in journal order
	catalogs journaledCatalogs
	// pins: the last journal record of each upstream tool's pin
	pins    map[string]journaledPin
	chunk   []entryFacts
	touched []*journaled // the executions the chunk changed
	dgs     []*digester  // one per worker
}

// newJournalPass starts a pass over a journal of about size records.
func newJournalPass(ctx context.Context, rep *StateReport, size int64) *journalPass {
	p := &journalPass{ctx: ctx, rep: rep, info: make(map[string]*journaled, executionsHint(size)), tokens: map[string]*recordv1.AgentToken{},
		sessions: map[string]journaledSession{}, pins: map[string]journaledPin{},
		chunk: make([]entryFacts, 0, min(stateChunk, int(max(size, 0))+1))}
	for range runtime.GOMAXPROCS(0) {
		p.dgs = append(p.dgs, newDigester())
	}
	return p
}

// add takes one journal record (a JournalLeaves callback); data must stay
// unchanged until flush has run.
func (p *journalPass) add(i int64, data []byte, leaf bool) bool {
	p.rep.Journal++
	p.chunk = append(p.chunk, entryFacts{i: i, data: data, leaf: leaf})
	if len(p.chunk) >= stateChunk {
		p.flush()
	}
	return p.ctx.Err() == nil
}

// flush reads the chunk's records on every CPU, folds them into info in
// journal order, then takes the digests of the snapshots that decide (of
// each execution the chunk changed: its last changing record's, and its
// accepted record's fixed fields) on every CPU. Snapshots a later record
// of the same chunk supersedes are not hashed at all.
func (p *journalPass) flush() {
	c := p.chunk
	parallel(len(c), len(p.dgs), func(_, k int) { c[k].read() })
	p.touched = p.touched[:0]
	for k := range c {
		f := &c[k]
		if !f.sound {
			continue
		}
		if f.token != nil {
			p.tokens[f.token.GetId()] = f.token
		}
		if f.session != nil {
			p.sessions[f.session.GetId()] = journaledSession{index: f.i, session: f.session}
		}
		if f.catalog != nil {
			p.catalogs.add(f.i, f.catalog)
		}
		if f.pin != nil {
			p.pins[f.pin.GetTool()] = journaledPin{index: f.i, pin: f.pin}
		}
		if len(f.id) == 0 {
			continue
		}
		j := p.info[string(f.id)]
		if j == nil {
			j = &journaled{first: -1, last: -1, hist: fnvOffset, pendRest: -1, pendFixed: -1}
			p.info[string(f.id)] = j
		}
		j.n++
		j.hist = fnvIndex(j.hist, f.i)
		if !f.changes {
			continue
		}
		if j.pendRest < 0 {
			p.touched = append(p.touched, j)
		}
		if f.state == recordv1.State_STATE_ACCEPTED {
			j.pendFixed = int32(k)
		}
		j.pendRest = int32(k)
	}
	t := p.touched
	parallel(len(t), len(p.dgs), func(w, k int) { t[k].settle(c, p.dgs[w]) })
	clear(c) // the chunk's data is not kept
	p.chunk = c[:0]
}

// settle sets j from the records of chunk c the journal pass found
// deciding: j.pendFixed, the last accepted record (the fields fixed at
// acceptance), and j.pendRest, the last record that changed the execution.
func (j *journaled) settle(c []entryFacts, dg *digester) {
	if k := j.pendFixed; k >= 0 {
		f := &c[k]
		j.first = f.i
		if f.x == nil {
			_, j.fixed = dg.digests(f.exec, false, true)
			j.fixedWire = true
		} else {
			_, j.fixed = recordDigests(f.x)
			j.fixedWire = false
		}
	}
	f := &c[j.pendRest]
	if f.x == nil {
		j.record, _ = dg.digests(f.exec, true, false)
		j.recordWire, j.result = true, bytes.Clone(f.result)
	} else {
		f.x.JournalIndex = uint64(f.i)
		j.record, _ = recordDigests(f.x)
		j.recordWire, j.result = false, f.result
	}
	s := sha256.Sum256(f.fingerprint)
	j.last, j.state, j.fp = f.i, f.state, [16]byte(s[:16])
	j.pendRest, j.pendFixed = -1, -1
}

// parallelBlock is how many items a worker of parallel takes at a time (a
// variable for the tests).
var parallelBlock = 64

// parallel calls fn(worker, k) for every k in [0, n) on up to workers
// goroutines (worker in [0, workers)), taking blocks of items as each is
// free, so a worker slowed down by other work on the machine is not waited
// for.
func parallel(n, workers int, fn func(worker, k int)) {
	if workers < 2 || n <= parallelBlock {
		for k := range n {
			fn(0, k)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range min(workers, (n+parallelBlock-1)/parallelBlock) {
		wg.Go(func() {
			for {
				lo := int(next.Add(int64(parallelBlock))) - parallelBlock
				if lo >= n {
					return
				}
				for k := lo; k < min(lo+parallelBlock, n); k++ {
					fn(w, k)
				}
			}
		})
	}
	wg.Wait()
}

// stateReader hands the comparison the state, one prefix at a time, each
// in key order: the execution records (x/), history indexes (e/), results
// (r/) and fingerprint index entries (f/), as the comparison needs them.
type stateReader struct {
	records   func(yield func(scannedRecord) bool) error
	histories func(yield func(scannedHistory) bool) error
	results   func(yield func(scannedResult) bool) error
	index     func(yield func(scannedIndex) bool) error
	// wait waits for whatever the reader still runs.
	wait func()
}

// scannedRecord is an execution record as the comparison needs it: its
// wire digests (statewire.go) when the fast path reads it, else the record
// itself.
type scannedRecord struct {
	id           string
	rest, fixed  [16]byte
	journalIndex uint64
	wire         bool
	raw          []byte // when !wire
}

// scannedHistory is a history index: its length in indexes, whether it is
// ragged (not a whole number of them) and its FNV-1a over them.
type scannedHistory struct {
	id     string
	n      int
	ragged bool
	hist   uint64
}

type scannedResult struct {
	id  string
	sum [32]byte // ResultSum of the stored result
}

type scannedIndex struct {
	fp, id string
	fpd    [16]byte // fpDigest(fp)
}

func (s *Store) scanRecords(ctx context.Context, yield func(scannedRecord) bool) error {
	dg := newDigester()
	return s.scanLent([]byte("x/"), func(k, v []byte) bool {
		r := scannedRecord{id: string(k[2:])}
		if w, ok := dg.execution(v); ok {
			r.rest, r.fixed, r.journalIndex, r.wire = w.rest, w.fixed, w.journalIndex, true
		} else {
			r.raw = bytes.Clone(v)
		}
		return yield(r) && ctx.Err() == nil
	})
}

func (s *Store) scanHistories(ctx context.Context, yield func(scannedHistory) bool) error {
	return s.scanLent([]byte("e/"), func(k, v []byte) bool {
		h := uint64(fnvOffset)
		for b := v; len(b) >= 8; b = b[8:] {
			h = fnvIndex(h, int64(binary.BigEndian.Uint64(b)))
		}
		return yield(scannedHistory{id: string(k[2:]), n: len(v) / 8, ragged: len(v)%8 != 0, hist: h}) && ctx.Err() == nil
	})
}

func (s *Store) scanResults(ctx context.Context, yield func(scannedResult) bool) error {
	return s.scanLent([]byte("r/"), func(k, v []byte) bool {
		return yield(scannedResult{id: string(k[2:]), sum: sha256.Sum256(v)}) && ctx.Err() == nil
	})
}

func (s *Store) scanIndex(ctx context.Context, yield func(scannedIndex) bool) error {
	return s.scanLent([]byte("f/"), func(k, v []byte) bool {
		return yield(scannedIndex{fp: string(k[2:]), id: string(v), fpd: fpDigestBytes(k[2:])}) && ctx.Err() == nil
	})
}

// streamState reads each prefix when the comparison asks for it, inside
// the scan: memory stays what the journal pass keeps (the store's own
// check, at start-up and in the background on a large store).
func (s *Store) streamState(ctx context.Context) *stateReader {
	return &stateReader{
		records:   func(y func(scannedRecord) bool) error { return s.scanRecords(ctx, y) },
		histories: func(y func(scannedHistory) bool) error { return s.scanHistories(ctx, y) },
		results:   func(y func(scannedResult) bool) error { return s.scanResults(ctx, y) },
		index:     func(y func(scannedIndex) bool) error { return s.scanIndex(ctx, y) },
		wait:      func() {},
	}
}

// prescanState reads all four prefixes at once, each in its own goroutine,
// while the journal is read, keeping per key only what the comparison
// needs (about 150 to 250 bytes per execution in all): for CheckAllFrom,
// whose caller holds the whole journal in memory anyway.
func (s *Store) prescanState(ctx context.Context) *stateReader {
	var wg sync.WaitGroup
	rd := &stateReader{wait: wg.Wait}
	n := executionsHint(s.JournalSize())
	rd.records = prescan(&wg, n, func(y func(scannedRecord) bool) error { return s.scanRecords(ctx, y) })
	rd.histories = prescan(&wg, n, func(y func(scannedHistory) bool) error { return s.scanHistories(ctx, y) })
	rd.results = prescan(&wg, n, func(y func(scannedResult) bool) error { return s.scanResults(ctx, y) })
	rd.index = prescan(&wg, n, func(y func(scannedIndex) bool) error { return s.scanIndex(ctx, y) })
	return rd
}

// executionsHint is about how many executions a journal of size records
// holds (about four records each: accepted, authorized, dispatched,
// completed), to size what is kept per execution; bounded so that a
// damaged size cannot make it allocate without bound.
func executionsHint(size int64) int { return int(min(max(size, 0)/4, 1<<20)) }

// prescan runs scan now, in a goroutine wg counts, into memory (room made
// for about n items); the returned function waits for it and hands over
// what it read (nothing but the error when it failed).
func prescan[T any](wg *sync.WaitGroup, n int, scan func(yield func(T) bool) error) func(yield func(T) bool) error {
	var (
		list = make([]T, 0, n)
		err  error
		done = make(chan struct{})
	)
	wg.Go(func() {
		defer close(done)
		err = scan(func(t T) bool {
			list = append(list, t)
			return true
		})
	})
	return func(yield func(T) bool) error {
		<-done
		if err != nil {
			return err
		}
		for _, t := range list {
			if !yield(t) {
				break
			}
		}
		return nil
	}
}

// scanLent is Scan (ascending) lending the backend's bytes when it can: fn
// must copy what it keeps of key and value.
func (s *Store) scanLent(prefix []byte, fn func(key, value []byte) bool) error {
	return s.scanLentFrom(prefix, nil, fn)
}

// scanLentFrom is scanLent from start (ScanFrom's start).
func (s *Store) scanLentFrom(prefix, start []byte, fn func(key, value []byte) bool) error {
	kv := s.kv.KV // scans bypass the cache anyway
	if l, ok := kv.(backend.LentScanner); ok {
		return l.ScanFromLent(prefix, start, false, fn)
	}
	return kv.ScanFrom(prefix, start, false, fn)
}

func fpDigestBytes(fp []byte) [16]byte {
	s := sha256.Sum256(fp)
	return [16]byte(s[:16])
}
