package journal

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/receipt"
)

// Source is a journal as Verify and Export read it. The Badger-backed store
// and the export reader (ReadExport) implement it.
type Source interface {
	// Size is the number of leaf positions the journal claims.
	Size() int64
	// Entry returns the leaf data at position i, 0 <= i < Size(), or an
	// error wrapping ErrEntryNotFound when the position holds nothing.
	// Any other error aborts Verify.
	Entry(i int64) ([]byte, error)
	// StoredHash returns the stored hash at a tlog stored-hash index;
	// ok is false when the source holds none there (an export holds only
	// leaf hashes; a damaged store may miss some).
	StoredHash(index int64) (h tlog.Hash, ok bool, err error)
	// Checkpoints returns every signed checkpoint note kept for the
	// journal, in any order.
	Checkpoints() ([][]byte, error)
}

// Problem kinds.
const (
	// KindModified: a record's bytes are not those the journal committed
	// to. Index is its position.
	KindModified = "modified"
	// KindMissing: no position holds the record with this index (a gap in
	// the entries' index fields, or an empty position). Index is the
	// record's index; a run of missing records is one problem.
	KindMissing = "missing"
	// KindInserted: a position holds a record whose index another
	// position already holds. Index is the position of the extra one.
	KindInserted = "inserted"
	// KindReordered: a position holds a record that belongs elsewhere in
	// the order. Index is the position.
	KindReordered = "reordered"
	// KindReadable: an export line's readable part (its entry, its index
	// field, or a key the format does not have) says something its signed
	// data does not. Index is the line's position; Detail names every
	// differing field. The data itself may still be intact: this is a
	// problem of the export file, not of the journal it was taken from.
	KindReadable = "readable"
	// KindTruncated: a signed checkpoint covers more records than the
	// journal holds. Index is the journal's size (the first record gone).
	KindTruncated = "truncated"
	// KindCheckpoint: a checkpoint whose signature does not verify, or
	// whose root the records do not reproduce when no single record can be
	// blamed. Index is the checkpoint's size (-1 when unreadable).
	KindCheckpoint = "checkpoint"
	// KindStoredHash: records reproduce their stored leaf hashes but not a
	// stored interior hash: one of them was modified together with its
	// leaf hash, or the hash index is damaged. Index is the first leaf the
	// interior hash covers.
	KindStoredHash = "stored_hash"
	// KindFork: a checkpoint an independent witness co-signed (or one of
	// two checkpoints of the same size) has a root the records do not
	// reproduce: the witness, or a reader, was shown a journal other than
	// this one. Index is the checkpoint's size.
	KindFork = "fork"
)

// Problem is one finding of Verify.
type Problem struct {
	Index  int64
	Kind   string
	Detail string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s at %d: %s", p.Kind, p.Index, p.Detail)
}

// Options tune VerifyWith. The zero value is what Verify uses.
type Options struct {
	// CheckpointCopy, when set, is the copy of the checkpoints kept
	// outside the data dir (`--checkpoint-copy`). Its checkpoints are
	// checked like the journal's own, and only they count as anchors:
	// the journal's own checkpoints are signed with a key kept beside
	// them, so whoever can rewrite the journal can re-sign them.
	CheckpointCopy *CheckpointCopy
	// Progress, when set, is called from Verify's goroutine as records
	// are read and hashed (stage StageVerify): every ProgressEvery records
	// and once when all are. Readers of a data dir report their own
	// reading through it too (StageRead).
	Progress func(Progress)
	// WitnessKeys are cosignature verifier keys of witnesses
	// (c2sp.org/tlog-witness, package receipt). A checkpoint one of them
	// co-signed is an anchor held outside Latch; the report says which
	// records no witness co-signed yet (Report.UnwitnessedFrom), and a
	// co-signed checkpoint the records do not reproduce is a KindFork.
	WitnessKeys []string
}

// Progress is how far a long verification is.
type Progress struct {
	Stage       string // StageRead or StageVerify
	Done, Total int64  // records
}

// Progress stages.
const (
	StageRead   = "reading the journal"
	StageVerify = "hashing records"
)

// ProgressEvery is how many records Verify reads between Progress calls.
const ProgressEvery = 1 << 16

// CheckpointCopy is a set of checkpoint notes kept outside the journal.
type CheckpointCopy struct {
	// Name says where the copy came from (a file path), for messages.
	Name string
	// Notes are the signed checkpoint notes, in any order. An empty copy
	// is still a copy: it anchors nothing.
	Notes [][]byte
}

