package markers

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/internal/atomicfile"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// The mirror log.
//
// Script markers are the only record of a migration script's progress, so
// besides the Badger store they are copied to an append-only file outside
// it (Config.MirrorLog), from which a store that will not open is rebuilt.
// The copy is part of the group commit: for each group the committer
// applies the changes in the Badger transaction, appends one frame holding
// every script marker the group writes to the log and fsyncs it while the
// transaction commits (one WAL fsync), and only then answers the writers.
// Two fsyncs per group, side by side, whatever its size.
//
// The frame's write and fsync run beside the commit, and the writers are
// answered when both are durable, so every state reported is in both.
// A crash can cut off either one for the last group only (the next group
// starts after both): the log may hold a last frame the store never
// committed, or the store a group whose frame never became durable. The
// transaction therefore also records the keys the group may write (the
// Badger key mirror/pending), and Open compares the log's last frame and
// those keys with the store and appends a correction frame with the
// store's markers wherever they differ (a tombstone where the store has
// none). A failed commit or log write is corrected at once the same way.
// Read in order, last write wins, the log then says exactly what the store
// says.
//
// Format: the 8-byte magic mirrorMagic, then frames. A frame is a 4-byte
// little-endian payload length, the 4-byte CRC-32C of the payload, and the
// payload: hostagentv1.Marker messages, each preceded by its length as a
// uvarint. A marker with state unspecified is a tombstone (the ID has no
// marker). A frame cut short or failing its CRC at the end of the file is
// a write the process died in (never acknowledged): Open cuts it off. One
// in the middle is damage: Open moves the log aside and writes a fresh one
// from the store; ReadMirror stops there and says so.
//
// The log is compacted when it grows past max(compactFloor, 2 × its size
// after the last compaction): the committer writes the store's current
// script markers to a temporary file, fsyncs it, renames it over the log
// and fsyncs the directory.

const (
	mirrorMagic     = "LMIRROR1"
	frameHeader     = 8
	maxFramePayload = 64 << 20
	// snapshotFrame bounds the payload of one frame of a snapshot.
	snapshotFrame = 1 << 20
)

// compactFloor is the smallest log size that triggers a compaction (a
// variable for tests).
var compactFloor int64 = 64 << 20

var (
	// ErrMirror means the mirror log could not be written or read; a write
	// that gets it was not made.
	ErrMirror = errors.New("markers: mirror log")

	crcTable = crc32.MakeTable(crc32.Castagnoli)
)

// mirrorLog is the open mirror log. Only the committer goroutine (and Open,
// before it starts) touch it.
type mirrorLog struct {
	path      string
	f         *os.File
	size      int64 // bytes of whole frames; the next frame goes here
	compactAt int64
	broken    error // set after an fsync failure: nothing more is written
	buf       []byte
}

// ReadMirror reads the mirror log at path and returns the last marker of
// every execution ID it holds (tombstones dropped), in the order of their
// last write. A missing file is no markers, and a frame torn at the end of
// the file (a write never acknowledged) is ignored. When the log is damaged, the
// markers read before the damage are returned with an error saying where
// it is.
func ReadMirror(path string) ([]*hostagentv1.Marker, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrMirror, path, err)
	}
	defer f.Close()
	last := make(map[string]*hostagentv1.Marker)
	var order []string
	_, _, err = scanMirror(f, func(ms []*hostagentv1.Marker) {
		for _, m := range ms {
			id := m.GetExecutionId()
			if _, seen := last[id]; !seen {
				order = append(order, id)
			}
			last[id] = m
		}
	})
	out := make([]*hostagentv1.Marker, 0, len(order))
	for _, id := range order {
		if m := last[id]; m.GetState() != hostagentv1.MarkerState_MARKER_STATE_UNSPECIFIED {
			out = append(out, m)
		}
	}
	if err != nil && !errors.Is(err, errTorn) { // a torn end was never acknowledged
		return out, fmt.Errorf("%w: %s: %v", ErrMirror, path, err)
	}
	return out, nil
}

