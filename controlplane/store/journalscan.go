package store

import (
	"fmt"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"
)

// ScanJournalWithHashes is ScanJournal that also hands over the stored
// hashes each leaf record carries, so an offline reader can serve
// StoredHash from memory instead of one lookup per hash: hashes[l] is the
// stored hash at tlog.StoredHashIndex(l, (keyIndex+1)>>l - 1), the level-l
// node leaf keyIndex completes (hashes[0] is its leaf hash), exactly what
// StoredHash reads for that index. hashes is nil for a malformed record
// (then data is the record whole, as ScanJournal gives it) and is valid
// only during the call; data is a copy.
func (s *Store) ScanJournalWithHashes(fn func(keyIndex int64, data []byte, hashes []tlog.Hash) bool) error {
	var perr error
	var buf []tlog.Hash
	err := s.kv.Scan([]byte("j/"), false, func(k, v []byte) bool {
		i, err := strconv.ParseInt(string(k[2:]), 16, 64)
		if err != nil {
			perr = fmt.Errorf("store: journal key %q is malformed", k)
			return false
		}
		raw, data, ok := decodeLeaf(v)
		if !ok {
			return fn(i, v, nil)
		}
		buf = buf[:0]
		for l := 0; (l+1)*tlog.HashSize <= len(raw); l++ {
			var h tlog.Hash
			copy(h[:], raw[l*tlog.HashSize:])
			buf = append(buf, h)
		}
		return fn(i, data, buf)
	})
	if err == nil {
		err = perr
	}
	return err
}
