package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const testOrigin = "latch.test/activity"

// memJournal is an in-memory Source, built the way the store builds a
// journal, that tests then tamper with.
type memJournal struct {
	entries     [][]byte // nil: hole
	hashes      map[int64]tlog.Hash
	checkpoints [][]byte
}

var _ Source = (*memJournal)(nil)

func (m *memJournal) Size() int64 { return int64(len(m.entries)) }

func (m *memJournal) Entry(i int64) ([]byte, error) {
	if i < 0 || i >= int64(len(m.entries)) || m.entries[i] == nil {
		return nil, fmt.Errorf("mem: %w", ErrEntryNotFound)
	}
	return m.entries[i], nil
}

func (m *memJournal) StoredHash(index int64) (tlog.Hash, bool, error) {
	h, ok := m.hashes[index]
	return h, ok, nil
}

func (m *memJournal) Checkpoints() ([][]byte, error) { return m.checkpoints, nil }

func (m *memJournal) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		h, ok := m.hashes[x]
		if !ok {
			return nil, fmt.Errorf("mem: no hash %d", x)
		}
		out[i] = h
	}
	return out, nil
}

// append adds leaf data at the next position with its stored hashes.
func (m *memJournal) append(tb testing.TB, data []byte) {
	tb.Helper()
	n := int64(len(m.entries))
	hs, err := StoredHashes(n, data, m)
	if err != nil {
		tb.Fatalf("StoredHashes(%d): %v", n, err)
	}
	for i, h := range hs {
		m.hashes[tlog.StoredHashIndex(0, n)+int64(i)] = h
	}
	m.entries = append(m.entries, data)
}

// rehash recomputes every stored hash from the current entries, as an
// attacker covering their tracks would.
func (m *memJournal) rehash(tb testing.TB) {
	tb.Helper()
	entries := m.entries
	m.entries, m.hashes = nil, map[int64]tlog.Hash{}
	for _, e := range entries {
		m.append(tb, e)
	}
}

func (m *memJournal) sign(tb testing.TB, s *Signer, size int64) {
	tb.Helper()
	root, err := TreeHash(size, m)
	if err != nil {
		tb.Fatalf("TreeHash(%d): %v", size, err)
	}
	msg, err := s.Sign(size, root, time.Date(2026, 11, 30, 4, 0, int(size), 0, time.UTC))
	if err != nil {
		tb.Fatalf("Sign(%d): %v", size, err)
	}
	m.checkpoints = append(m.checkpoints, msg)
}

func testEntry(i int64, reason string) *recordv1.JournalEntry {
	return &recordv1.JournalEntry{
		Index:       uint64(i),
		Time:        timestamppb.New(time.Date(2026, 11, 30, 4, 0, 0, int(i), time.UTC)),
		ExecutionId: fmt.Sprintf("act_%02d", i/3),
		From:        recordv1.State(i % 3),
		To:          recordv1.State(i%3 + 1),
		Kind:        "transition",
		Reason:      reason,
		Actor:       "agent:ci",
	}
}

func encode(tb testing.TB, e *recordv1.JournalEntry) []byte {
	tb.Helper()
	b, err := EncodeEntry(e)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func testKeys(tb testing.TB) (*Signer, string) {
	tb.Helper()
	_, s, vkey := testKeyPair(tb)
	return s, vkey
}

func testKeyPair(tb testing.TB) (skey string, s *Signer, vkey string) {
	tb.Helper()
	skey, vkey, err := GenerateKey(testOrigin)
	if err != nil {
		tb.Fatal(err)
	}
	s, err = NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	return skey, s, vkey
}

// newJournal builds n records and signs checkpoints at the given sizes.
func newJournal(tb testing.TB, s *Signer, n int64, cps ...int64) *memJournal {
	tb.Helper()
	m := &memJournal{hashes: map[int64]tlog.Hash{}}
	for i := range n {
		m.append(tb, encode(tb, testEntry(i, "ok")))
		for _, c := range cps {
			if c == i+1 {
				m.sign(tb, s, c)
			}
		}
	}
	if slices.Contains(cps, 0) {
		m.sign(tb, s, 0)
	}
	return m
}

func TestEncodeEntryDeterministic(t *testing.T) {
	e := testEntry(7, "why")
	e.Execution = &recordv1.Execution{}
	a, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		b, err := EncodeEntry(e)
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("EncodeEntry is not deterministic: %x vs %x (%v)", a, b, err)
		}
	}
	d, err := DecodeEntry(a)
	if err != nil || d.GetIndex() != 7 || d.GetReason() != "why" {
		t.Fatalf("DecodeEntry(EncodeEntry(e)) = %v, %v", d, err)
	}
	if _, err := EncodeEntry(nil); !errors.Is(err, ErrMalformedEntry) {
		t.Errorf("EncodeEntry(nil) error = %v, want ErrMalformedEntry", err)
	}
	if _, err := DecodeEntry([]byte{0xff, 0xff}); !errors.Is(err, ErrMalformedEntry) {
		t.Errorf("DecodeEntry(garbage) error = %v, want ErrMalformedEntry", err)
	}
}

