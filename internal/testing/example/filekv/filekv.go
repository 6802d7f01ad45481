// Package filekv is a store backend written from outside the core
// packages, to show what a new backend takes: this one package and one
// backends.Register line (in its test). It keeps the key space in memory
// as a sorted slice and appends each committed batch to one file, synced
// before Commit returns; Open replays the file and drops a torn last
// batch. It is for tests only: no compaction, the file only grows.
package filekv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// KV is the file-backed backend.
type KV struct {
	mu     sync.RWMutex
	f      *os.File
	keys   []string // sorted
	vals   map[string][]byte
	size   int64 // the file's length: every batch up to it is whole
	closed bool
}

var _ backend.KV = (*KV)(nil)

// A batch on disk: length (4 bytes), CRC-32 of the body (4 bytes), body.
// The body is its writes, each a flag byte (1: delete), the key and the
// value, both length-prefixed (uvarint).

// Open opens (or creates) the file at path and replays it.
func Open(path string) (*KV, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("filekv: %w", err)
	}
	k := &KV{f: f, vals: map[string][]byte{}}
	good, err := k.replay()
	k.size = good
	if err != nil {
		f.Close()
		return nil, err
	}
	// Drop a torn last batch (a crash mid-append): it was never answered.
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("filekv: %w", err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("filekv: %w", err)
	}
	return k, nil
}

// replay applies every whole batch and returns the offset after the last.
func (k *KV) replay() (int64, error) {
	data, err := io.ReadAll(k.f)
	if err != nil {
		return 0, fmt.Errorf("filekv: %w", err)
	}
	var off int64
	for len(data) >= 8 {
		n := binary.BigEndian.Uint32(data)
		if uint64(len(data)-8) < uint64(n) {
			break
		}
		body := data[8 : 8+n]
		if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(data[4:]) {
			break
		}
		ws, err := decode(body)
		if err != nil {
			return 0, err
		}
		k.apply(ws)
		data = data[8+n:]
		off += 8 + int64(n)
	}
	return off, nil
}

func encode(ws []backend.Write) []byte {
	var b []byte
	for _, w := range ws {
		flag := byte(0)
		if w.Delete {
			flag = 1
		}
		b = append(b, flag)
		b = binary.AppendUvarint(b, uint64(len(w.Key)))
		b = append(b, w.Key...)
		b = binary.AppendUvarint(b, uint64(len(w.Value)))
		b = append(b, w.Value...)
	}
	head := make([]byte, 8, 8+len(b))
	binary.BigEndian.PutUint32(head, uint32(len(b)))
	binary.BigEndian.PutUint32(head[4:], crc32.ChecksumIEEE(b))
	return append(head, b...)
}

var errCorrupt = errors.New("filekv: a batch whose checksum holds does not decode")

func decode(b []byte) ([]backend.Write, error) {
	var ws []backend.Write
	field := func() ([]byte, bool) {
		n, m := binary.Uvarint(b)
		if m <= 0 || uint64(len(b)-m) < n {
			return nil, false
		}
		v := bytes.Clone(b[m : m+int(n)])
		b = b[m+int(n):]
		return v, true
	}
	for len(b) > 0 {
		w := backend.Write{Delete: b[0] == 1}
		b = b[1:]
		var ok1, ok2 bool
		w.Key, ok1 = field()
		w.Value, ok2 = field()
		if !ok1 || !ok2 {
			return nil, errCorrupt
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// apply sets or deletes each write in order (k.mu held, or at open).
func (k *KV) apply(ws []backend.Write) {
	for _, w := range ws {
		key := string(w.Key)
		i, found := slices.BinarySearch(k.keys, key)
		switch {
		case w.Delete && found:
			k.keys = slices.Delete(k.keys, i, i+1)
			delete(k.vals, key)
		case !w.Delete:
			if !found {
				k.keys = slices.Insert(k.keys, i, key)
			}
			k.vals[key] = bytes.Clone(w.Value)
		}
	}
}

func (k *KV) Get(key []byte) ([]byte, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return nil, backend.ErrClosed
	}
	v, ok := k.vals[string(key)]
	if !ok {
		return nil, backend.ErrNotFound
	}
	return bytes.Clone(v), nil
}

func (k *KV) Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.ScanFrom(prefix, nil, reverse, fn)
}

func (k *KV) ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	k.mu.RLock()
	if k.closed {
		k.mu.RUnlock()
		return backend.ErrClosed
	}
	// The range of keys with the prefix, cut at start.
	lo := sort.SearchStrings(k.keys, string(prefix))
	hi := lo + sort.Search(len(k.keys)-lo, func(i int) bool { return !bytes.HasPrefix([]byte(k.keys[lo+i]), prefix) })
	if start != nil {
		if !reverse {
			lo = max(lo, sort.SearchStrings(k.keys, string(start)))
		} else {
			hi = min(hi, sort.Search(len(k.keys), func(i int) bool { return k.keys[i] > string(start) }))
		}
	}
	var keys []string
	var vals [][]byte
	if lo < hi {
		keys = slices.Clone(k.keys[lo:hi])
		vals = make([][]byte, len(keys))
		for i, key := range keys {
			vals[i] = bytes.Clone(k.vals[key])
		}
	}
	// Callbacks run unlocked: a read nested in one must not wait on a
	// Commit waiting on this scan.
	k.mu.RUnlock()
	for n := range keys {
		i := n
		if reverse {
			i = len(keys) - 1 - n
		}
		if !fn([]byte(keys[i]), vals[i]) {
			break
		}
	}
	return nil
}

// Commit appends the batch, syncs the file, then applies it.
func (k *KV) Commit(writes []backend.Write) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return backend.ErrClosed
	}
	b := encode(writes)
	_, err := k.f.Write(b)
	if err == nil {
		err = k.f.Sync()
	}
	if err != nil {
		// Cut what was appended, so the next batch follows a whole one.
		if terr := k.f.Truncate(k.size); terr == nil {
			_, _ = k.f.Seek(k.size, io.SeekStart)
		}
		return fmt.Errorf("filekv: commit: %w", err)
	}
	k.size += int64(len(b))
	k.apply(writes)
	return nil
}

func (k *KV) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	return k.f.Close()
}
