package audit

import (
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
)

// journalCopy is a data dir's journal read into memory in one scan: the
// leaf records in key order and the stored hashes they carry, so that
// verification does no lookup per hash.
type journalCopy struct {
	entries [][]byte
	// keys[p] is the key index of position p; leaf[p] is false when its
	// value is not a leaf record (entries[p] is then the value whole).
	keys []int64
	leaf []bool
	// stored[x] is the stored hash at index x, when have[x]; indexes
	// past the scanned journal's own (a damaged store's) are in extra.
	stored []tlog.Hash
	have   []bool
	extra  map[int64]tlog.Hash
}

// maxLeafKey bounds the leaf keys whose hashes are kept: past it
// tlog.StoredHashIndex overflows, and Verify never asks (it looks at most
// at 1<<61).
const maxLeafKey = 1 << 61

// readParts is how many ranges of a journal of at least minParallelRead
// records readJournal scans side by side (decoding Badger's blocks is
// most of the cost of reading).
var (
	readParts             = runtime.GOMAXPROCS(0)
	minParallelRead int64 = 1 << 15
)

// arenaBlock is the size of the blocks readJournal copies records into.
const arenaBlock = 1 << 20

// readJournal reads the journal, calling progress (when set) every
// journal.ProgressEvery records. A large journal is read in readParts
// consecutive key ranges at once, put together in key order.
func readJournal(st *store.Store, progress func(journal.Progress)) (*journalCopy, error) {
	j := &journalCopy{extra: make(map[int64]tlog.Hash)}
	type leafHash struct {
		index int64
		hash  tlog.Hash
	}
	// The size the store records: the usual number of leaves, bounded
	// so that a damaged count cannot make this allocate without bound.
	size := min(max(st.JournalSize(), 0), 1<<24)
	parts := readParts
	if size < minParallelRead || parts < 1 {
		parts = 1
	}
	type part struct {
		arena   []byte // the block the part's records are being copied into
		entries [][]byte
		keys    []int64
		leaf    []bool
		hashes  []leafHash
		err     error
	}
	ps := make([]part, parts)
	var (
		read   atomic.Int64
		progMu sync.Mutex
		wg     sync.WaitGroup
	)
	for w := range parts {
		from, to := size*int64(w)/int64(parts), size*int64(w+1)/int64(parts)
		if w == parts-1 {
			to = -1 // the last range reads to the end, keys past the size too
		}
		p := &ps[w]
		p.entries = make([][]byte, 0, size/int64(parts)+1)
		p.keys = make([]int64, 0, size/int64(parts)+1)
		p.leaf = make([]bool, 0, size/int64(parts)+1)
		p.hashes = make([]leafHash, 0, 2*(size/int64(parts)+1))
		wg.Go(func() {
			p.err = st.ScanJournalRange(from, to, func(k int64, lent []byte, hs []tlog.Hash) bool {
				// The scan lends its bytes: copy them into the part's
				// current block (one allocation per arenaBlock bytes, none
				// per record, and nothing for the collector to trace).
				if cap(p.arena)-len(p.arena) < len(lent) {
					p.arena = make([]byte, 0, max(arenaBlock, len(lent)))
				}
				off := len(p.arena)
				p.arena = append(p.arena, lent...)
				data := p.arena[off:len(p.arena):len(p.arena)]
				p.entries = append(p.entries, data)
				p.keys = append(p.keys, k)
				p.leaf = append(p.leaf, hs != nil)
				if n := read.Add(1); progress != nil && n%journal.ProgressEvery == 0 {
					progMu.Lock()
					progress(journal.Progress{Stage: journal.StageRead, Done: n, Total: max(size, n)})
					progMu.Unlock()
				}
				if k < 0 || k > maxLeafKey {
					return true
				}
				for l, h := range hs {
					if (k+1)&(1<<l-1) != 0 {
						break // no stored-hash index reads this position of the record
					}
					p.hashes = append(p.hashes, leafHash{tlog.StoredHashIndex(l, (k+1)>>l-1), h})
				}
				return true
			})
		})
	}
	wg.Wait()
	total := 0
	for _, p := range ps {
		if p.err != nil {
			return nil, p.err
		}
		total += len(p.entries)
	}
	j.entries = make([][]byte, 0, total)
	j.keys, j.leaf = make([]int64, 0, total), make([]bool, 0, total)
	for _, p := range ps {
		j.entries = append(j.entries, p.entries...)
		j.keys = append(j.keys, p.keys...)
		j.leaf = append(j.leaf, p.leaf...)
	}
	count := tlog.StoredHashCount(int64(len(j.entries)))
	j.stored, j.have = make([]tlog.Hash, count), make([]bool, count)
	for _, p := range ps {
		for _, lh := range p.hashes {
			if lh.index < count {
				j.stored[lh.index], j.have[lh.index] = lh.hash, true
			} else {
				j.extra[lh.index] = lh.hash
			}
		}
	}
	return j, nil
}

// storedHash is what the store's StoredHash returns for index, from memory.
func (j *journalCopy) storedHash(index int64) (tlog.Hash, bool) {
	if index >= 0 && index < int64(len(j.stored)) {
		return j.stored[index], j.have[index]
	}
	h, ok := j.extra[index]
	return h, ok
}

// leaves hands the journal read to the state check (store.JournalLeaves),
// which then need not read it again.
func (j *journalCopy) leaves(fn func(keyIndex int64, data []byte, leaf bool) bool) error {
	for p, data := range j.entries {
		if !fn(j.keys[p], data, j.leaf[p]) {
			return nil
		}
	}
	return nil
}