// TestStoredHashLayout checks that hashes stored as documented serve
// tlog's inclusion and consistency proofs.
func TestStoredHashLayout(t *testing.T) {
	s, _ := testKeys(t)
	m := newJournal(t, s, 13)
	if got, want := int64(len(m.hashes)), tlog.StoredHashCount(13); got != want {
		t.Fatalf("stored %d hashes for 13 leaves, want %d", got, want)
	}
	root, err := TreeHash(13, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(13) {
		p, err := tlog.ProveRecord(13, i, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckRecord(p, 13, root, i, LeafHash(m.entries[i])); err != nil {
			t.Errorf("CheckRecord(leaf %d): %v", i, err)
		}
	}
	old, _ := TreeHash(5, m)
	p, err := tlog.ProveTree(13, 5, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(p, 13, root, 5, old); err != nil {
		t.Errorf("CheckTree(5 -> 13): %v", err)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	s, vkey := testKeys(t)
	if s.Origin() != testOrigin {
		t.Errorf("Origin() = %q, want %q", s.Origin(), testOrigin)
	}
	root := tlog.RecordHash([]byte("x"))
	when := time.Date(2026, 11, 30, 4, 5, 6, 789, time.FixedZone("x", 3600))
	tests := []struct {
		name string
		size int64
		t    time.Time
	}{
		{"with time", 42, when},
		{"without time", 7, time.Time{}},
		{"empty tree", 0, when},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := s.Sign(tt.size, root, tt.t)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(msg), fmt.Sprintf("%s\n%d\n", testOrigin, tt.size)) {
				t.Errorf("checkpoint text = %q, want origin and size lines first", msg)
			}
			c, err := OpenCheckpoint(msg, vkey)
			if err != nil {
				t.Fatalf("OpenCheckpoint: %v", err)
			}
			if c.Origin != testOrigin || c.Size != tt.size || c.Root != root || !c.Time.Equal(tt.t) {
				t.Errorf("OpenCheckpoint = %+v, want size %d root %v time %v", c, tt.size, root, tt.t)
			}
		})
	}
	if _, err := s.Sign(-1, root, when); !errors.Is(err, ErrMalformedCheckpoint) {
		t.Errorf("Sign(-1) error = %v, want ErrMalformedCheckpoint", err)
	}
}

func TestOpenCheckpointRefuses(t *testing.T) {
	skey, s, vkey := testKeyPair(t)
	root := tlog.RecordHash([]byte("x"))
	good, err := s.Sign(10, root, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// Same name, other key: a forger without our key.
	otherSkey, _, _ := GenerateKey(testOrigin)
	other, _ := NewSigner(otherSkey)
	forged, _ := other.Sign(10, root, time.Time{})
	// The text edited after signing.
	edited := bytes.Replace(good, []byte("\n10\n"), []byte("\n11\n"), 1)
	// Signed by our key but with a wrong origin line.
	rawSigner, _ := note.NewSigner(skey)
	wrongOrigin, _ := note.Sign(&note.Note{Text: "other.origin\n10\n" + b64(root) + "\n"}, rawSigner)
	badSize, _ := note.Sign(&note.Note{Text: testOrigin + "\n010\n" + b64(root) + "\n"}, rawSigner)
	badRoot, _ := note.Sign(&note.Note{Text: testOrigin + "\n10\nAAAA\n"}, rawSigner)
	short, _ := note.Sign(&note.Note{Text: testOrigin + "\n10\n"}, rawSigner)
	badTime, _ := note.Sign(&note.Note{Text: testOrigin + "\n10\n" + b64(root) + "\ntime yesterday\n"}, rawSigner)
	twoTimes, _ := note.Sign(&note.Note{Text: testOrigin + "\n10\n" + b64(root) + "\ntime 2026-01-01T00:00:00Z\ntime 2026-01-01T00:00:00Z\n"}, rawSigner)

	tests := []struct {
		name string
		msg  []byte
		want error
	}{
		{"other key", forged, ErrBadSignature},
		{"edited text", edited, ErrBadSignature},
		{"no signature", []byte(testOrigin + "\n10\n" + b64(root) + "\n"), ErrMalformedCheckpoint},
		{"garbage", []byte("hello"), ErrMalformedCheckpoint},
		{"wrong origin", wrongOrigin, ErrMalformedCheckpoint},
		{"non-canonical size", badSize, ErrMalformedCheckpoint},
		{"short root", badRoot, ErrMalformedCheckpoint},
		{"no root line", short, ErrMalformedCheckpoint},
		{"bad time", badTime, ErrMalformedCheckpoint},
		{"two time lines", twoTimes, ErrMalformedCheckpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := OpenCheckpoint(tt.msg, vkey)
			if !errors.Is(err, tt.want) {
				t.Fatalf("OpenCheckpoint(%q) = %+v, %v; want %v", tt.msg, c, err, tt.want)
			}
		})
	}
	if _, err := OpenCheckpoint(good, "not a key"); !errors.Is(err, ErrBadKey) {
		t.Errorf("OpenCheckpoint(bad key) error = %v, want ErrBadKey", err)
	}
	if _, err := NewSigner("PRIVATE+KEY+nope"); !errors.Is(err, ErrBadKey) {
		t.Errorf("NewSigner(bad) error = %v, want ErrBadKey", err)
	}
	if _, _, err := GenerateKey("has space"); !errors.Is(err, ErrBadKey) {
		t.Errorf("GenerateKey(bad name) error = %v, want ErrBadKey", err)
	}
}

func b64(h tlog.Hash) string {
	c := formatCheckpoint("o", 0, h, time.Time{})
	return strings.Split(c, "\n")[2]
}

// problemKeys lists the reported problems as "kind@index".
func problemKeys(r *Report) []string {
	var out []string
	for _, p := range r.Problems {
		out = append(out, fmt.Sprintf("%s@%d", p.Kind, p.Index))
	}
	return out
}

func TestVerify(t *testing.T) {
	s, vkey := testKeys(t)
	const n = 16
	tests := []struct {
		name     string
		cps      []int64
		tamper   func(tb testing.TB, m *memJournal)
		want     []string
		anchored int64
	}{
		{
			name:     "untouched",
			cps:      []int64{0, 4, 8, 16},
			tamper:   func(testing.TB, *memJournal) {},
			anchored: 16,
		},
		{
			name: "modified, stored hashes kept",
			cps:  []int64{4, 8, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries[5] = encode(tb, testEntry(5, "forged"))
			},
			want:     []string{"modified@5"},
			anchored: 4,
		},
		{
			name: "modified, stored hashes recomputed, pinned by checkpoints 5 and 6",
			cps:  []int64{4, 5, 6, 8, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries[5] = encode(tb, testEntry(5, "forged"))
				m.rehash(tb)
			},
			want:     []string{"modified@5"},
			anchored: 5,
		},
		{
			name: "modified, stored hashes recomputed, between checkpoints 4 and 8",
			cps:  []int64{4, 8, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries[5] = encode(tb, testEntry(5, "forged"))
				m.rehash(tb)
			},
			want:     []string{"checkpoint@8"},
			anchored: 4,
		},
		{
			name: "modified with its leaf hash rewritten",
			cps:  []int64{16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries[5] = encode(tb, testEntry(5, "forged"))
				m.hashes[tlog.StoredHashIndex(0, 5)] = LeafHash(m.entries[5])
			},
			want: []string{"stored_hash@4"},
		},
		{
			name: "bytes that are not an entry",
			cps:  []int64{16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries[9] = []byte{0xff, 0xff, 0xff}
			},
			want: []string{"modified@9"},
		},
		{
			name: "deleted, later records shifted",
			cps:  []int64{4, 15},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries = slices.Delete(m.entries, 6, 7)
			},
			want:     []string{"missing@6"},
			anchored: 4,
		},
		{
			name: "deleted, hole left",
			cps:  []int64{4, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries[6] = nil
			},
			want:     []string{"missing@6"},
			anchored: 4,
		},
		{
			name: "deleted run",
			cps:  []int64{4},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries = slices.Delete(m.entries, 6, 9)
			},
			want:     []string{"missing@6"},
			anchored: 4,
		},
		{
			name: "forged record inserted with an existing index",
			cps:  []int64{4, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries = slices.Insert(m.entries, 5, encode(tb, testEntry(5, "forged")))
			},
			want:     []string{"inserted@5"},
			anchored: 4,
		},
		{
			name: "old record replayed later",
			cps:  []int64{4},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries = slices.Insert(m.entries, 9, m.entries[3])
			},
			want:     []string{"inserted@9"},
			anchored: 4,
		},
		{
			name: "inserted, stored hashes recomputed",
			cps:  []int64{4, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries = slices.Insert(m.entries, 9, m.entries[3])
				m.rehash(tb)
			},
			want:     []string{"inserted@9"},
			anchored: 4,
		},
		{
			name: "two records swapped",
			cps:  []int64{2, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries[3], m.entries[10] = m.entries[10], m.entries[3]
			},
			want:     []string{"reordered@3", "reordered@10"},
			anchored: 2,
		},
		{
			name: "adjacent records swapped, hashes recomputed",
			cps:  []int64{2, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries[7], m.entries[8] = m.entries[8], m.entries[7]
				m.rehash(tb)
			},
			want:     []string{"reordered@7", "reordered@8"},
			anchored: 2,
		},
		{
			name: "one record moved far",
			cps:  []int64{2, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				e := m.entries[3]
				m.entries = slices.Insert(slices.Delete(m.entries, 3, 4), 12, e)
			},
			want:     []string{"reordered@12"},
			anchored: 2,
		},
		{
			name: "truncated behind a checkpoint",
			cps:  []int64{4, 12, 16},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries = m.entries[:10]
			},
			want:     []string{"truncated@10"},
			anchored: 4,
		},
		{
			name: "truncated and regrown",
			cps:  []int64{4, 12},
			tamper: func(tb testing.TB, m *memJournal) {
				m.entries = m.entries[:10]
				for i := int64(10); i < 16; i++ {
					m.entries = append(m.entries, encode(tb, testEntry(i, "rewritten")))
				}
				m.rehash(tb)
			},
			want:     []string{"checkpoint@12"},
			anchored: 4,
		},
		{
			name: "checkpoint signature forged",
			cps:  []int64{8},
			tamper: func(tb testing.TB, m *memJournal) {
				otherSkey, _, _ := GenerateKey(testOrigin)
				other, _ := NewSigner(otherSkey)
				root, _ := TreeHash(12, m)
				msg, _ := other.Sign(12, root, time.Time{})
				m.checkpoints = append(m.checkpoints, msg)
			},
			want:     []string{"checkpoint@12"},
			anchored: 8,
		},
		{
			name: "checkpoint text edited",
			cps:  []int64{8},
			tamper: func(tb testing.TB, m *memJournal) {
				m.checkpoints[0] = bytes.Replace(m.checkpoints[0], []byte("\n8\n"), []byte("\n9\n"), 1)
			},
			want: []string{"checkpoint@9"},
		},
		{
			name: "fork: a second root signed for one size",
			cps:  []int64{8},
			tamper: func(tb testing.TB, m *memJournal) {
				msg, _ := s.Sign(8, tlog.RecordHash([]byte("fork")), time.Time{})
				m.checkpoints = append(m.checkpoints, msg)
			},
			want:     []string{"checkpoint@8"},
			anchored: 8,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newJournal(t, s, n, tt.cps...)
			tt.tamper(t, m)
			rep, err := Verify(m, vkey)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			got := problemKeys(rep)
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("Verify problems = %v, want %v\n%s", got, want, rep)
			}
			if rep.OK() != (len(tt.want) == 0) {
				t.Errorf("Report.OK() = %v with problems %v", rep.OK(), got)
			}
			if rep.Anchored != tt.anchored {
				t.Errorf("Report.Anchored = %d, want %d\n%s", rep.Anchored, tt.anchored, rep)
			}
			for _, p := range rep.Problems {
				if p.Detail == "" {
					t.Errorf("problem %v has no detail", p)
				}
			}
		})
	}
}