// Report is the result of Verify.
type Report struct {
	// Size is the number of positions verified.
	Size int64
	// Checkpoints is the number of distinct checkpoint notes read, the
	// journal's own and the copy's.
	Checkpoints int
	// Copy names the checkpoint copy checked ("" when none was given) and
	// CopyCheckpoints is how many notes it held.
	Copy            string
	CopyCheckpoints int
	// Verified lists, ascending and without repeats, the sizes of the
	// checkpoints whose signature verified and whose root the records
	// reproduce.
	Verified []int64
	// Anchored is the largest verified checkpoint size with no problem
	// before it: records [0, Anchored) are exactly what was signed.
	Anchored int64
	// NewestCheckpoint is the size of the newest checkpoint whose
	// signature verifies (whatever its root), -1 when there is none.
	NewestCheckpoint int64
	// NewestAnchor is the size of the newest checkpoint counted as an
	// anchor: the copy's newest when a copy was given, else
	// NewestCheckpoint; -1 when there is none.
	NewestAnchor int64
	// UnanchoredFrom: records [UnanchoredFrom, Size) come after the
	// newest anchor, so no signature vouches for them yet ("not yet
	// anchored"). It equals Size when every record is covered.
	UnanchoredFrom int64
	// Witnesses names the witnesses of Options.WitnessKeys. Witnessed is
	// the largest size of a checkpoint one of them co-signed whose root
	// the records reproduce, with no problem before it (-1: none);
	// records [UnwitnessedFrom, Size) no witness has co-signed.
	// Unwitnessed counts the verified checkpoints larger than Witnessed
	// that no witness co-signed, NewestUnwitnessed the largest of them.
	Witnesses                      []string
	Witnessed, UnwitnessedFrom     int64
	Unwitnessed, NewestUnwitnessed int64
	// Problems lists the findings: record problems (readable ones of an
	// export included) by position, then stored-hash, truncation and
	// checkpoint problems. Records that are not yet anchored are not a
	// problem: see Unanchored.
	Problems []Problem
}

// OK reports whether Verify found nothing wrong. Records not yet anchored
// do not count: see Unanchored.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Unanchored is the number of records not yet anchored, [UnanchoredFrom,
// Size).
func (r *Report) Unanchored() int64 { return r.Size - r.UnanchoredFrom }

func (r *Report) String() string {
	var b strings.Builder
	counts := fmt.Sprintf("%s, %s, %s anchored", count(r.Size, "record"), count(int64(r.Checkpoints), "checkpoint"), count(r.Anchored, "record"))
	if r.OK() {
		fmt.Fprintf(&b, "journal ok: %s", counts)
	} else {
		fmt.Fprintf(&b, "journal has %s (%s):", count(int64(len(r.Problems)), "problem"), counts)
		for _, p := range r.Problems {
			b.WriteString("\n  ")
			b.WriteString(p.String())
		}
	}
	for _, s := range []string{r.UnanchoredSummary(), r.UnwitnessedSummary()} {
		if s != "" {
			b.WriteString("\n  ")
			b.WriteString(s)
		}
	}
	return b.String()
}

// UnwitnessedSummary says which records and checkpoints no witness
// co-signed, or "" when no witness key was given or every record is
// co-signed.
func (r *Report) UnwitnessedSummary() string {
	if len(r.Witnesses) == 0 || r.UnwitnessedFrom >= r.Size {
		return ""
	}
	who := "witness " + strings.Join(r.Witnesses, ", ")
	span := recordSpan(r.UnwitnessedFrom, r.Size)
	var s string
	if r.Witnessed < 0 {
		s = fmt.Sprintf("not witnessed: %s: no checkpoint carries a valid cosignature of %s", span, who)
	} else {
		s = fmt.Sprintf("not witnessed: %s come after the newest checkpoint %s co-signed (size %d)", span, who, r.Witnessed)
	}
	if r.Unwitnessed > 0 {
		s += fmt.Sprintf("; %s the witness never co-signed, the newest of size %d (the witness was unreachable, refused it, or never saw it)", count(r.Unwitnessed, "checkpoint"), r.NewestUnwitnessed)
	}
	return s
}

// UnanchoredSummary says which records are not yet anchored and why, or
// "" when every record is.
func (r *Report) UnanchoredSummary() string {
	n := r.Unanchored()
	if n <= 0 {
		return ""
	}
	span := recordSpan(r.UnanchoredFrom, r.Size)
	switch {
	case r.NewestAnchor < 0 && r.Copy == "":
		return fmt.Sprintf("not yet anchored: %s: the journal holds no signed checkpoint at all (a journal truncated with its checkpoints deleted looks the same; check it against a checkpoint copy with --checkpoints)", span)
	case r.NewestAnchor < 0:
		return fmt.Sprintf("not yet anchored: %s: the checkpoint copy %s holds no checkpoint signed by this key", span, r.Copy)
	}
	from := "the newest checkpoint"
	if r.Copy != "" {
		from = "the newest checkpoint of the copy " + r.Copy
	}
	verb := "come"
	if n == 1 {
		verb = "comes"
	}
	s := fmt.Sprintf("not yet anchored: %s %s after %s (size %d)", span, verb, from, r.NewestAnchor)
	if r.Copy != "" && r.NewestCheckpoint > r.NewestAnchor {
		s += fmt.Sprintf("; the journal's own checkpoint of size %d covers them, but its signing key is kept beside the journal", r.NewestCheckpoint)
	}
	return s + "; the next checkpoint anchors them"
}

