package journal

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
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

// Report is the result of Verify.
type Report struct {
	// Size is the number of positions verified.
	Size int64
	// Checkpoints is the number of checkpoint notes read.
	Checkpoints int
	// Verified lists, ascending, the sizes of the checkpoints whose
	// signature verified and whose root the records reproduce.
	Verified []int64
	// Anchored is the largest verified checkpoint size with no problem
	// before it: records [0, Anchored) are exactly what was signed.
	Anchored int64
	// Problems lists the findings: record problems by position, then
	// stored-hash, truncation and checkpoint problems.
	Problems []Problem
}

// OK reports whether Verify found nothing wrong.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) String() string {
	if r.OK() {
		return fmt.Sprintf("journal ok: %d records, %d checkpoints, %d records anchored", r.Size, r.Checkpoints, r.Anchored)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "journal has %d problems (%d records, %d checkpoints, %d records anchored):", len(r.Problems), r.Size, r.Checkpoints, r.Anchored)
	for _, p := range r.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// leaf is what Verify knows of one position.
type leaf struct {
	present bool
	decoded bool
	index   int64 // the entry's own index field, when decoded
	hash    tlog.Hash
}

// Verify checks every invariant of the journal in src (see the package
// documentation) against the checkpoint verifier key. Problems in the
// journal are reported in the Report; an error means the check could not
// be done (a bad key, a Source read failure).
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
// checkpoint problem naming the range between the two sizes.
//
// Verify reads every record once and keeps the recomputed tree in memory:
// about 100 bytes per record.
func Verify(src Source, verifierKey string) (*Report, error) {
	v, err := note.NewVerifier(verifierKey)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key does not parse: %v", ErrBadKey, err)
	}
	n := src.Size()
	if n < 0 {
		return nil, fmt.Errorf("journal: source reports negative size %d", n)
	}
	rep := &Report{Size: n}

	// Pass 1: read every position, recompute the tree from the records.
	leaves := make([]leaf, n)
	tree := make([]tlog.Hash, 0, tlog.StoredHashCount(n))
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(tree)) {
				return nil, fmt.Errorf("journal: hash %d not computed", x)
			}
			out[i] = tree[x]
		}
		return out, nil
	})
	var recordProblems []Problem
	for p := range n {
		data, err := src.Entry(p)
		switch {
		case errors.Is(err, ErrEntryNotFound):
			data = nil
		case err != nil:
			return nil, fmt.Errorf("journal: read entry %d: %w", p, err)
		default:
			leaves[p].present = true
		}
		l := &leaves[p]
		l.hash = tlog.RecordHash(data)
		hs, err := tlog.StoredHashesForRecordHash(p, l.hash, reader)
		if err != nil {
			return nil, fmt.Errorf("journal: hash leaf %d: %w", p, err)
		}
		tree = append(tree, hs...)
		if !l.present {
			continue
		}
		e, err := DecodeEntry(data)
		if err != nil {
			recordProblems = append(recordProblems, Problem{p, KindModified,
				fmt.Sprintf("position %d does not hold a journal entry (%v)", p, err)})
			continue
		}
		if e.GetIndex() > 1<<62 {
			recordProblems = append(recordProblems, Problem{p, KindModified,
				fmt.Sprintf("position %d holds an entry with impossible index %d", p, e.GetIndex())})
			continue
		}
		l.decoded, l.index = true, int64(e.GetIndex())
	}

	storedLeaf := func(i int64) (tlog.Hash, bool, error) {
		if i < 0 || i > 1<<61 {
			return tlog.Hash{}, false, nil
		}
		h, ok, err := src.StoredHash(tlog.StoredHashIndex(0, i))
		if err != nil {
			return tlog.Hash{}, false, fmt.Errorf("journal: read stored leaf hash %d: %w", i, err)
		}
		return h, ok, nil
	}

	// Pass 2: duplicates (inserted).
	inserted := make([]bool, n)
	positions := make(map[int64][]int64)
	for p := range n {
		if leaves[p].decoded {
			positions[leaves[p].index] = append(positions[leaves[p].index], p)
		}
	}
	for _, j := range slices.Sorted(maps.Keys(positions)) {
		ps := positions[j]
		if len(ps) < 2 {
			continue
		}
		orig := ps[0]
		if h, ok, err := storedLeaf(j); err != nil {
			return nil, err
		} else if ok {
			for _, p := range ps {
				if leaves[p].hash == h {
					orig = p
					break
				}
			}
		}
		for _, p := range ps {
			if p == orig {
				continue
			}
			inserted[p] = true
			recordProblems = append(recordProblems, Problem{p, KindInserted,
				fmt.Sprintf("position %d holds a second record with index %d (the original is at position %d)", p, j, orig)})
		}
	}

	// Pass 3: missing indexes and out-of-order positions, over the
	// positions that hold a decoded, non-inserted entry.
	var order []int64 // positions
	seen := make(map[int64]bool)
	for p := range n {
		if leaves[p].decoded && !inserted[p] {
			order = append(order, p)
			seen[leaves[p].index] = true
		}
	}
	// An undecodable record (reported modified) stands for its position's
	// index: it is damaged, not missing.
	for p := range n {
		if leaves[p].present && !leaves[p].decoded {
			seen[p] = true
		}
	}
	// Inserted records occupy positions but add no index: the journal
	// should hold indexes [0, n-inserted).
	expected := n
	for _, ins := range inserted {
		if ins {
			expected--
		}
	}
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
		recordProblems = append(recordProblems, Problem{j, KindMissing, detail})
		j = end
	}
	for _, p := range reordered(order, leaves) {
		recordProblems = append(recordProblems, Problem{p, KindReordered,
			fmt.Sprintf("position %d holds record %d, out of order", p, leaves[p].index)})
	}

	// Pass 4: stored leaf hashes.
	for p := range n {
		l := leaves[p]
		if !l.present || !l.decoded || inserted[p] {
			continue // absent, or already reported
		}
		h, ok, err := storedLeaf(p)
		if err != nil {
			return nil, err
		}
		if !ok || h == l.hash {
			continue
		}
		if l.decoded && l.index != p {
			// A displaced record: compare with the hash stored for its
			// own index; its displacement is reported above.
			hj, okj, err := storedLeaf(l.index)
			if err != nil {
				return nil, err
			}
			if okj && hj == l.hash {
				continue
			}
		}
		recordProblems = append(recordProblems, Problem{p, KindModified,
			fmt.Sprintf("record at position %d does not match its stored leaf hash", p)})
	}
	slices.SortStableFunc(recordProblems, func(a, b Problem) int { return cmp.Compare(a.Index, b.Index) })
	rep.Problems = append(rep.Problems, recordProblems...)

	firstBad := n // records [0, firstBad) have no record-level problem
	for _, pr := range recordProblems {
		firstBad = min(firstBad, pr.Index)
	}

	// Pass 5: interior stored hashes.
	// Positions already explained: record problems and displaced records.
	explained := make([]bool, n)
	for p := range n {
		l := leaves[p]
		explained[p] = !l.decoded || l.index != p || inserted[p]
	}
	for _, pr := range recordProblems {
		if pr.Index >= 0 && pr.Index < n {
			explained[pr.Index] = true
		}
	}
	shp, err := storedHashProblems(src, tree, explained)
	if err != nil {
		return nil, err
	}
	rep.Problems = append(rep.Problems, shp...)
	for _, pr := range shp {
		firstBad = min(firstBad, pr.Index)
	}

	// Pass 6: checkpoints.
	msgs, err := src.Checkpoints()
	if err != nil {
		return nil, fmt.Errorf("journal: read checkpoints: %w", err)
	}
	rep.Checkpoints = len(msgs)
	type opened struct {
		c     *Checkpoint
		match bool
	}
	var cps []opened
	var longest *Checkpoint
	for _, msg := range msgs {
		c, err := openCheckpoint(msg, v)
		if err != nil {
			size := int64(-1)
			name := "unreadable checkpoint"
			if pc, ok := peekCheckpoint(msg); ok {
				size = pc.Size
				name = fmt.Sprintf("checkpoint of size %d", pc.Size)
			}
			rep.Problems = append(rep.Problems, Problem{size, KindCheckpoint, fmt.Sprintf("%s: %v", name, err)})
			continue
		}
		if c.Size > n {
			if longest == nil || c.Size > longest.Size {
				longest = c
			}
			continue
		}
		root, err := tlog.TreeHash(c.Size, reader)
		if err != nil {
			return nil, fmt.Errorf("journal: tree hash of size %d: %w", c.Size, err)
		}
		cps = append(cps, opened{c, root == c.Root})
	}
	if longest != nil {
		rep.Problems = append(rep.Problems, Problem{n, KindTruncated,
			fmt.Sprintf("the journal holds %d records but checkpoint of size %d%s covers %d: records %d to %d are gone",
				n, longest.Size, signedAt(longest), longest.Size, n, longest.Size-1)})
	}
	sort.SliceStable(cps, func(a, b int) bool { return cps[a].c.Size < cps[b].c.Size })
	matched := make(map[int64]bool)
	for _, o := range cps {
		if o.match {
			matched[o.c.Size] = true
		}
	}
	lastGood := int64(0) // largest matching size seen so far (0: the empty tree)
	for _, o := range cps {
		c := o.c
		if o.match {
			rep.Verified = append(rep.Verified, c.Size)
			lastGood = c.Size
			continue
		}
		switch {
		case matched[c.Size]:
			rep.Problems = append(rep.Problems, Problem{c.Size, KindCheckpoint,
				fmt.Sprintf("checkpoint of size %d%s signs a root other than another checkpoint of the same size, and the records match the other: a forked or forged checkpoint", c.Size, signedAt(c))})
		case c.Size > firstBad:
			// Explained by a record problem before c.Size.
		case c.Size-lastGood == 1:
			rep.Problems = append(rep.Problems, Problem{lastGood, KindModified,
				fmt.Sprintf("record %d is not the one checkpoint of size %d%s signed (the tree of size %d matches)", lastGood, c.Size, signedAt(c), lastGood)})
			firstBad = lastGood
		default:
			rep.Problems = append(rep.Problems, Problem{c.Size, KindCheckpoint,
				fmt.Sprintf("the first %d records do not reproduce the root of checkpoint of size %d%s; the last checkpoint they match has size %d: a record between checkpoint sizes %d and %d (positions %d to %d) was modified and its stored hashes rewritten or absent",
					c.Size, c.Size, signedAt(c), lastGood, lastGood, c.Size, lastGood, c.Size-1)})
			firstBad = lastGood
		}
	}
	for _, s := range rep.Verified {
		if s <= firstBad {
			rep.Anchored = max(rep.Anchored, s)
		}
	}
	return rep, nil
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