// TestVerifyAnchoring: the records after the newest anchor are not yet
// anchored (not a problem); with a checkpoint copy only the copy's
// checkpoints are anchors, and a truncation behind the copy is caught.
func TestVerifyAnchoring(t *testing.T) {
	s, vkey := testKeys(t)
	otherSkey, _, _ := GenerateKey(testOrigin)
	other, _ := NewSigner(otherSkey)
	const n = 16
	tests := []struct {
		name   string
		cps    []int64
		tamper func(tb testing.TB, m *memJournal) *CheckpointCopy
		// want: problems; from: UnanchoredFrom; anchor: NewestAnchor
		want         []string
		from, anchor int64
		summary      string // in UnanchoredSummary ("" when none)
	}{
		{name: "every record anchored", cps: []int64{4, 16}, from: n, anchor: 16},
		{name: "empty journal, no checkpoint", tamper: func(tb testing.TB, m *memJournal) *CheckpointCopy {
			m.entries = nil
			return nil
		}, from: 0, anchor: -1},
		{name: "tail after the newest checkpoint", cps: []int64{4, 12}, from: 12, anchor: 12,
			summary: "not yet anchored: records 12 to 15 (4 records) come after the newest checkpoint (size 12)"},
		{name: "one record after the newest checkpoint", cps: []int64{15}, from: 15, anchor: 15,
			summary: "not yet anchored: record 15 comes after the newest checkpoint (size 15)"},
		{name: "no checkpoint at all", from: 0, anchor: -1,
			summary: "not yet anchored: all records 0 to 15 (16 records): the journal holds no signed checkpoint at all"},
		{name: "newest checkpoint forged: the one before is the anchor", cps: []int64{8}, tamper: func(tb testing.TB, m *memJournal) *CheckpointCopy {
			root, _ := TreeHash(16, m)
			msg, _ := other.Sign(16, root, time.Time{})
			m.checkpoints = append(m.checkpoints, msg)
			return nil
		}, want: []string{"checkpoint@16"}, from: 8, anchor: 8, summary: "records 8 to 15 (8 records)"},
		{name: "copy as new as the journal", cps: []int64{4, 16}, tamper: func(tb testing.TB, m *memJournal) *CheckpointCopy {
			return &CheckpointCopy{Name: "copy.jsonl", Notes: slices.Clone(m.checkpoints)}
		}, from: n, anchor: 16},
		{name: "copy lags the journal's own checkpoints", cps: []int64{4, 12, 16}, tamper: func(tb testing.TB, m *memJournal) *CheckpointCopy {
			return &CheckpointCopy{Name: "copy.jsonl", Notes: slices.Clone(m.checkpoints[:2])}
		}, from: 12, anchor: 12, summary: "after the newest checkpoint of the copy copy.jsonl (size 12); the journal's own checkpoint of size 16 covers them"},
		{name: "empty copy", cps: []int64{16}, tamper: func(tb testing.TB, m *memJournal) *CheckpointCopy {
			return &CheckpointCopy{Name: "copy.jsonl"}
		}, from: 0, anchor: -1, summary: "the checkpoint copy copy.jsonl holds no checkpoint signed by this key"},
		{name: "copy signed by another key", cps: []int64{16}, tamper: func(tb testing.TB, m *memJournal) *CheckpointCopy {
			root, _ := TreeHash(16, m)
			msg, _ := other.Sign(16, root, time.Time{})
			return &CheckpointCopy{Name: "copy.jsonl", Notes: [][]byte{msg}}
		}, want: []string{"checkpoint@16"}, from: 0, anchor: -1, summary: "holds no checkpoint signed by this key"},
		{name: "truncated, checkpoints deleted, copy kept", cps: []int64{4, 12, 16}, tamper: func(tb testing.TB, m *memJournal) *CheckpointCopy {
			cc := &CheckpointCopy{Name: "copy.jsonl", Notes: slices.Clone(m.checkpoints)}
			m.entries, m.checkpoints = m.entries[:10], nil
			return cc
		}, want: []string{"truncated@10"}, from: 10, anchor: 16},
		{name: "truncated, checkpoints deleted, no copy", cps: []int64{4, 12, 16}, tamper: func(tb testing.TB, m *memJournal) *CheckpointCopy {
			m.entries, m.checkpoints = m.entries[:10], nil
			return nil
		}, from: 0, anchor: -1, summary: "all records 0 to 9 (10 records): the journal holds no signed checkpoint at all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newJournal(t, s, n, tt.cps...)
			var cc *CheckpointCopy
			if tt.tamper != nil {
				cc = tt.tamper(t, m)
			}
			rep, err := VerifyWith(m, vkey, Options{CheckpointCopy: cc})
			if err != nil {
				t.Fatal(err)
			}
			if got := problemKeys(rep); !slices.Equal(got, tt.want) {
				t.Errorf("Verify problems = %v, want %v\n%s", got, tt.want, rep)
			}
			if rep.UnanchoredFrom != tt.from || rep.NewestAnchor != tt.anchor {
				t.Errorf("Report.UnanchoredFrom, NewestAnchor = %d, %d; want %d, %d\n%s", rep.UnanchoredFrom, rep.NewestAnchor, tt.from, tt.anchor, rep)
			}
			sum := rep.UnanchoredSummary()
			if (tt.summary == "") != (sum == "") || !strings.Contains(sum, tt.summary) {
				t.Errorf("UnanchoredSummary() = %q, want one containing %q", sum, tt.summary)
			}
			if sum != "" && !strings.Contains(rep.String(), sum) {
				t.Errorf("Report.String() lacks the unanchored summary:\n%s", rep)
			}
		})
	}
}

