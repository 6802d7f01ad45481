// Package filekv is a store backend written from outside the core
// packages, to show what a new backend takes: this one package and one
// backends.Register line (in its test). It keeps the key space in memory
// as a sorted slice and appends each committed batch to one file, synced
// before Commit returns; Open replays the file and drops a torn last
// batch. It is for tests only: no compaction, the file only grows. The key
// space itself is memkv's (what a file adds is the log under it).
package filekv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/memkv"
)

// KV is the file-backed backend.
type KV struct {
	mem    *memkv.KV // the key space, as the file's batches left it
	mu     sync.Mutex
	f      *os.File
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
	k := &KV{f: f, mem: memkv.New()}
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
		if err := k.mem.Commit(ws); err != nil {
			return 0, fmt.Errorf("filekv: %w", err)
		}
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

func (k *KV) Get(key []byte) ([]byte, error) { return k.mem.Get(key) }

func (k *KV) Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.mem.Scan(prefix, reverse, fn)
}

func (k *KV) ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.mem.ScanFrom(prefix, start, reverse, fn)
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
	return k.mem.Commit(writes)
}

func (k *KV) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	_ = k.mem.Close()
	return k.f.Close()
}