// errTorn is what scanMirror returns for a frame cut short at the end of
// the file: a write that never completed.
var errTorn = errors.New("torn frame at the end")

// scanMirror reads the magic and every whole frame, calling fn with each
// frame's markers. It returns the end of the last whole frame and that
// frame's markers. At a torn end it returns errTorn; at damage elsewhere,
// another error; a short magic in an empty-but-for-it file is torn too.
func scanMirror(r io.Reader, fn func([]*hostagentv1.Marker)) (end int64, lastFrame []*hostagentv1.Marker, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	magic := make([]byte, len(mirrorMagic))
	if n, err := io.ReadFull(br, magic); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return 0, nil, errTorn // created, magic never written
		}
		if allZero(magic[:n]) || bytes.HasPrefix([]byte(mirrorMagic), magic[:n]) {
			return 0, nil, errTorn
		}
		return 0, nil, fmt.Errorf("not a mirror log (bad magic)")
	}
	if string(magic) != mirrorMagic {
		if allZero(magic) {
			if rest, _ := io.ReadAll(br); allZero(rest) {
				return 0, nil, errTorn
			}
		}
		return 0, nil, fmt.Errorf("not a mirror log (bad magic)")
	}
	end = int64(len(mirrorMagic))
	var hdr [frameHeader]byte
	var payload []byte
	for {
		n, err := io.ReadFull(br, hdr[:])
		if errors.Is(err, io.EOF) {
			return end, lastFrame, nil
		}
		if err != nil {
			_ = n
			return end, lastFrame, errTorn
		}
		size := binary.LittleEndian.Uint32(hdr[0:4])
		sum := binary.LittleEndian.Uint32(hdr[4:8])
		if size == 0 || size > maxFramePayload {
			// A zero-filled tail (the size grew, the data never came) is
			// torn; anything else is damage.
			if allZero(hdr[:]) {
				if rest, _ := io.ReadAll(br); allZero(rest) {
					return end, lastFrame, errTorn
				}
			}
			return end, lastFrame, fmt.Errorf("frame at offset %d claims %d bytes", end, size)
		}
		if cap(payload) < int(size) {
			payload = make([]byte, size)
		}
		payload = payload[:size]
		if _, err := io.ReadFull(br, payload); err != nil {
			return end, lastFrame, errTorn
		}
		if crc32.Checksum(payload, crcTable) != sum {
			if _, err := br.Peek(1); errors.Is(err, io.EOF) {
				return end, lastFrame, errTorn // the last frame, half written
			}
			return end, lastFrame, fmt.Errorf("frame at offset %d fails its checksum", end)
		}
		ms, err := decodeFrame(payload)
		if err != nil {
			return end, lastFrame, fmt.Errorf("frame at offset %d: %v", end, err)
		}
		fn(ms)
		end += frameHeader + int64(size)
		lastFrame = ms
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func decodeFrame(p []byte) ([]*hostagentv1.Marker, error) {
	var out []*hostagentv1.Marker
	for len(p) > 0 {
		n, k := protowire.ConsumeVarint(p)
		if k < 0 || n > uint64(len(p)-k) {
			return nil, errors.New("marker length runs past the frame")
		}
		m := &hostagentv1.Marker{}
		if err := proto.Unmarshal(p[k:k+int(n)], m); err != nil {
			return nil, fmt.Errorf("decode marker: %v", err)
		}
		if m.GetExecutionId() == "" {
			return nil, errors.New("marker without execution id")
		}
		out = append(out, m)
		p = p[k+int(n):]
	}
	return out, nil
}

// appendRecord appends one length-prefixed encoded marker to a payload.
func appendRecord(p, enc []byte) []byte {
	p = protowire.AppendVarint(p, uint64(len(enc)))
	return append(p, enc...)
}

// appendFrame frames payload (header, then payload) onto dst.
func appendFrame(dst, payload []byte) []byte {
	var hdr [frameHeader]byte
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(hdr[4:8], crc32.Checksum(payload, crcTable))
	dst = append(dst, hdr[:]...)
	return append(dst, payload...)
}

// openMirror opens (or creates) the log at path next to db. It cuts off a
// torn last frame, corrects the last frame against the store, and replaces
// a damaged or missing log with a snapshot of the store. now names a
// damaged log moved aside.
func openMirror(path string, db *badger.DB, warn func(msg string, args ...any), now time.Time) (*mirrorLog, error) {
	ml := &mirrorLog{path: path}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		// First start with a log (new agent, or one that kept JSON
		// mirrors): the store's markers become the log.
		if err := ml.compact(db); err != nil {
			return nil, err
		}
		return ml, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrMirror, path, err)
	}
	end, last, serr := scanMirror(f, func([]*hostagentv1.Marker) {})
	switch {
	case serr == nil:
	case errors.Is(serr, errTorn):
		if end == 0 {
			_ = f.Close()
			if err := ml.compact(db); err != nil {
				return nil, err
			}
			return ml, nil
		}
		if err := f.Truncate(end); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("%w: cut the torn end of %s: %v", ErrMirror, path, err)
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("%w: fsync %s: %v", ErrMirror, path, err)
		}
	default:
		_ = f.Close()
		aside := fmt.Sprintf("%s.corrupt-%d", path, now.Unix())
		if err := os.Rename(path, aside); err != nil {
			return nil, fmt.Errorf("%w: %s is damaged (%v) and cannot be moved aside: %v", ErrMirror, path, serr, err)
		}
		warn("mirror log damaged: moved aside, writing a fresh one from the store", "error", serr.Error(), "moved_to", aside)
		if err := ml.compact(db); err != nil {
			return nil, err
		}
		return ml, nil
	}
	ml.f, ml.size = f, end
	ml.compactAt = max(compactFloor, 2*end)
	// The last frame may never have been committed, and the last group's
	// commit may be durable while its frame is not (they are fsynced side
	// by side): make the log say what the store says for both.
	keys, logged, err := lastKeys(db, last)
	if err == nil {
		err = ml.correct(db, keys, logged)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return ml, nil
}