// TestVerifyCopyDuplicates: a checkpoint both in the journal and in the
// copy counts once.
func TestVerifyCopyDuplicates(t *testing.T) {
	s, vkey := testKeys(t)
	m := newJournal(t, s, 8, 4, 8)
	rep, err := VerifyWith(m, vkey, Options{CheckpointCopy: &CheckpointCopy{Name: "c", Notes: slices.Clone(m.checkpoints)}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checkpoints != 2 || rep.CopyCheckpoints != 2 || !slices.Equal(rep.Verified, []int64{4, 8}) {
		t.Errorf("Verify = %d checkpoints (%d in the copy), verified %v; want 2 (2), [4 8]", rep.Checkpoints, rep.CopyCheckpoints, rep.Verified)
	}
}

func TestVerifyDetailNamesRange(t *testing.T) {
	s, vkey := testKeys(t)
	m := newJournal(t, s, 16, 4, 8)
	m.entries[5] = encode(t, testEntry(5, "forged"))
	m.rehash(t)
	rep, err := Verify(m, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Detail, "between checkpoint sizes 4 and 8") {
		t.Errorf("Verify = %s; want one problem saying between checkpoint sizes 4 and 8", rep)
	}
}

func TestVerifyBadKey(t *testing.T) {
	s, _ := testKeys(t)
	m := newJournal(t, s, 3, 3)
	if _, err := Verify(m, "nope"); !errors.Is(err, ErrBadKey) {
		t.Errorf("Verify(bad key) error = %v, want ErrBadKey", err)
	}
}

type failingSource struct{ *memJournal }

var errDisk = errors.New("disk on fire")

func (f failingSource) Entry(i int64) ([]byte, error) {
	if i == 2 {
		return nil, errDisk
	}
	return f.memJournal.Entry(i)
}

func TestVerifySourceError(t *testing.T) {
	s, vkey := testKeys(t)
	m := newJournal(t, s, 4, 4)
	if _, err := Verify(failingSource{m}, vkey); !errors.Is(err, errDisk) {
		t.Errorf("Verify(failing source) error = %v, want the source's error", err)
	}
	var buf bytes.Buffer
	if err := Export(&buf, failingSource{m}); !errors.Is(err, errDisk) {
		t.Errorf("Export(failing source) error = %v, want the source's error", err)
	}
}

func exportImport(tb testing.TB, src Source) Source {
	tb.Helper()
	var buf bytes.Buffer
	if err := Export(&buf, src); err != nil {
		tb.Fatalf("Export: %v", err)
	}
	got, err := ReadExport(&buf)
	if err != nil {
		tb.Fatalf("ReadExport: %v", err)
	}
	return got
}

func TestExportRoundTrip(t *testing.T) {
	s, vkey := testKeys(t)
	m := newJournal(t, s, 10, 5, 10)
	var buf bytes.Buffer
	if err := Export(&buf, m); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1+10+2 {
		t.Fatalf("export has %d lines, want 13:\n%s", len(lines), buf.String())
	}
	if want := `{"type":"header","format":"latch-journal-export/v1","size":10}`; lines[0] != want {
		t.Errorf("header = %s, want %s", lines[0], want)
	}
	if !strings.Contains(lines[1], `"type":"record","index":0,`) || !strings.Contains(lines[1], `"entry":{`) || !strings.Contains(lines[1], `"executionId":"act_00"`) {
		t.Errorf("record line = %s, want type, index and a readable entry", lines[1])
	}
	if !strings.HasPrefix(lines[11], `{"type":"checkpoint","note":"latch.test/activity\n5\n`) {
		t.Errorf("checkpoint line = %s", lines[11])
	}
	src, err := ReadExport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if src.Size() != 10 {
		t.Errorf("ReadExport size = %d, want 10", src.Size())
	}
	for i := range int64(10) {
		d, err := src.Entry(i)
		if err != nil || !bytes.Equal(d, m.entries[i]) {
			t.Errorf("ReadExport entry %d = %x, %v; want %x", i, d, err, m.entries[i])
		}
	}
	rep, err := Verify(src, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Anchored != 10 || !slices.Equal(rep.Verified, []int64{5, 10}) {
		t.Errorf("Verify(export) = %s, verified %v; want ok, anchored 10", rep, rep.Verified)
	}
}

func TestVerifyExportTampered(t *testing.T) {
	s, vkey := testKeys(t)
	tests := []struct {
		name   string
		tamper func(lines []string) []string
		want   []string
	}{
		{
			name: "data edited, leaf hash kept",
			tamper: func(lines []string) []string {
				lines[1+4] = editData(t, lines[1+4], false)
				return lines
			},
			want: []string{"modified@4"},
		},
		{
			name: "data edited, leaf hash recomputed",
			tamper: func(lines []string) []string {
				lines[1+4] = editData(t, lines[1+4], true)
				return lines
			},
			want: []string{"checkpoint@8"},
		},
		{
			name: "line deleted",
			tamper: func(lines []string) []string {
				return slices.Delete(lines, 1+6, 1+7)
			},
			want: []string{"missing@6"},
		},
		{
			name: "lines swapped",
			tamper: func(lines []string) []string {
				lines[1+2], lines[1+9] = lines[1+9], lines[1+2]
				return lines
			},
			want: []string{"reordered@2", "reordered@9"},
		},
		{
			name: "tail and last checkpoint removed",
			tamper: func(lines []string) []string {
				// keep header, records 0..9, the checkpoints of 4 and 8
				return append(lines[:1+10], lines[1+12:1+12+2]...)
			},
			want: []string{"missing@10"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newJournal(t, s, 12, 4, 8, 12)
			var buf bytes.Buffer
			if err := Export(&buf, m); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			lines = tt.tamper(lines)
			src, err := ReadExport(strings.NewReader(strings.Join(lines, "\n") + "\n"))
			if err != nil {
				t.Fatalf("ReadExport: %v", err)
			}
			rep, err := Verify(src, vkey)
			if err != nil {
				t.Fatal(err)
			}
			got := problemKeys(rep)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Verify(tampered export) = %v, want %v\n%s", got, tt.want, rep)
			}
		})
	}
}

// readableJournal is a journal of 12 records, checkpointed at 12, whose
// record 4 carries an execution snapshot, exported as lines.
func readableJournal(tb testing.TB, s *Signer) []string {
	tb.Helper()
	m := &memJournal{hashes: map[int64]tlog.Hash{}}
	for i := range int64(12) {
		e := testEntry(i, "ok")
		if i == 4 {
			e.Execution = &recordv1.Execution{Id: "act_01", Actor: "agent:ci", State: recordv1.State_STATE_COMPLETED, TargetStatus: 200}
		}
		m.append(tb, encode(tb, e))
	}
	m.sign(tb, s, 12)
	var buf bytes.Buffer
	if err := Export(&buf, m); err != nil {
		tb.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

// TestVerifyExportReadable: an export line whose readable part (entry,
// index, extra keys) says something its signed data does not is reported
// by position and field, while the signed records still verify; a change
// of form alone (whitespace, escapes) is not a difference.
func TestVerifyExportReadable(t *testing.T) {
	s, vkey := testKeys(t)
	const line4 = 1 + 4
	tests := []struct {
		name   string
		edit   func(string) string
		fields []string // each must appear in the problem's detail; none: no problem
	}{
		{
			name:   "actor edited",
			edit:   func(l string) string { return strings.Replace(l, `"actor":"agent:ci"`, `"actor":"mallory"`, 1) },
			fields: []string{`entry.actor: "mallory", data says "agent:ci"`},
		},
		{
			name:   "reason edited",
			edit:   func(l string) string { return strings.Replace(l, `"reason":"ok"`, `"reason":"approved by the CEO"`, 1) },
			fields: []string{`entry.reason: "approved by the CEO", data says "ok"`},
		},
		{
			name: "state edited",
			edit: func(l string) string {
				return strings.Replace(l, `"to":"STATE_AWAITING_APPROVAL"`, `"to":"STATE_REJECTED"`, 1)
			},
			fields: []string{`entry.to: "STATE_REJECTED", data says "STATE_AWAITING_APPROVAL"`},
		},
		{
			name: "execution snapshot state edited",
			edit: func(l string) string {
				return strings.Replace(l, `"state":"STATE_COMPLETED"`, `"state":"STATE_NOT_EXECUTED"`, 1)
			},
			fields: []string{`entry.execution.state: "STATE_NOT_EXECUTED", data says "STATE_COMPLETED"`},
		},
		{
			name: "time edited",
			edit: func(l string) string {
				return strings.Replace(l, `"time":"2026-11-30T04:00:00.000000004Z"`, `"time":"2026-11-30T05:00:00.000000004Z"`, 1)
			},
			fields: []string{`entry.time: "2026-11-30T05:00:00.000000004Z", data says "2026-11-30T04:00:00.000000004Z"`},
		},
		{
			name:   "field added to the entry",
			edit:   func(l string) string { return strings.Replace(l, `"entry":{`, `"entry":{"note":"all fine",`, 1) },
			fields: []string{`entry.note: "all fine", not in data`},
		},
		{
			name:   "field removed from the entry",
			edit:   func(l string) string { return strings.Replace(l, `,"actor":"agent:ci"`, ``, 1) },
			fields: []string{`entry.actor: absent, data says "agent:ci"`},
		},
		{
			name: "key given twice, last one forged",
			edit: func(l string) string {
				return strings.Replace(l, `"actor":"agent:ci"`, `"actor":"agent:ci","actor":"mallory"`, 1)
			},
			fields: []string{`entry.actor: key appears more than once`, `entry.actor: "mallory", data says "agent:ci"`},
		},
		{
			name: "key given twice, first one forged",
			edit: func(l string) string {
				return strings.Replace(l, `"actor":"agent:ci"`, `"actor":"mallory","actor":"agent:ci"`, 1)
			},
			fields: []string{`entry.actor: key appears more than once`},
		},
		{
			name:   "entry removed",
			edit:   func(l string) string { return l[:strings.Index(l, `,"entry":`)] + "}" },
			fields: []string{"entry: absent, data holds one"},
		},
		{
			name:   "index field edited",
			edit:   func(l string) string { return strings.Replace(l, `"index":4,`, `"index":7,`, 1) },
			fields: []string{"index: 7, data says 4"},
		},
		{
			name: "key the format does not have",
			edit: func(l string) string {
				return strings.Replace(l, `{"type":"record",`, `{"type":"record","approved_by":"cfo",`, 1)
			},
			fields: []string{`key "approved_by" is not part of the format`},
		},
		{
			name:   "data key given twice",
			edit:   func(l string) string { return strings.Replace(l, `"data":`, `"data":"AAAA","data":`, 1) },
			fields: []string{`key "data" appears 2 times`},
		},
		{
			name: "reformatted with spaces and escapes: not a difference",
			edit: func(l string) string {
				l = strings.Replace(l, `"actor":"agent:ci"`, `"actor" : "agent\u003aci"`, 1)
				return strings.Replace(l, `"entry":{`, `"entry": { `, 1)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := readableJournal(t, s)
			edited := tt.edit(lines[line4])
			if edited == lines[line4] {
				t.Fatalf("the edit changed nothing in %s", lines[line4])
			}
			lines[line4] = edited
			src, err := ReadExport(strings.NewReader(strings.Join(lines, "\n") + "\n"))
			if err != nil {
				t.Fatalf("ReadExport: %v", err)
			}
			rep, err := Verify(src, vkey)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			if len(tt.fields) > 0 {
				want = []string{"readable@4"}
			}
			if got := problemKeys(rep); !slices.Equal(got, want) {
				t.Fatalf("Verify(export with line 4 edited) = %v, want %v\n%s", got, want, rep)
			}
			if rep.Anchored != 12 {
				t.Errorf("Report.Anchored = %d, want 12: the signed records are intact", rep.Anchored)
			}
			for _, f := range tt.fields {
				if !strings.Contains(rep.Problems[0].Detail, f) {
					t.Errorf("problem detail lacks %q:\n%s", f, rep.Problems[0].Detail)
				}
			}
		})
	}
}

// TestReadExportRefusesExtraKeys: header and checkpoint lines carry only
// their own keys, once.
func TestReadExportRefusesExtraKeys(t *testing.T) {
	s, _ := testKeys(t)
	lines := readableJournal(t, s)
	last := len(lines) - 1
	for name, edit := range map[string]func([]string){
		"header key twice": func(l []string) { l[0] = strings.Replace(l[0], `"size":12`, `"size":12,"size":11`, 1) },
		"header extra key": func(l []string) { l[0] = strings.Replace(l[0], `"size":12`, `"size":12,"by":"me"`, 1) },
		"checkpoint extra key": func(l []string) {
			l[last] = strings.Replace(l[last], `{"type":"checkpoint",`, `{"type":"checkpoint","ok":true,`, 1)
		},
		"checkpoint note twice": func(l []string) {
			l[last] = strings.Replace(l[last], `{"type":"checkpoint",`, `{"type":"checkpoint","note":"x",`, 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := slices.Clone(lines)
			edit(l)
			if slices.Equal(l, lines) {
				t.Fatal("the edit changed nothing")
			}
			if _, err := ReadExport(strings.NewReader(strings.Join(l, "\n") + "\n")); !errors.Is(err, ErrMalformedExport) {
				t.Errorf("ReadExport = %v, want ErrMalformedExport", err)
			}
		})
	}
}

// editData replaces the entry in an export record line by one with another
// reason, optionally fixing leaf_hash to match.
func editData(tb testing.TB, line string, fixHash bool) string {
	tb.Helper()
	src, err := ReadExport(strings.NewReader(`{"type":"header","format":"latch-journal-export/v1","size":1}` + "\n" + line + "\n"))
	if err != nil {
		tb.Fatal(err)
	}
	data, _ := src.Entry(0)
	e, err := DecodeEntry(data)
	if err != nil {
		tb.Fatal(err)
	}
	e.Reason = "forged"
	m := &memJournal{hashes: map[int64]tlog.Hash{}}
	m.append(tb, encode(tb, e))
	if !fixHash {
		m.hashes[0], _, _ = src.StoredHash(0)
	}
	var buf bytes.Buffer
	if err := Export(&buf, m); err != nil {
		tb.Fatal(err)
	}
	out := strings.Split(buf.String(), "\n")[1]
	// keep the position's index field as it was
	return strings.Replace(out, `"index":0,`, fmt.Sprintf(`"index":%d,`, e.GetIndex()), 1)
}

func TestExportHole(t *testing.T) {
	s, vkey := testKeys(t)
	m := newJournal(t, s, 6, 6)
	m.entries[2] = nil
	got := exportImport(t, m)
	if _, err := got.Entry(2); !errors.Is(err, ErrEntryNotFound) {
		t.Errorf("exported hole reads back as %v, want ErrEntryNotFound", err)
	}
	rep, err := Verify(got, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if keys := problemKeys(rep); !slices.Equal(keys, []string{"missing@2"}) {
		t.Errorf("Verify(export with hole) = %v, want [missing@2]", keys)
	}
}

func TestReadExportRefuses(t *testing.T) {
	hdr := `{"type":"header","format":"latch-journal-export/v1","size":1}` + "\n"
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"not json", "hello\n"},
		{"wrong format", `{"type":"header","format":"other/v9","size":1}`},
		{"no size", `{"type":"header","format":"latch-journal-export/v1"}`},
		{"negative size", `{"type":"header","format":"latch-journal-export/v1","size":-1}`},
		{"record first", `{"type":"record","index":0,"data":""}`},
		{"record without data", hdr + `{"type":"record","index":0}`},
		{"bad base64", hdr + `{"type":"record","index":0,"data":"!!"}`},
		{"short leaf hash", hdr + `{"type":"record","index":0,"data":"","leaf_hash":"AAAA"}`},
		{"checkpoint without note", hdr + `{"type":"checkpoint"}`},
		{"unknown type", hdr + `{"type":"banana"}`},
		{"second header", hdr + hdr},
		{"absurd size", `{"type":"header","format":"latch-journal-export/v1","size":9000000000000000000}`},
		{"truncated line", hdr + `{"type":"record","ind`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if src, err := ReadExport(strings.NewReader(tt.in)); !errors.Is(err, ErrMalformedExport) {
				t.Errorf("ReadExport(%q) = %v, %v; want ErrMalformedExport", tt.in, src, err)
			}
		})
	}
}

func FuzzOpenCheckpoint(f *testing.F) {
	s, vkey := testKeys(f)
	good, _ := s.Sign(12, tlog.RecordHash([]byte("x")), time.Date(2026, 1, 1, 0, 0, 0, 1, time.UTC))
	f.Add(good)
	f.Add([]byte("latch.test/activity\n1\nAAAA\n\n— latch.test/activity AAAA\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, msg []byte) {
		c, err := OpenCheckpoint(msg, vkey)
		if err == nil && (c.Size < 0 || c.Origin != testOrigin) {
			t.Fatalf("OpenCheckpoint(%q) = %+v", msg, c)
		}
		peekCheckpoint(msg)
	})
}

func FuzzReadExport(f *testing.F) {
	s, vkey := testKeys(f)
	m := newJournal(f, s, 5, 2, 5)
	m.entries[3] = nil
	var buf bytes.Buffer
	if err := Export(&buf, m); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"type":"header","format":"latch-journal-export/v1","size":3}` + "\n" + `{"type":"record","index":0,"data":"CAE="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := ReadExport(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrMalformedExport) {
				t.Fatalf("ReadExport error %v is not ErrMalformedExport", err)
			}
			return
		}
		if src.Size() > 4096 {
			// A header may claim up to maxMissingTail absent records;
			// verifying that many is correct but too slow to fuzz.
			return
		}
		if _, err := Verify(src, vkey); err != nil {
			t.Fatalf("Verify(ReadExport(%q)): %v", data, err)
		}
	})
}