// count is "1 record", "2 records".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// recordSpan names records [from, to), to > from: "record 7" or "records
// 7 to 9 (3 records)"; "all" when from is 0.
func recordSpan(from, to int64) string {
	all := ""
	if from == 0 {
		all = "all "
	}
	if to-from == 1 {
		if all != "" {
			return "the only record (0)"
		}
		return fmt.Sprintf("record %d", from)
	}
	return fmt.Sprintf("%srecords %d to %d (%d records)", all, from, to-1, to-from)
}

// leaf is what Verify knows of one position.
type leaf struct {
	present bool
	decoded bool
	index   int64 // the entry's own index field, when decoded
	hash    tlog.Hash
}

// verification is one run of Verify: the source, what the checks have
// found so far, and the report they fill in. Each check is one method.
type verification struct {
	src  Source
	v    note.Verifier
	opts Options
	n    int64
	rep  *Report

	leaves   []leaf
	tree     []tlog.Hash // the stored hashes the records produce
	reader   tlog.HashReader
	inserted []bool // positions holding a second record of some index
	// firstBad: records [0, firstBad) have no record-level problem.
	firstBad int64
	// explained: positions already accounted for by a record problem or
	// a displacement (so a stored-hash problem covering them adds nothing).
	explained []bool
	cps       []openedCheckpoint
	witnesses []*receipt.WitnessVerifier
}

// openedCheckpoint is a checkpoint whose signature verified.
type openedCheckpoint struct {
	c        *Checkpoint
	fromCopy bool
	match    bool // c.Size <= journal size and the records reproduce c.Root
	// witnessed are the cosignatures of Options.WitnessKeys it carries.
	witnessed []receipt.Cosigned
}

// Verify checks every invariant of the journal in src (see the package
// documentation) against the checkpoint verifier key. Problems in the
// journal are reported in the Report; an error means the check could not
// be done (a bad key, a Source read failure). It is VerifyWith with the
// zero Options.
//
// How problems are told apart: each entry carries its own index. An index
// no position carries is missing; an index two positions carry is one
// original and one insertion (the original is the one matching the stored
// leaf hash for that index, else the first); positions whose indexes are
// out of ascending order are reordered (when one record moved far, only
// it is reported, not every record it displaced). A record whose bytes do
// not match the stored leaf hash of its position (nor of its own index,
// for a displaced record) is modified. When stored hashes are absent or
// were rewritten, a modification shows only as a checkpoint whose root the
// records do not reproduce; it is then pinned to the record when
// consecutive checkpoint sizes differ by one, and otherwise reported as a
// checkpoint problem naming the range between the two sizes. When src is
// an export (ReadExport), each line's readable part is rebuilt from its
// data and every difference is a KindReadable problem.
//
// Verify reads every record once and keeps the recomputed tree in memory:
// about 130 bytes per record.
func Verify(src Source, verifierKey string) (*Report, error) {
	return VerifyWith(src, verifierKey, Options{})
}

// VerifyWith is Verify with options: a checkpoint copy, a progress callback.
func VerifyWith(src Source, verifierKey string, opts Options) (*Report, error) {
	vr, err := newVerification(src, verifierKey, opts)
	if err != nil {
		return nil, err
	}
	// Record checks, in this order: later ones read what earlier ones
	// found (inserted positions, decoded indexes).
	var records []Problem
	for _, check := range []func() ([]Problem, error){
		vr.readRecords,     // recompute the tree; records that are not entries
		vr.findInserted,    // an index two positions hold
		vr.findMissing,     // an index no position holds
		vr.findReordered,   // records out of order
		vr.checkLeafHashes, // records against their stored leaf hashes
	} {
		ps, err := check()
		if err != nil {
			return nil, err
		}
		records = append(records, ps...)
	}
	vr.noteRecordProblems(records)
	// An export's readable parts do not change what the signed records
	// are, so they do not move firstBad.
	all := append(records, vr.checkReadable()...)
	slices.SortStableFunc(all, func(a, b Problem) int { return cmp.Compare(a.Index, b.Index) })
	vr.rep.Problems = append(vr.rep.Problems, all...)
	// Tree and checkpoint checks, each appending to the report.
	for _, check := range []func() ([]Problem, error){
		vr.checkTreeHashes,  // stored interior hashes against the records'
		vr.openCheckpoints,  // signatures
		vr.checkTruncation,  // checkpoints larger than the journal
		vr.checkRoots,       // checkpoint roots against the records
		vr.measureAnchoring, // anchored prefix, not-yet-anchored tail
	} {
		ps, err := check()
		if err != nil {
			return nil, err
		}
		vr.rep.Problems = append(vr.rep.Problems, ps...)
	}
	return vr.rep, nil
}

