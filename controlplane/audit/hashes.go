package audit

import (
	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
)

// journalCopy is a data dir's journal read into memory in one scan: the
// leaf records in key order and the stored hashes they carry, so that
// verification does no lookup per hash.
type journalCopy struct {
	entries [][]byte
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

// readJournal reads the journal, calling progress (when set) every
// journal.ProgressEvery records.
func readJournal(st *store.Store, progress func(journal.Progress)) (*journalCopy, error) {
	j := &journalCopy{extra: make(map[int64]tlog.Hash)}
	type leafHash struct {
		index int64
		hash  tlog.Hash
	}
	// The size the store records: the usual number of leaves, bounded
	// so that a damaged count cannot make this allocate without bound.
	size := min(max(st.JournalSize(), 0), 1<<24)
	j.entries = make([][]byte, 0, size)
	hashes := make([]leafHash, 0, 2*size)
	err := st.ScanJournalWithHashes(func(k int64, data []byte, hs []tlog.Hash) bool {
		j.entries = append(j.entries, data)
		if progress != nil && len(j.entries)%journal.ProgressEvery == 0 {
			progress(journal.Progress{Stage: journal.StageRead, Done: int64(len(j.entries)), Total: max(size, int64(len(j.entries)))})
		}
		if k < 0 || k > maxLeafKey {
			return true
		}
		for l, h := range hs {
			if (k+1)&(1<<l-1) != 0 {
				break // no stored-hash index reads this position of the record
			}
			hashes = append(hashes, leafHash{tlog.StoredHashIndex(l, (k+1)>>l-1), h})
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	count := tlog.StoredHashCount(int64(len(j.entries)))
	j.stored, j.have = make([]tlog.Hash, count), make([]bool, count)
	for _, lh := range hashes {
		if lh.index < count {
			j.stored[lh.index], j.have[lh.index] = lh.hash, true
		} else {
			j.extra[lh.index] = lh.hash
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
