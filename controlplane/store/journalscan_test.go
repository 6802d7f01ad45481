package store

import (
	"strconv"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// TestScanJournalWithHashes: every hash the scan hands over is the one
// StoredHash reads at its index, and together they are all of them.
func TestScanJournalWithHashes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *Store) {
		const n = 37
		appendN(t, s, n)
		got := make(map[int64]tlog.Hash)
		var leaves int64
		err := s.ScanJournalWithHashes(func(k int64, data []byte, hashes []tlog.Hash) bool {
			if k != leaves || len(data) == 0 || len(hashes) == 0 {
				t.Errorf("leaf %d: key %d, %d data bytes, %d hashes", leaves, k, len(data), len(hashes))
			}
			if h := tlog.RecordHash(data); h != hashes[0] {
				t.Errorf("leaf %d: hashes[0] = %v, want its leaf hash %v", k, hashes[0], h)
			}
			for l, h := range hashes {
				got[tlog.StoredHashIndex(l, (k+1)>>l-1)] = h
			}
			leaves++
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if leaves != n || int64(len(got)) != tlog.StoredHashCount(n) {
			t.Fatalf("scan gave %d leaves and %d hashes, want %d and %d", leaves, len(got), n, tlog.StoredHashCount(n))
		}
		for x := range tlog.StoredHashCount(n) {
			want, ok, err := s.StoredHash(x)
			if err != nil || !ok || got[x] != want {
				t.Errorf("stored hash %d: scan %v, StoredHash %v (%v, %v)", x, got[x], want, ok, err)
			}
		}
	})
}

// TestJournalKeyIndex: journal keys parse as strconv.ParseInt(hex, 16, 64)
// would, malformed ones included.
func TestJournalKeyIndex(t *testing.T) {
	for _, hex := range []string{"0000000000000000", "000000000000002a", "00000000000000FF", "7fffffffffffffff", "8000000000000000",
		"ffffffffffffffff", "000000000000002g", "+00000000000002a", "-00000000000002a", "2a", "", "00000000000000002a", " 00000000000002a", "0x0000000000002a"} {
		want, werr := strconv.ParseInt(hex, 16, 64)
		got, ok := journalKeyIndex([]byte(hex))
		if ok != (werr == nil) || (ok && got != want) {
			t.Errorf("journalKeyIndex(%q) = %d, %v; strconv says %d, %v", hex, got, ok, want, werr)
		}
	}
}