func newVerification(src Source, verifierKey string, opts Options) (*verification, error) {
	v, err := note.NewVerifier(verifierKey)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key does not parse: %v", ErrBadKey, err)
	}
	n := src.Size()
	if n < 0 {
		return nil, fmt.Errorf("journal: source reports negative size %d", n)
	}
	vr := &verification{
		src: src, v: v, opts: opts, n: n,
		rep:      &Report{Size: n, NewestCheckpoint: -1, NewestAnchor: -1},
		leaves:   make([]leaf, n),
		tree:     make([]tlog.Hash, 0, tlog.StoredHashCount(n)),
		inserted: make([]bool, n),
		firstBad: n,
	}
	vr.reader = tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(vr.tree)) {
				return nil, fmt.Errorf("journal: hash %d not computed", x)
			}
			out[i] = vr.tree[x]
		}
		return out, nil
	})
	for _, k := range opts.WitnessKeys {
		w, err := receipt.NewWitnessVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
		}
		vr.witnesses = append(vr.witnesses, w)
		vr.rep.Witnesses = append(vr.rep.Witnesses, w.Name())
	}
	vr.rep.Witnessed, vr.rep.NewestUnwitnessed = -1, -1
	if cc := opts.CheckpointCopy; cc != nil {
		vr.rep.Copy = cc.Name
		if vr.rep.Copy == "" {
			vr.rep.Copy = "(unnamed)"
		}
		vr.rep.CopyCheckpoints = len(cc.Notes)
	}
	return vr, nil
}

// readChunk is how many records readRecords reads before hashing them.
const readChunk = 1 << 13

// readRecords reads every position once, recomputes the tree from the
// records and decodes each entry's index. A position whose bytes are not
// an entry is modified. Records are read in order, in chunks; the records
// of a chunk are hashed and their index read on every CPU (hashing is
// most of the cost), then the tree is extended in order.
func (vr *verification) readRecords() ([]Problem, error) {
	workers := runtime.GOMAXPROCS(0)
	data := make([][]byte, min(vr.n, readChunk))
	var problems []Problem
	for start := int64(0); start < vr.n; start += readChunk {
		end := min(start+readChunk, vr.n)
		if vr.opts.Progress != nil && start > 0 && start%ProgressEvery == 0 {
			vr.opts.Progress(Progress{StageVerify, start, vr.n})
		}
		for p := start; p < end; p++ {
			d, err := vr.src.Entry(p)
			switch {
			case errors.Is(err, ErrEntryNotFound):
				d = nil
			case err != nil:
				return nil, fmt.Errorf("journal: read entry %d: %w", p, err)
			default:
				vr.leaves[p].present = true
			}
			data[p-start] = d
		}
		vr.hashLeaves(start, end, data, workers)
		for p := start; p < end; p++ {
			l := &vr.leaves[p]
			if l.present && !l.decoded {
				index, pr, ok := decodeIndex(p, data[p-start])
				if !ok {
					problems = append(problems, pr)
					continue
				}
				l.decoded, l.index = true, index
			}
		}
	}
	if vr.opts.Progress != nil {
		vr.opts.Progress(Progress{StageVerify, vr.n, vr.n})
	}
	return problems, nil
}

// treeBlock is how many leaves one worker hashes together with the
// subtrees among them; a power of two dividing readChunk.
const treeBlock = 1 << 10

// hashLeaves sets the hash, and for entries whose shape entryIndex
// accepts the index, of leaves [start, end), whose data is data[0:], and
// extends vr.tree with their stored hashes (tlog's layout: each leaf hash
// followed by the hashes of the subtrees it completes). start is a
// multiple of readChunk, so each aligned block of treeBlock leaves holds
// its own subtrees: blocks are hashed on every CPU, leaves and subtrees
// alike, and only the few subtrees larger than a block are hashed after,
// in order.
func (vr *verification) hashLeaves(start, end int64, data [][]byte, workers int) {
	vr.tree = slices.Grow(vr.tree, int(tlog.StoredHashCount(end))-len(vr.tree))[:tlog.StoredHashCount(end)]
	tree := vr.tree
	block := func(lo, hi int64) {
		// tlog.RecordHash, SHA-256(0x00 || d), on one hash state per block
		// (RecordHash allocates one per record).
		h := sha256.New()
		for p := lo; p < hi; p++ {
			l := &vr.leaves[p]
			d := data[p-start]
			h.Reset()
			h.Write(leafPrefix[:])
			h.Write(d)
			h.Sum(l.hash[:0])
			tree[tlog.StoredHashIndex(0, p)] = l.hash
			for lvl := 1; int64(1)<<lvl <= treeBlock && (p+1)&(int64(1)<<lvl-1) == 0; lvl++ {
				n := (p+1)>>lvl - 1
				tree[tlog.StoredHashIndex(lvl, n)] = tlog.NodeHash(tree[tlog.StoredHashIndex(lvl-1, 2*n)], tree[tlog.StoredHashIndex(lvl-1, 2*n+1)])
			}
			if !l.present {
				continue
			}
			if index, ok := entryIndex(d); ok && index <= maxIndex {
				l.decoded, l.index = true, int64(index)
			}
		}
	}
	blocks := (end - start + treeBlock - 1) / treeBlock
	if workers < 2 || blocks < 2 {
		block(start, end)
	} else {
		var wg sync.WaitGroup
		per := (blocks + int64(workers) - 1) / int64(workers)
		for b := int64(0); b < blocks; b += per {
			lo, hi := start+b*treeBlock, min(start+(b+per)*treeBlock, end)
			wg.Go(func() { block(lo, hi) })
		}
		wg.Wait()
	}
	// The subtrees larger than a block, completed by each block's last leaf.
	for p := start + treeBlock - 1; p < end; p += treeBlock {
		for lvl := bits.TrailingZeros64(treeBlock) + 1; (p+1)&(int64(1)<<lvl-1) == 0; lvl++ {
			n := (p+1)>>lvl - 1
			tree[tlog.StoredHashIndex(lvl, n)] = tlog.NodeHash(tree[tlog.StoredHashIndex(lvl-1, 2*n)], tree[tlog.StoredHashIndex(lvl-1, 2*n+1)])
		}
	}
}