// realisticEntry is a journal entry the size of a real transition: it
// carries the execution snapshot (fingerprint, canonical intent, arguments,
// timestamps, evidence).
func realisticEntry(i int64) *recordv1.JournalEntry {
	at := timestamppb.New(time.Date(2026, 11, 30, 4, 0, 0, int(i), time.UTC))
	id := fmt.Sprintf("act_01JDX%021d", i/4)
	return &recordv1.JournalEntry{
		Index: uint64(i), Time: at, ExecutionId: id,
		From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_COMPLETED,
		Kind: "transition", Reason: "target answered 200", Actor: "agent:ci",
		Execution: &recordv1.Execution{
			Id: id, Fingerprint: "hmac-sha256:" + strings.Repeat("ab", 32), Actor: "agent:ci", IntentScope: "run:deploy-42",
			Tool: "deploy_release", Target: "https://deploy.internal/v1/releases", Channel: "http", Replay: "idempotency_key",
			CanonicalIntent: []byte(`{"actor":"agent:ci","arguments":{"region":"us-east-1","service":"api","version":"1.2.3"},"channel":"http","intent_scope":"run:deploy-42","method":"POST","target":"https://deploy.internal/v1/releases","tool":"deploy_release"}`),
			State:           recordv1.State_STATE_COMPLETED, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 200,
			ResultRef: "r/" + id, AttachWindowSeconds: 7200,
			AcceptedAt: at, AuthorizedAt: at, DispatchedAt: at, CompletedAt: at, UpdatedAt: at,
			Evidence:  &recordv1.Evidence{McpSessionId: "ses-7f3a", JsonrpcId: fmt.Sprint(i), ClientName: "claude-code", Transport: "streamable-http", TokenId: "tok_01"},
			Arguments: []byte(`{"region":"us-east-1","service":"api","version":"1.2.3"}`),
			Attempts:  1,
		},
	}
}