// lastKeys returns the keys of the log's last frame, each with the marker
// the log last said for it, and the keys of the store's pendingKey not
// among them, with nil (nothing to compare with).
func lastKeys(db *badger.DB, last []*hostagentv1.Marker) (keys [][]byte, logged []*hostagentv1.Marker, err error) {
	lastOf := make(map[string]*hostagentv1.Marker, len(last))
	for _, m := range last {
		id := m.GetExecutionId()
		if _, seen := lastOf[id]; !seen {
			keys = append(keys, key(Scripts, id))
		}
		lastOf[id] = m // an ID the frame holds twice: its later marker
	}
	for _, k := range keys {
		logged = append(logged, lastOf[string(k[len(Scripts):])])
	}
	err = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(pendingKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			for len(v) > 0 {
				n, k := protowire.ConsumeVarint(v)
				if k < 0 || n > uint64(len(v)-k) {
					return errors.New("damaged pending keys")
				}
				pk := v[k : k+int(n)]
				v = v[k+int(n):]
				if !bytes.HasPrefix(pk, scriptPrefix) || len(pk) == len(Scripts) {
					return errors.New("damaged pending keys")
				}
				if _, ok := lastOf[string(pk[len(Scripts):])]; ok {
					continue
				}
				lastOf[string(pk[len(Scripts):])] = nil
				keys = append(keys, bytes.Clone(pk))
				logged = append(logged, nil)
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: read %s: %v", ErrMirror, pendingKey, err)
	}
	return keys, logged, nil
}

// write appends one frame with the given encoded markers and fsyncs it.
// A failed write leaves the log as it was (the next frame overwrites the
// partial one); a failed fsync breaks the log for good, since what the
// file then holds is unknown.
func (ml *mirrorLog) write(encoded [][]byte) error {
	if ml.broken != nil {
		return ml.broken
	}
	if len(encoded) == 0 {
		return nil
	}
	var payload []byte
	for _, e := range encoded {
		payload = appendRecord(payload, e)
	}
	if len(payload) > maxFramePayload {
		return fmt.Errorf("%w: a group of %d bytes is larger than a frame", ErrMirror, len(payload))
	}
	ml.buf = appendFrame(ml.buf[:0], payload)
	if _, err := ml.f.WriteAt(ml.buf, ml.size); err != nil {
		return fmt.Errorf("%w: write %s: %v", ErrMirror, ml.path, err)
	}
	if err := ml.f.Sync(); err != nil {
		ml.broken = fmt.Errorf("%w: fsync %s failed (%v); restart the agent once the disk is sound (it repairs the log's end from the store)", ErrMirror, ml.path, err)
		return ml.broken
	}
	ml.size += int64(len(ml.buf))
	return nil
}

// correct appends a frame with the store's markers of keys wherever they
// differ from logged (the markers the log last said for them; a nil slice
// or element: compare with nothing, write it).
func (ml *mirrorLog) correct(db *badger.DB, keys [][]byte, logged []*hostagentv1.Marker) error {
	var fix [][]byte
	err := db.View(func(txn *badger.Txn) error {
		for i, k := range keys {
			m, err := getTxn(txn, k)
			switch {
			case errors.Is(err, ErrNotFound):
				m = &hostagentv1.Marker{ExecutionId: string(k[len(Scripts):])}
			case err != nil:
				return err
			}
			if logged != nil && logged[i] != nil && proto.Equal(m, logged[i]) {
				continue
			}
			b, err := proto.Marshal(m)
			if err != nil {
				return fmt.Errorf("markers: encode marker: %w", err)
			}
			fix = append(fix, b)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: read the store to correct %s: %v", ErrMirror, ml.path, err)
	}
	return ml.write(fix)
}

// compact replaces the log with a snapshot of the store's script markers:
// temporary file, fsync, rename, directory fsync.
func (ml *mirrorLog) compact(db *badger.DB) error {
	dir := filepath.Dir(ml.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: create %s: %v", ErrMirror, dir, err)
	}
	tmp, err := atomicfile.Create(ml.path, 0o600)
	if err != nil {
		return fmt.Errorf("%w: create a snapshot of %s: %v", ErrMirror, ml.path, err)
	}
	defer tmp.Abort()
	w := bufio.NewWriterSize(tmp, 1<<20)
	size := int64(len(mirrorMagic))
	if _, err := w.WriteString(mirrorMagic); err != nil {
		return fmt.Errorf("%w: write snapshot: %v", ErrMirror, err)
	}
	var payload, frame []byte
	flush := func() error {
		if len(payload) == 0 {
			return nil
		}
		frame = appendFrame(frame[:0], payload)
		payload = payload[:0]
		size += int64(len(frame))
		_, err := w.Write(frame)
		return err
	}
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: []byte(Scripts)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) error {
				payload = appendRecord(payload, v)
				return nil
			})
			if err != nil {
				return err
			}
			if len(payload) >= snapshotFrame {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return fmt.Errorf("%w: write a snapshot of %s: %v", ErrMirror, ml.path, err)
	}
	f, err := tmp.CommitOpen() // fsync, rename, directory fsync; f appends from here
	if err != nil {
		return fmt.Errorf("%w: install the snapshot of %s: %w", ErrMirror, ml.path, err)
	}
	if ml.f != nil {
		_ = ml.f.Close()
	}
	ml.f = f
	ml.size = size
	ml.compactAt = max(compactFloor, 2*size)
	ml.broken = nil
	return nil
}

func (ml *mirrorLog) close() error {
	if ml == nil || ml.f == nil {
		return nil
	}
	return ml.f.Close()
}