// leafPrefix starts the hashed form of a leaf (RFC 6962: 0x00 || data).
var leafPrefix = [1]byte{0}

// maxIndex is the largest index an entry may carry.
const maxIndex = 1 << 62

// decodeIndex reads the index of a present record entryIndex refused,
// with the full decoder, which says why a record is not an entry. ok is
// false when it is not, or its index is
// impossible; pr then says so. (entryIndex refuses some entries the
// decoder reads, such as a known field with another wire type, which proto
// keeps as an unknown field.)
func decodeIndex(p int64, data []byte) (index int64, pr Problem, ok bool) {
	e, err := DecodeEntry(data)
	if err != nil {
		return 0, Problem{p, KindModified, fmt.Sprintf("position %d does not hold a journal entry (%v)", p, err)}, false
	}
	if e.GetIndex() > maxIndex {
		return 0, Problem{p, KindModified, fmt.Sprintf("position %d holds an entry with impossible index %d", p, e.GetIndex())}, false
	}
	return int64(e.GetIndex()), Problem{}, true
}

// storedLeaf returns the source's stored leaf hash of position i.
func (vr *verification) storedLeaf(i int64) (tlog.Hash, bool, error) {
	if i < 0 || i > 1<<61 {
		return tlog.Hash{}, false, nil
	}
	h, ok, err := vr.src.StoredHash(tlog.StoredHashIndex(0, i))
	if err != nil {
		return tlog.Hash{}, false, fmt.Errorf("journal: read stored leaf hash %d: %w", i, err)
	}
	return h, ok, nil
}

// findInserted reports the second (and later) positions holding a record
// of one index, and marks them in vr.inserted. The original is the one
// matching the stored leaf hash of that index, else the first.
func (vr *verification) findInserted() ([]Problem, error) {
	// Count the positions of each index; indexes within [0, n) (all of
	// them, in a sound journal) in a slice, the others in a map.
	count := make([]int32, vr.n)
	beyond := make(map[int64]int32)
	dups := false
	for p := range vr.n {
		l := vr.leaves[p]
		if !l.decoded {
			continue
		}
		var c int32
		if l.index < vr.n {
			count[l.index]++
			c = count[l.index]
		} else {
			beyond[l.index]++
			c = beyond[l.index]
		}
		dups = dups || c > 1
	}
	if !dups {
		return nil, nil
	}
	positions := make(map[int64][]int64) // of the indexes held more than once
	for p := range vr.n {
		l := vr.leaves[p]
		if !l.decoded {
			continue
		}
		if (l.index < vr.n && count[l.index] > 1) || beyond[l.index] > 1 {
			positions[l.index] = append(positions[l.index], p)
		}
	}
	var problems []Problem
	for _, j := range slices.Sorted(maps.Keys(positions)) {
		ps := positions[j]
		orig := ps[0]
		if h, ok, err := vr.storedLeaf(j); err != nil {
			return nil, err
		} else if ok {
			for _, p := range ps {
				if vr.leaves[p].hash == h {
					orig = p
					break
				}
			}
		}
		for _, p := range ps {
			if p == orig {
				continue
			}
			vr.inserted[p] = true
			problems = append(problems, Problem{p, KindInserted,
				fmt.Sprintf("position %d holds a second record with index %d (the original is at position %d)", p, j, orig)})
		}
	}
	return problems, nil
}

