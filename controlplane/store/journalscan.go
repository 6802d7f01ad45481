package store

import (
	"bytes"
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
// (then data is the record whole, as ScanJournal gives it). hashes and
// data are valid only during the call (on Badger, data is the backend's
// own bytes, lent): copy what you keep.
func (s *Store) ScanJournalWithHashes(fn func(keyIndex int64, data []byte, hashes []tlog.Hash) bool) error {
	return s.ScanJournalRange(0, -1, fn)
}

// ScanJournalRange is ScanJournalWithHashes over the keys from the leaf key
// of index from up to, not including, the leaf key of index to (to < 0: to
// the end), compared as keys: consecutive ranges together see every key
// exactly once, in the order one scan would, whatever malformed keys a
// damaged store holds. Readers scan ranges side by side.
func (s *Store) ScanJournalRange(from, to int64, fn func(keyIndex int64, data []byte, hashes []tlog.Hash) bool) error {
	var perr error
	var buf []tlog.Hash
	var start, stop []byte
	if from > 0 {
		start = journalKey(from)
	}
	if to >= 0 {
		stop = journalKey(to)
	}
	err := s.scanLentFrom([]byte("j/"), start, func(k, v []byte) bool {
		if stop != nil && bytes.Compare(k, stop) >= 0 {
			return false
		}
		i, ok := journalKeyIndex(k[2:])
		if !ok {
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

// journalKeyIndex is strconv.ParseInt(string(hex), 16, 64), without the
// string for the 16 hex digits of a journal key (journalKey).
func journalKeyIndex(hex []byte) (int64, bool) {
	if len(hex) == 16 {
		var v int64
		for _, c := range hex {
			var d byte
			switch {
			case c >= '0' && c <= '9':
				d = c - '0'
			case c >= 'a' && c <= 'f':
				d = c - 'a' + 10
			case c >= 'A' && c <= 'F':
				d = c - 'A' + 10
			default:
				v = -1
			}
			if v < 0 {
				break
			}
			v = v<<4 | int64(d)
		}
		if v >= 0 && hex[0] < '8' {
			return v, true
		}
	}
	i, err := strconv.ParseInt(string(hex), 16, 64)
	return i, err == nil
}
