package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/receipt"
)

// testWitness co-signs checkpoint notes as a c2sp.org/tlog-witness
// witness does (cosignature/v1), for Verify's witness checks; the real
// witness (litewitness) is exercised in controlplane/witness.
type testWitness struct {
	name string
	priv ed25519.PrivateKey
	hash []byte
	vkey string
}

func newTestWitness(tb testing.TB) *testWitness {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	name := "witness.test/w"
	key := append([]byte{0x04}, pub...)
	h := sha256.Sum256(append([]byte(name+"\n"), key...))
	return &testWitness{name: name, priv: priv, hash: h[:4],
		vkey: fmt.Sprintf("%s+%x+%s", name, h[:4], base64.StdEncoding.EncodeToString(key))}
}

func (w *testWitness) cosign(note []byte) []byte {
	text := note[:bytes.LastIndex(note, []byte("\n\n"))+1]
	t := uint64(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix())
	sig := binary.BigEndian.AppendUint64(append([]byte(nil), w.hash...), t)
	sig = append(sig, ed25519.Sign(w.priv, receipt.CosignedMessage(t, text))...)
	return append(bytes.Clone(note), fmt.Sprintf("— %s %s\n", w.name, base64.StdEncoding.EncodeToString(sig))...)
}

// TestVerifyWitnessed: with the witness's key, Verify says how far the
// witness co-signed and which newer checkpoints it never saw; a co-signed
// checkpoint a rewritten journal does not reproduce is a fork.
func TestVerifyWitnessed(t *testing.T) {
	s, vkey := testKeys(t)
	w := newTestWitness(t)
	j := newJournal(t, s, 10, 4, 8)
	witnessed := w.cosign(j.checkpoints[0])
	j.checkpoints[0] = witnessed
	rep, err := VerifyWith(j, vkey, Options{WitnessKeys: []string{w.vkey}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Witnessed != 4 || rep.UnwitnessedFrom != 4 || rep.Unwitnessed != 1 || rep.NewestUnwitnessed != 8 {
		t.Fatalf("report = %+v, want ok, witnessed to 4, one checkpoint (8) never co-signed", rep)
	}
	if s := rep.String(); !strings.Contains(s, "not witnessed: records 4 to 9") || !strings.Contains(s, "1 checkpoint the witness never co-signed, the newest of size 8") {
		t.Errorf("report text:\n%s\nwant the unwitnessed records and checkpoint named", s)
	}
	// Without witness keys, nothing about witnesses is said.
	if rep, _ := Verify(j, vkey); strings.Contains(rep.String(), "witness") {
		t.Errorf("report without witness keys mentions witnesses:\n%s", rep)
	}
	// A cosignature by another key does not count.
	other := newTestWitness(t)
	if rep, _ := VerifyWith(j, vkey, Options{WitnessKeys: []string{other.vkey}}); rep.Witnessed != -1 || !strings.Contains(rep.String(), "no checkpoint carries a valid cosignature") {
		t.Errorf("report with another witness's key: witnessed %d\n%s", rep.Witnessed, rep)
	}

	// The journal rolled back and rewritten: record 2 differs, every hash
	// and its own checkpoints recomputed and re-signed. The witness's
	// cosigned checkpoint of size 4, kept in the copy, is the fork's proof.
	forked := newJournal(t, s, 10)
	forked.entries[2] = encode(t, testEntry(2, "rewritten"))
	forked.rehash(t)
	forked.sign(t, s, 8)
	rep, err = VerifyWith(forked, vkey, Options{WitnessKeys: []string{w.vkey}, CheckpointCopy: &CheckpointCopy{Name: "copy", Notes: [][]byte{witnessed}}})
	if err != nil {
		t.Fatal(err)
	}
	var fork bool
	for _, p := range rep.Problems {
		fork = fork || (p.Kind == KindFork && p.Index == 4 && strings.Contains(p.Detail, "co-signed by witness "+w.name))
	}
	if !fork {
		t.Fatalf("problems = %v, want a fork at the witnessed checkpoint of size 4", rep.Problems)
	}
	if _, err := VerifyWith(j, vkey, Options{WitnessKeys: []string{vkey}}); err == nil {
		t.Error("a journal key given as a witness key was accepted")
	}
}