// findMissing reports the indexes no position holds, a run as one
// problem. Inserted records occupy positions but add no index: the
// journal should hold indexes [0, n-inserted). An undecodable record
// (reported modified) stands for its position's index: it is damaged, not
// missing.
func (vr *verification) findMissing() ([]Problem, error) {
	seen := make([]bool, vr.n) // indexes >= n are never expected
	expected := vr.n
	for p := range vr.n {
		l := vr.leaves[p]
		switch {
		case vr.inserted[p]:
			expected--
		case l.decoded:
			if l.index < vr.n {
				seen[l.index] = true
			}
		case l.present:
			seen[p] = true
		}
	}
	var problems []Problem
	for j := int64(0); j < expected; j++ {
		if seen[j] {
			continue
		}
		end := j
		for end+1 < expected && !seen[end+1] {
			end++
		}
		detail := fmt.Sprintf("no position holds record %d", j)
		if end > j {
			detail = fmt.Sprintf("no position holds records %d to %d (%d records)", j, end, end-j+1)
		}
		problems = append(problems, Problem{j, KindMissing, detail})
		j = end
	}
	return problems, nil
}

// findReordered reports the positions, among those holding a decoded,
// non-inserted entry, whose record is out of order.
func (vr *verification) findReordered() ([]Problem, error) {
	var order []int64 // positions
	for p := range vr.n {
		if vr.leaves[p].decoded && !vr.inserted[p] {
			order = append(order, p)
		}
	}
	var problems []Problem
	for _, p := range reordered(order, vr.leaves) {
		problems = append(problems, Problem{p, KindReordered,
			fmt.Sprintf("position %d holds record %d, out of order", p, vr.leaves[p].index)})
	}
	return problems, nil
}

// checkLeafHashes reports the records whose bytes do not match the stored
// leaf hash of their position (nor, for a displaced record, of their own
// index: the displacement is reported by findReordered).
func (vr *verification) checkLeafHashes() ([]Problem, error) {
	var problems []Problem
	for p := range vr.n {
		l := vr.leaves[p]
		if !l.decoded || vr.inserted[p] {
			continue // absent, undecodable or inserted: already reported
		}
		h, ok, err := vr.storedLeaf(p)
		if err != nil {
			return nil, err
		}
		if !ok || h == l.hash {
			continue
		}
		if l.index != p {
			hj, okj, err := vr.storedLeaf(l.index)
			if err != nil {
				return nil, err
			}
			if okj && hj == l.hash {
				continue
			}
		}
		problems = append(problems, Problem{p, KindModified,
			fmt.Sprintf("record at position %d does not match its stored leaf hash", p)})
	}
	return problems, nil
}

// noteRecordProblems records where the first record problem is and which
// positions the record problems explain, for the tree and checkpoint
// checks.
func (vr *verification) noteRecordProblems(records []Problem) {
	vr.explained = make([]bool, vr.n)
	for p := range vr.n {
		l := vr.leaves[p]
		vr.explained[p] = !l.decoded || l.index != p || vr.inserted[p]
	}
	for _, pr := range records {
		vr.firstBad = min(vr.firstBad, pr.Index)
		if pr.Index >= 0 && pr.Index < vr.n {
			vr.explained[pr.Index] = true
		}
	}
}

// checkReadable returns the readable-part problems of an export source
// (see exportSource.readableProblems); other sources have none.
func (vr *verification) checkReadable() []Problem {
	if ex, ok := vr.src.(*exportSource); ok {
		return slices.Clone(ex.readable)
	}
	return nil
}

// checkTreeHashes compares the source's interior stored hashes (level
// >= 1) with those the records produce, and reports the lowest mismatching
// ones none of whose leaves is already explained.
func (vr *verification) checkTreeHashes() ([]Problem, error) {
	problems, err := storedHashProblems(vr.src, vr.tree, vr.explained)
	for _, pr := range problems {
		vr.firstBad = min(vr.firstBad, pr.Index)
	}
	return problems, err
}

// openCheckpoints opens every distinct checkpoint note, the journal's own
// then the copy's, keeps those whose signature verifies in vr.cps, and
// reports the others.
func (vr *verification) openCheckpoints() ([]Problem, error) {
	own, err := vr.src.Checkpoints()
	if err != nil {
		return nil, fmt.Errorf("journal: read checkpoints: %w", err)
	}
	var copied [][]byte
	if cc := vr.opts.CheckpointCopy; cc != nil {
		copied = cc.Notes
	}
	seen := make(map[string]int) // note → its index in vr.cps, -1 when it did not open
	var problems []Problem
	for i, msg := range slices.Concat(own, copied) {
		fromCopy := i >= len(own)
		if k, ok := seen[string(msg)]; ok {
			if fromCopy && k >= 0 {
				vr.cps[k].fromCopy = true
			}
			continue
		}
		vr.rep.Checkpoints++
		c, err := openCheckpoint(msg, vr.v)
		if err != nil {
			seen[string(msg)] = -1
			size := int64(-1)
			name := "unreadable checkpoint"
			if pc, ok := peekCheckpoint(msg); ok {
				size = pc.Size
				name = fmt.Sprintf("checkpoint of size %d", pc.Size)
			}
			if fromCopy {
				name += " in the copy " + vr.rep.Copy
			}
			problems = append(problems, Problem{size, KindCheckpoint, fmt.Sprintf("%s: %v", name, err)})
			continue
		}
		seen[string(msg)] = len(vr.cps)
		o := openedCheckpoint{c: c, fromCopy: fromCopy}
		for _, w := range vr.witnesses {
			if cs, err := receipt.Cosignature(msg, w); err == nil {
				o.witnessed = append(o.witnessed, cs)
			}
		}
		vr.cps = append(vr.cps, o)
	}
	slices.SortStableFunc(vr.cps, func(a, b openedCheckpoint) int { return cmp.Compare(a.c.Size, b.c.Size) })
	return problems, nil
}