// benchJournal is n realistic records with a checkpoint at n.
func benchJournal(b *testing.B, n int64) (*memJournal, string) {
	b.Helper()
	s, vkey := testKeys(b)
	m := &memJournal{hashes: map[int64]tlog.Hash{}}
	for i := range n {
		m.append(b, encode(b, realisticEntry(i)))
	}
	m.sign(b, s, n)
	return m, vkey
}

// sliceJournal is a Source over slices, as the data dir reader's is.
type sliceJournal struct {
	entries     [][]byte
	hashes      []tlog.Hash
	checkpoints [][]byte
}

func (s *sliceJournal) Size() int64                   { return int64(len(s.entries)) }
func (s *sliceJournal) Entry(i int64) ([]byte, error) { return s.entries[i], nil }
func (s *sliceJournal) Checkpoints() ([][]byte, error) {
	return s.checkpoints, nil
}
func (s *sliceJournal) StoredHash(i int64) (tlog.Hash, bool, error) {
	if i < 0 || i >= int64(len(s.hashes)) {
		return tlog.Hash{}, false, nil
	}
	return s.hashes[i], true, nil
}

// TestVerifyLarge runs the chunked, parallel read over several chunks.
func TestVerifyLarge(t *testing.T) {
	s, vkey := testKeys(t)
	const n = 3*readChunk + 17
	m := newJournal(t, s, n, readChunk, n)
	m.entries[readChunk+5] = encode(t, testEntry(readChunk+5, "forged"))
	m.entries[2*readChunk+1] = []byte{0xff}
	rep, err := Verify(m, vkey)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("modified@%d", readChunk+5), fmt.Sprintf("modified@%d", 2*readChunk+1)}
	if got := problemKeys(rep); !slices.Equal(got, want) || rep.Anchored != readChunk {
		t.Errorf("Verify = %v, anchored %d; want %v, anchored %d\n%s", got, rep.Anchored, want, readChunk, rep)
	}
}

