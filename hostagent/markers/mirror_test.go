package markers

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

const (
	begun     = hostagentv1.MarkerState_MARKER_STATE_BEGUN
	completed = hostagentv1.MarkerState_MARKER_STATE_COMPLETED
	failed    = hostagentv1.MarkerState_MARKER_STATE_FAILED
)

type mirrorDirs struct {
	dir, log string
}

func newMirrorDirs(t *testing.T) mirrorDirs {
	d := t.TempDir()
	return mirrorDirs{dir: filepath.Join(d, "markers"), log: filepath.Join(d, "scripts.log")}
}

func (m mirrorDirs) open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Config{Dir: m.dir, MirrorLog: m.log, Logger: testLogger(t), Now: func() time.Time { return time.Unix(1700000000, 0) }})
	if err != nil {
		t.Fatalf("Open with mirror log: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func begin(t *testing.T, s *Store, id string) {
	t.Helper()
	if _, created, err := s.Create(Scripts, &hostagentv1.Marker{ExecutionId: id, State: begun}); err != nil || !created {
		t.Fatalf("Create(%s) = created %v, %v", id, created, err)
	}
}

func finish(t *testing.T, s *Store, id string, to hostagentv1.MarkerState) {
	t.Helper()
	if _, err := s.Update(Scripts, id, func(m *hostagentv1.Marker) error { m.State = to; return nil }); err != nil {
		t.Fatalf("Update(%s) = %v", id, err)
	}
}

// sameAsStore checks that the mirror log says exactly what the store does
// for script markers (by ID; the log's order is write order).
func sameAsStore(t *testing.T, s *Store, log string) {
	t.Helper()
	want, err := s.List(Scripts, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadMirror(log)
	if err != nil {
		t.Fatalf("ReadMirror = %v", err)
	}
	byID := func(a, b *hostagentv1.Marker) int { return strings.Compare(a.GetExecutionId(), b.GetExecutionId()) }
	slices.SortFunc(got, byID)
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("mirror log differs from the store (-store +log):\n%s", diff)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// appendRaw appends a frame of markers to the log as a crashed writer
// would have left it.
func appendRaw(t *testing.T, path string, ms ...*hostagentv1.Marker) {
	t.Helper()
	var payload []byte
	for _, m := range ms {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		payload = appendRecord(payload, b)
	}
	appendBytes(t, path, appendFrame(nil, payload))
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorLogFollowsStore: script marker changes (not run markers) reach
// the log, concurrent ones too, and survive a reopen.
func TestMirrorLogFollowsStore(t *testing.T) {
	m := newMirrorDirs(t)
	s := m.open(t)
	begin(t, s, "a")
	finish(t, s, "a", completed)
	begin(t, s, "b")
	if _, _, err := s.Create(Runs, &hostagentv1.Marker{ExecutionId: "r", State: hostagentv1.MarkerState_MARKER_STATE_STARTING}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for i := range 16 {
		go func() {
			defer func() { done <- struct{}{} }()
			id := "c" + strconv.Itoa(i)
			begin(t, s, id)
			finish(t, s, id, failed)
		}()
	}
	for range 16 {
		<-done
	}
	sameAsStore(t, s, m.log)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	size := fileSize(t, m.log)
	s = m.open(t)
	sameAsStore(t, s, m.log)
	if got := fileSize(t, m.log); got != size {
		t.Errorf("a clean reopen changed the log: %d bytes, was %d", got, size)
	}
}

// TestMirrorLogCrashWindows: what a crash can leave at the end of the log
// is made to say what the store says at the next Open.
func TestMirrorLogCrashWindows(t *testing.T) {
	tests := []struct {
		name string
		// damage runs on the closed store's log; size is its length before
		// the last change (begin "b", a new ID: only mirror/pending names
		// it once its frame is gone) was written.
		damage func(t *testing.T, log string, size int64)
	}{
		{"torn frame at the end", func(t *testing.T, log string, _ int64) {
			var hdr [frameHeader]byte
			binary.LittleEndian.PutUint32(hdr[:4], 100)
			appendBytes(t, log, append(hdr[:], "short"...))
		}},
		{"zeros at the end", func(t *testing.T, log string, _ int64) {
			appendBytes(t, log, make([]byte, 4096))
		}},
		{"frame logged, commit never happened", func(t *testing.T, log string, _ int64) {
			appendRaw(t, log, &hostagentv1.Marker{ExecutionId: "x", State: begun}, &hostagentv1.Marker{ExecutionId: "a", State: failed})
		}},
		{"commit durable, frame never written", func(t *testing.T, log string, size int64) {
			if err := os.Truncate(log, size); err != nil {
				t.Fatal(err)
			}
		}},
		{"commit durable, frame half written", func(t *testing.T, log string, size int64) {
			full := fileSize(t, log)
			if err := os.Truncate(log, size+(full-size)/2); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMirrorDirs(t)
			s := m.open(t)
			begin(t, s, "a")
			finish(t, s, "a", completed)
			size := fileSize(t, m.log)
			begin(t, s, "b")
			want, err := s.List(Scripts, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, m.log, size)
			s = m.open(t)
			got, err := s.List(Scripts, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("store changed (-want +got):\n%s", diff)
			}
			sameAsStore(t, s, m.log)
			if aside, _ := filepath.Glob(m.log + ".corrupt-*"); len(aside) != 0 {
				t.Errorf("a crash's leftovers moved the log aside as damaged: %q", aside)
			}
		})
	}
}

// TestMirrorLogDamageMovedAside: a frame failing its checksum with frames
// after it is damage, not a crash: Open keeps the damaged log aside and
// writes a fresh one from the store; ReadMirror returns what came before
// the damage and says where it is.
func TestMirrorLogDamageMovedAside(t *testing.T) {
	m := newMirrorDirs(t)
	s := m.open(t)
	begin(t, s, "a")
	size := fileSize(t, m.log)
	begin(t, s, "b")
	begin(t, s, "c")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(m.log)
	if err != nil {
		t.Fatal(err)
	}
	raw[size+frameHeader+2] ^= 0xff // inside b's frame
	if err := os.WriteFile(m.log, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMirror(m.log)
	if !errors.Is(err, ErrMirror) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("ReadMirror(damaged) error = %v, want ErrMirror naming the checksum", err)
	}
	if len(got) != 1 || got[0].GetExecutionId() != "a" {
		t.Errorf("ReadMirror(damaged) = %v, want a alone (what precedes the damage)", got)
	}
	s = m.open(t)
	sameAsStore(t, s, m.log)
	if aside, _ := filepath.Glob(m.log + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("damaged logs kept aside = %q, want one", aside)
	}
}

// TestMirrorLogCompacts: past its threshold the log is rewritten from the
// store, shorter, and still says what the store says.
func TestMirrorLogCompacts(t *testing.T) {
	old := compactFloor
	compactFloor = 32 << 10
	t.Cleanup(func() { compactFloor = old })
	m := newMirrorDirs(t)
	s := m.open(t)
	big := strings.Repeat("r", 4<<10)
	const updates = 60
	for i := range updates {
		id := "m" + strconv.Itoa(i%4)
		if i < 4 {
			begin(t, s, id)
		}
		if _, err := s.Update(Scripts, id, func(m *hostagentv1.Marker) error { m.ResultJson = big + strconv.Itoa(i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	finish(t, s, "m0", completed)
	if got, written := fileSize(t, m.log), int64(updates*len(big)); got > written/2 {
		t.Errorf("log = %d bytes after %d bytes of results were written, want it compacted to at most half", got, written)
	}
	sameAsStore(t, s, m.log)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = m.open(t)
	finish(t, s, "m1", failed)
	sameAsStore(t, s, m.log)
}

// TestMirrorLogCreatedFromStore: a store that had no log (an older agent)
// gets one holding all its script markers at the first Open with one.
func TestMirrorLogCreatedFromStore(t *testing.T) {
	m := newMirrorDirs(t)
	s := openStore(t, m.dir)
	begin(t, s, "old")
	finish(t, s, "old", completed)
	begin(t, s, "open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = m.open(t)
	sameAsStore(t, s, m.log)
	if got, _ := ReadMirror(m.log); len(got) != 2 {
		t.Errorf("new log holds %d markers, want 2", len(got))
	}
}

// FuzzReadMirror: no input makes the log reader panic, and what it returns
// always has execution IDs.
func FuzzReadMirror(f *testing.F) {
	var payload []byte
	b, _ := proto.Marshal(&hostagentv1.Marker{ExecutionId: "a", State: begun})
	payload = appendRecord(payload, b)
	f.Add(append([]byte(mirrorMagic), appendFrame(nil, payload)...))
	f.Add([]byte(mirrorMagic))
	f.Add([]byte("LMIRR"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		path := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		ms, _ := ReadMirror(path)
		for _, m := range ms {
			if m.GetExecutionId() == "" {
				t.Fatalf("ReadMirror returned a marker without an ID")
			}
		}
	})
}

// TestBrokenMirrorRefusesWrites: after a failed fsync of the log (its
// content is then unknown) no change is committed, so the store never
// moves on without its copy; after a reopen the log says what the store does.
func TestBrokenMirrorRefusesWrites(t *testing.T) {
	m := newMirrorDirs(t)
	s := m.open(t)
	begin(t, s, "a")
	broken := errors.Join(ErrMirror, errors.New("fsync failed (simulated)"))
	// fn runs on the committer goroutine, the only one touching the log.
	if _, err := s.Update(Scripts, "a", func(*hostagentv1.Marker) error { s.mirror.broken = broken; return errRefused }); !errors.Is(err, errRefused) {
		t.Fatal(err)
	}
	if _, _, err := s.Create(Scripts, &hostagentv1.Marker{ExecutionId: "b", State: begun}); !errors.Is(err, ErrMirror) {
		t.Errorf("Create with a broken mirror log = %v, want ErrMirror", err)
	}
	if _, err := s.Get(Scripts, "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(b) after a refused Create = %v, want ErrNotFound", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = m.open(t)
	begin(t, s, "b")
	sameAsStore(t, s, m.log)
}