// checkTruncation reports a journal shorter than its largest checkpoint.
func (vr *verification) checkTruncation() ([]Problem, error) {
	if len(vr.cps) == 0 {
		return nil, nil
	}
	longest := vr.cps[len(vr.cps)-1].c
	if longest.Size <= vr.n {
		return nil, nil
	}
	n := vr.n
	return []Problem{{n, KindTruncated,
		fmt.Sprintf("the journal holds %d records but checkpoint of size %d%s covers %d: records %d to %d are gone",
			n, longest.Size, signedAt(longest), longest.Size, n, longest.Size-1)}}, nil
}

// checkRoots compares the root of every checkpoint the journal is long
// enough for with the tree of its first Size records, and reports a
// mismatch no record problem already explains: pinned to one record when
// the last matching size is one less, else as the range between sizes.
func (vr *verification) checkRoots() ([]Problem, error) {
	matched := make(map[int64]bool)
	for i := range vr.cps {
		o := &vr.cps[i]
		if o.c.Size > vr.n {
			continue
		}
		root, err := tlog.TreeHash(o.c.Size, vr.reader)
		if err != nil {
			return nil, fmt.Errorf("journal: tree hash of size %d: %w", o.c.Size, err)
		}
		o.match = root == o.c.Root
		if o.match {
			matched[o.c.Size] = true
		}
	}
	var problems []Problem
	lastGood := int64(0) // largest matching size seen so far (0: the empty tree)
	for _, o := range vr.cps {
		c := o.c
		if c.Size > vr.n {
			continue
		}
		if o.match {
			if !slices.Contains(vr.rep.Verified, c.Size) {
				vr.rep.Verified = append(vr.rep.Verified, c.Size)
			}
			lastGood = c.Size
			continue
		}
		switch {
		case len(o.witnessed) > 0:
			problems = append(problems, Problem{c.Size, KindFork,
				fmt.Sprintf("checkpoint of size %d%s, co-signed by witness %s at %s, signs a root the first %d records do not reproduce: the witness was shown another journal than this one (forked, or rolled back and rewritten); the records up to the last checkpoint they match (size %d) are the ones it saw",
					c.Size, signedAt(c), o.witnessed[0].Witness, o.witnessed[0].Time.Format(time.RFC3339), c.Size, lastGood)})
			vr.firstBad = min(vr.firstBad, lastGood)
		case matched[c.Size]:
			problems = append(problems, Problem{c.Size, KindCheckpoint,
				fmt.Sprintf("checkpoint of size %d%s signs a root other than another checkpoint of the same size, and the records match the other: a forked or forged checkpoint", c.Size, signedAt(c))})
		case c.Size > vr.firstBad:
			// Explained by a record problem before c.Size.
		case c.Size-lastGood == 1:
			problems = append(problems, Problem{lastGood, KindModified,
				fmt.Sprintf("record %d is not the one checkpoint of size %d%s signed (the tree of size %d matches)", lastGood, c.Size, signedAt(c), lastGood)})
			vr.firstBad = lastGood
		default:
			problems = append(problems, Problem{c.Size, KindCheckpoint,
				fmt.Sprintf("the first %d records do not reproduce the root of checkpoint of size %d%s; the last checkpoint they match has size %d: a record between checkpoint sizes %d and %d (positions %d to %d) was modified and its stored hashes rewritten or absent",
					c.Size, c.Size, signedAt(c), lastGood, lastGood, c.Size, lastGood, c.Size-1)})
			vr.firstBad = lastGood
		}
	}
	return problems, nil
}