// BenchmarkVerify measures Verify over an in-memory journal of realistic
// records; records/s is the figure to compare.
func BenchmarkVerify(b *testing.B) {
	const n = 1 << 17
	mj, vkey := benchJournal(b, n)
	m := &sliceJournal{entries: mj.entries, hashes: make([]tlog.Hash, tlog.StoredHashCount(n)), checkpoints: mj.checkpoints}
	for i := range m.hashes {
		m.hashes[i] = mj.hashes[int64(i)]
	}
	cpu := cpuTime(b)
	for b.Loop() {
		rep, err := Verify(m, vkey)
		if err != nil || !rep.OK() || rep.Unanchored() != 0 {
			b.Fatal(err, rep)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(n)*float64(b.N)/(cpuTime(b)-cpu).Seconds(), "records/cpu-s")
}

// BenchmarkVerifyExport measures reading and verifying an export file.
func BenchmarkVerifyExport(b *testing.B) {
	const n = 1 << 15
	m, vkey := benchJournal(b, n)
	var buf bytes.Buffer
	if err := Export(&buf, m); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		src, err := ReadExport(bytes.NewReader(buf.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		rep, err := Verify(src, vkey)
		if err != nil || !rep.OK() {
			b.Fatal(err, rep)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// FuzzEntryIndex: where both read an entry, entryIndex and DecodeEntry
// agree on its index, and entryIndex accepts every entry EncodeEntry
// writes (unknown top-level fields aside: they fall back to DecodeEntry).
func FuzzEntryIndex(f *testing.F) {
	f.Add(encode(f, realisticEntry(7)))
	f.Add(encode(f, testEntry(3, "ok")))
	f.Add([]byte{0x08, 0x05, 0x08, 0x09}) // index given twice: the last wins
	f.Add([]byte{0x1a, 0x02, 0xff, 0xfe}) // execution_id not UTF-8
	f.Add([]byte{0x0a, 0x01, 0x00})       // index with the wrong wire type
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := entryIndex(data)
		e, err := DecodeEntry(data)
		if ok && err == nil && got != e.GetIndex() {
			t.Fatalf("entryIndex(%x) = %d, DecodeEntry index %d", data, got, e.GetIndex())
		}
		if err == nil && len(e.ProtoReflect().GetUnknown()) == 0 {
			again, eerr := EncodeEntry(e)
			if eerr != nil {
				return
			}
			if i, ok := entryIndex(again); !ok || i != e.GetIndex() {
				t.Fatalf("entryIndex(EncodeEntry(%v)) = %d, %v", e, i, ok)
			}
		}
	})
}

// FuzzObjectFields: on any JSON object, objectFields finds the keys and
// values encoding/json finds; on anything else it fails without panicking.
func FuzzObjectFields(f *testing.F) {
	f.Add([]byte(`{"type":"record","index":3,"data":"CAE=","entry":{"a":[1,{"b":"}"}],"c\"d":null}}`))
	f.Add([]byte(` { "a" : 1 , "a" : "x\\"y" , "\u0061b" : [ ] } `))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"a":tru`))
	many := []byte(`{`)
	for i := range 40 {
		many = fmt.Appendf(many, `"k%d":%d,"k%d":"again",`, i, i, i%7)
	}
	f.Add(append(many, `"end":true}`...))
	f.Fuzz(func(t *testing.T, raw []byte) {
		fields, err := objectFields(raw)
		var want map[string]json.RawMessage
		if json.Unmarshal(raw, &want) != nil || want == nil {
			return // not a JSON object: objectFields may fail or not, but did not panic
		}
		if err != nil {
			t.Fatalf("objectFields(%q): %v, but encoding/json reads it", raw, err)
		}
		if len(fields) != len(want) {
			t.Fatalf("objectFields(%q) found %d keys, encoding/json %d", raw, len(fields), len(want))
		}
		for _, fl := range fields {
			var a, b bytes.Buffer
			json.Compact(&a, fl.value)
			json.Compact(&b, want[fl.name])
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("objectFields(%q)[%q] = %s, encoding/json %s", raw, fl.name, fl.value, want[fl.name])
			}
		}
	})
}

// cpuTime is the CPU time (user and system) this process has used, so a
// benchmark on a shared machine can report its work apart from its wait.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
