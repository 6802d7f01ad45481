package witness_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/witness"
	"github.com/latchhq/latch/internal/testing/witnesstest"
	"github.com/latchhq/latch/receipt"
)

// memJournal is a journal in memory: its leaves' stored hashes.
type memJournal struct {
	hashes []tlog.Hash
	n      int64
}

func (m *memJournal) JournalSize() int64 { return m.n }

func (m *memJournal) StoredHash(i int64) (tlog.Hash, bool, error) {
	if i < 0 || i >= int64(len(m.hashes)) {
		return tlog.Hash{}, false, nil
	}
	return m.hashes[i], true, nil
}

func (m *memJournal) add(t *testing.T, records ...string) {
	t.Helper()
	for _, r := range records {
		hs, err := tlog.StoredHashes(m.n, []byte(r), tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for i, x := range idx {
				out[i] = m.hashes[x]
			}
			return out, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		m.hashes = append(m.hashes, hs...)
		m.n++
	}
}

// clone is the journal as a backup taken now holds it.
func (m *memJournal) clone() *memJournal {
	return &memJournal{hashes: append([]tlog.Hash(nil), m.hashes...), n: m.n}
}

func (m *memJournal) sign(t *testing.T, s *journal.Signer) []byte {
	t.Helper()
	root, err := tlog.TreeHash(m.n, journal.StoredHashReader(m.StoredHash))
	if err != nil {
		t.Fatal(err)
	}
	note, err := s.Sign(m.n, root, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return note
}

func records(from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf("record %d", i))
	}
	return out
}

// TestWitnessCosignsAndCatchesAFork runs litewitness (a real c2sp.org/
// tlog-witness) on loopback: it co-signs each checkpoint as the journal
// grows (consistency proofs from the size it holds, learned from its 409
// after a restart of the client), the cosignature verifies with its key
// (package receipt), and a journal restored from an older backup that grew
// differently is refused as a fork, as is a journal shorter than what the
// witness saw; an older checkpoint is stale, not a fork.
func TestWitnessCosignsAndCatchesAFork(t *testing.T) {
	w := witnesstest.Start(t)
	skey, vkey, err := journal.GenerateKey("latch.test/witness-journal")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := journal.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	j := &memJournal{}
	c, err := witness.New(witness.Config{URL: w.URL, Key: w.Key, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	j.add(t, records(0, 3)...)
	if _, err := c.Cosign(t.Context(), j.n, j.sign(t, signer)); !errors.Is(err, witness.ErrRefused) || !strings.Contains(err.Error(), "witnessctl add-log") {
		t.Fatalf("Cosign of an unknown log = %v, want ErrRefused saying how to add it", err)
	}
	w.AddLog(t, vkey)
	wv, err := receipt.NewWitnessVerifier(w.Key)
	if err != nil {
		t.Fatal(err)
	}
	var stale []byte
	staleSize := int64(0)
	for _, grow := range []int{0, 1, 5, 17} {
		j.add(t, records(int(j.n), grow)...)
		note := j.sign(t, signer)
		cosigned, err := c.Cosign(t.Context(), j.n, note)
		if err != nil {
			t.Fatalf("Cosign at size %d: %v", j.n, err)
		}
		if !strings.HasPrefix(string(cosigned), string(note)) {
			t.Fatalf("the cosigned note does not keep the journal's signature:\n%s", cosigned)
		}
		cs, err := receipt.Cosignature(cosigned, wv)
		if err != nil || cs.Witness != witnesstest.Name {
			t.Fatalf("Cosignature = %+v, %v", cs, err)
		}
		if _, err := journal.OpenCheckpoint(cosigned, vkey); err != nil {
			t.Fatalf("the cosigned checkpoint no longer opens with the journal key: %v", err)
		}
		if c.Known() != j.n {
			t.Errorf("Known = %d, want %d", c.Known(), j.n)
		}
		if stale == nil {
			stale, staleSize = note, j.n
		}
	}
	if _, err := receipt.Cosignature(stale, wv); !errors.Is(err, receipt.ErrWitness) {
		t.Errorf("Cosignature of a note the witness never saw = %v, want ErrWitness", err)
	}
	if _, err := c.Cosign(t.Context(), staleSize, stale); !errors.Is(err, witness.ErrStale) {
		t.Errorf("Cosign of an older checkpoint = %v, want ErrStale", err)
	}

	// A new client (a restart) learns the witness's size from its 409.
	backup := j.clone()
	c2, err := witness.New(witness.Config{URL: w.URL, Key: w.Key, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	j.add(t, records(int(j.n), 4)...)
	if _, err := c2.Cosign(t.Context(), j.n, j.sign(t, signer)); err != nil {
		t.Fatalf("Cosign after a restart: %v", err)
	}
	seen := j.n

	// The journal restored from the backup grows differently: a fork.
	backup.add(t, "another record", "and another", "a third", "a fourth", "a fifth")
	forked, err := witness.New(witness.Config{URL: w.URL, Key: w.Key, Journal: backup})
	if err != nil {
		t.Fatal(err)
	}
	if backup.n <= seen {
		t.Fatalf("test setup: the forked journal (%d) must outgrow what the witness saw (%d)", backup.n, seen)
	}
	if _, err := forked.Cosign(t.Context(), backup.n, backup.sign(t, signer)); !errors.Is(err, witness.ErrFork) {
		t.Fatalf("Cosign of a forked journal = %v, want ErrFork", err)
	}
	// Restored and not grown past what the witness saw: truncated.
	short := &memJournal{}
	short.add(t, records(0, 3)...)
	truncated, _ := witness.New(witness.Config{URL: w.URL, Key: w.Key, Journal: short})
	if _, err := truncated.Cosign(t.Context(), short.n, short.sign(t, signer)); !errors.Is(err, witness.ErrFork) || !strings.Contains(err.Error(), "older backup") {
		t.Fatalf("Cosign of a truncated journal = %v, want ErrFork naming a rollback", err)
	}
	// The witness still co-signs the real journal.
	j.add(t, "record after the fork attempts")
	if _, err := c2.Cosign(t.Context(), j.n, j.sign(t, signer)); err != nil {
		t.Fatalf("Cosign of the real journal after the fork attempts: %v", err)
	}
}

// TestNewRefusesBadConfig: a URL that is not http(s), or a key that is
// not a witness's cosignature key, is refused with what to give.
func TestNewRefusesBadConfig(t *testing.T) {
	_, vkey, _ := journal.GenerateKey("latch.test/j")
	for _, tc := range []struct{ url, key, want string }{
		{"ftp://x", "", "not an http(s) URL"},
		{"http://127.0.0.1:1", vkey, "not a cosignature/v1 Ed25519 key"},
		{"http://127.0.0.1:1", "nonsense", "not <name>+<hash>+<base64 key>"},
	} {
		_, err := witness.New(witness.Config{URL: tc.url, Key: tc.key, Journal: &memJournal{}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %q) = %v, want %q", tc.url, tc.key, err, tc.want)
		}
	}
}