// measureAnchoring sets the report's anchored prefix (the largest verified
// checkpoint with no problem before it) and its not-yet-anchored tail (the
// records after the newest anchor: the copy's newest checkpoint when a
// copy was given, else the newest checkpoint whose signature verifies).
func (vr *verification) measureAnchoring() ([]Problem, error) {
	rep := vr.rep
	for _, s := range rep.Verified {
		if s <= vr.firstBad {
			rep.Anchored = max(rep.Anchored, s)
		}
	}
	for _, o := range vr.cps {
		rep.NewestCheckpoint = max(rep.NewestCheckpoint, o.c.Size)
		if o.fromCopy || vr.opts.CheckpointCopy == nil {
			rep.NewestAnchor = max(rep.NewestAnchor, o.c.Size)
		}
	}
	rep.UnanchoredFrom = min(max(rep.NewestAnchor, 0), vr.n)
	if len(vr.witnesses) > 0 {
		for _, o := range vr.cps {
			if o.match && len(o.witnessed) > 0 && o.c.Size <= vr.firstBad {
				rep.Witnessed = max(rep.Witnessed, o.c.Size)
			}
		}
		seen := map[int64]bool{}
		for _, o := range vr.cps {
			if o.match && len(o.witnessed) == 0 && o.c.Size > rep.Witnessed && !seen[o.c.Size] {
				seen[o.c.Size] = true
				rep.Unwitnessed++
				rep.NewestUnwitnessed = max(rep.NewestUnwitnessed, o.c.Size)
			}
		}
		rep.UnwitnessedFrom = min(max(rep.Witnessed, 0), vr.n)
	}
	return nil, nil
}

func signedAt(c *Checkpoint) string {
	if c.Time.IsZero() {
		return ""
	}
	return " (signed " + c.Time.UTC().Format("2006-01-02T15:04:05Z07:00") + ")"
}

// reordered returns the positions in order (ascending positions of unique
// decoded entries) whose entries are out of place. A position is out of
// place when its index is not the one of the same rank in the sorted
// indexes. When one record moved far, that rule also flags every record
// it displaced; then only the records off the longest increasing run of
// indexes are reported, which names the moved record alone.
func reordered(order []int64, leaves []leaf) []int64 {
	idx := make([]int64, len(order))
	for i, p := range order {
		idx[i] = leaves[p].index
	}
	if slices.IsSorted(idx) {
		return nil // the indexes are unique here: in order
	}
	sorted := slices.Clone(idx)
	slices.Sort(sorted)
	var byRank []int64
	for i := range idx {
		if idx[i] != sorted[i] {
			byRank = append(byRank, order[i])
		}
	}
	if len(byRank) == 0 {
		return nil
	}
	inLIS := longestIncreasing(idx)
	var offLIS []int64
	for i := range idx {
		if !inLIS[i] {
			offLIS = append(offLIS, order[i])
		}
	}
	if len(byRank) > 2*len(offLIS) {
		return offLIS
	}
	return byRank
}

// longestIncreasing marks the elements of one longest strictly increasing
// subsequence of a (O(n log n) patience method).
func longestIncreasing(a []int64) []bool {
	tails := []int{} // tails[k]: position in a of the smallest tail of an increasing run of length k+1
	prev := make([]int, len(a))
	for i, x := range a {
		k := sort.Search(len(tails), func(k int) bool { return a[tails[k]] >= x })
		if k > 0 {
			prev[i] = tails[k-1]
		} else {
			prev[i] = -1
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	in := make([]bool, len(a))
	if len(tails) == 0 {
		return in
	}
	for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
		in[i] = true
	}
	return in
}

// storedHashProblems compares the source's interior stored hashes (level
// >= 1) with those the records produce, and reports the lowest mismatching
// ones none of whose leaves is already explained.
func storedHashProblems(src Source, tree []tlog.Hash, explained []bool) ([]Problem, error) {
	n := int64(len(explained))
	type node struct {
		level  int
		lo, hi int64
	}
	var bad []node
	for x := range int64(len(tree)) {
		level, k := tlog.SplitStoredHashIndex(x)
		if level == 0 {
			continue
		}
		h, ok, err := src.StoredHash(x)
		if err != nil {
			return nil, fmt.Errorf("journal: read stored hash %d: %w", x, err)
		}
		if ok && h != tree[x] {
			bad = append(bad, node{level, k << level, min((k+1)<<level, n)})
		}
	}
	if len(bad) == 0 {
		return nil, nil
	}
	// covered[i]: leaf i is explained (a record problem, or inside a
	// lower mismatching node already reported).
	covered := slices.Clone(explained)
	slices.SortStableFunc(bad, func(a, b node) int { return cmp.Compare(a.level, b.level) })
	var out []Problem
	prefix := make([]int64, n+1)
	level := -1
	for _, b := range bad {
		if b.level != level { // recompute coverage counts per level
			level = b.level
			for i := range n {
				prefix[i+1] = prefix[i]
				if covered[i] {
					prefix[i+1]++
				}
			}
		}
		if prefix[b.hi]-prefix[b.lo] > 0 {
			continue
		}
		for i := b.lo; i < b.hi; i++ {
			covered[i] = true
		}
		out = append(out, Problem{b.lo, KindStoredHash,
			fmt.Sprintf("records %d to %d match their stored leaf hashes but not the stored tree hash at level %d: one of them was modified with its leaf hash rewritten, or the hash index is damaged", b.lo, b.hi-1, b.level)})
	}
	return out, nil
}
