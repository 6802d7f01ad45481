package receipt_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/receipt"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json")

// Vectors is testdata/vectors.json: receipts both implementations accept
// under VerifierKey, and one tampered copy per field they both refuse
// with the error class Kind.
type Vectors struct {
	VerifierKey string            `json:"verifier_key"`
	OtherKey    string            `json:"other_key"`
	Valid       []json.RawMessage `json:"valid"`
	Tampered    []Tampered        `json:"tampered"`
}

// Tampered is one refused receipt.
type Tampered struct {
	Name    string          `json:"name"`
	Kind    string          `json:"kind"`
	Receipt json.RawMessage `json:"receipt"`
}

// seeded is a deterministic reader, so the vectors are the same on every
// run (Ed25519 signatures are deterministic too).
type seeded struct{ state [32]byte }

func (s *seeded) Read(p []byte) (int, error) {
	for i := range p {
		if i%32 == 0 {
			s.state = sha256.Sum256(s.state[:])
		}
		p[i] = s.state[i%32]
	}
	return len(p), nil
}

type memTree struct{ hashes []tlog.Hash }

func (m *memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = m.hashes[x]
	}
	return out, nil
}

// buildVectors makes a five-record journal, signs a checkpoint of it and
// issues receipts of two records, then tampers with the first.
func buildVectors(t testing.TB) *Vectors {
	t.Helper()
	const origin = "latch.test/receipts"
	skey, vkey, err := note.GenerateKey(&seeded{}, origin)
	if err != nil {
		t.Fatal(err)
	}
	_, otherV, err := note.GenerateKey(&seeded{state: [32]byte{1}}, origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	ts := timestamppb.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	sum := sha256.Sum256([]byte("stored result"))
	execs := []*recordv1.Execution{
		{Id: "act_01A", Fingerprint: "fp-a", Actor: "agent-a", Tool: "http_post", State: recordv1.State_STATE_ACCEPTED},
		{Id: "act_01A", Fingerprint: "fp-a", Actor: "agent-a", Tool: "http_post", State: recordv1.State_STATE_DISPATCHED},
		{Id: "act_01A", Fingerprint: "fp-a", Actor: "agent-a", Tool: "http_post", State: recordv1.State_STATE_COMPLETED,
			Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 201, ResultSha256: sum[:]},
		{Id: "act_01B", Fingerprint: "fp-b", Actor: "agent-é \"b\"\n", Tool: "run_script", State: recordv1.State_STATE_ACCEPTED},
		{Id: "act_01B", Fingerprint: "fp-b", Actor: "agent-é \"b\"\n", Tool: "run_script", State: recordv1.State_STATE_OUTCOME_UNKNOWN, TargetStatus: -1},
	}
	tree := &memTree{}
	var leaves [][]byte
	for i, x := range execs {
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(&recordv1.JournalEntry{
			Index: uint64(i), Time: ts, ExecutionId: x.Id, To: x.State, Kind: "transition", Actor: x.Actor, Execution: x,
		})
		if err != nil {
			t.Fatal(err)
		}
		hs, err := tlog.StoredHashes(int64(i), data, tree)
		if err != nil {
			t.Fatal(err)
		}
		tree.hashes = append(tree.hashes, hs...)
		leaves = append(leaves, data)
	}
	n := int64(len(leaves))
	root, err := tlog.TreeHash(n, tree)
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("%s\n%d\n%s\ntime 2026-12-01T10:00:01Z\n", origin, n, base64.StdEncoding.EncodeToString(root[:]))
	ckpt, err := note.Sign(&note.Note{Text: text}, signer)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(i int64) *receipt.Receipt {
		p, err := tlog.ProveRecord(n, i, tree)
		if err != nil {
			t.Fatal(err)
		}
		x := execs[i]
		lh := tlog.RecordHash(leaves[i])
		r := &receipt.Receipt{Format: receipt.Format, ExecutionID: x.Id, Tool: x.Tool, Actor: x.Actor, Fingerprint: x.Fingerprint,
			State: stateName(x.State), Outcome: outcomeName(x.Outcome), TargetStatus: x.TargetStatus,
			ResultSHA256: fmt.Sprintf("%x", x.ResultSha256), JournalIndex: uint64(i), LeafHash: lh[:], Record: leaves[i], Checkpoint: string(ckpt)}
		for _, h := range p {
			r.Proof = append(r.Proof, h[:])
		}
		return r
	}
	v := &Vectors{VerifierKey: vkey, OtherKey: otherV}
	good := issue(2)
	v.Valid = []json.RawMessage{receipt.Marshal(good), receipt.Marshal(issue(4))}
	tamper := func(name, kind string, f func(r *receipt.Receipt)) {
		r := *good
		r.Proof = append([][]byte(nil), good.Proof...)
		f(&r)
		v.Tampered = append(v.Tampered, Tampered{Name: name, Kind: kind, Receipt: receipt.Marshal(&r)})
	}
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 1; return b }
	tamper("format", "malformed", func(r *receipt.Receipt) { r.Format = "latch-receipt/v0" })
	tamper("execution_id", "mismatch", func(r *receipt.Receipt) { r.ExecutionID = "act_01B" })
	tamper("tool", "mismatch", func(r *receipt.Receipt) { r.Tool = "http_get" })
	tamper("actor", "mismatch", func(r *receipt.Receipt) { r.Actor = "agent-b" })
	tamper("fingerprint", "mismatch", func(r *receipt.Receipt) { r.Fingerprint = "fp-b" })
	tamper("state", "mismatch", func(r *receipt.Receipt) { r.State = "delivered" })
	tamper("outcome", "mismatch", func(r *receipt.Receipt) { r.Outcome = "failed_at_target" })
	tamper("target_status", "mismatch", func(r *receipt.Receipt) { r.TargetStatus = 200 })
	tamper("result_sha256", "mismatch", func(r *receipt.Receipt) { r.ResultSHA256 = fmt.Sprintf("%x", sha256.Sum256([]byte("other"))) })
	tamper("journal_index", "mismatch", func(r *receipt.Receipt) { r.JournalIndex = 3 })
	tamper("leaf_hash", "proof", func(r *receipt.Receipt) { r.LeafHash = flip(r.LeafHash, 0) })
	tamper("record", "proof", func(r *receipt.Receipt) { r.Record = flip(r.Record, len(r.Record)-1) })
	tamper("record_rehashed", "proof", func(r *receipt.Receipt) {
		// The record and the receipt changed together (target_status 201
		// -> 200), and the leaf hash with them: the fields match, the
		// proof does not.
		r.TargetStatus = 200
		var e recordv1.JournalEntry
		if err := proto.Unmarshal(r.Record, &e); err != nil {
			t.Fatal(err)
		}
		e.Execution.TargetStatus = 200
		r.Record, _ = proto.MarshalOptions{Deterministic: true}.Marshal(&e)
		lh := tlog.RecordHash(r.Record)
		r.LeafHash = lh[:]
	})
	tamper("proof", "proof", func(r *receipt.Receipt) { r.Proof[0] = flip(r.Proof[0], 31) })
	tamper("checkpoint", "signature", func(r *receipt.Receipt) {
		r.Checkpoint = string(bytes.Replace([]byte(r.Checkpoint), []byte("\n5\n"), []byte("\n6\n"), 1))
	})
	return v
}

func stateName(s recordv1.State) string {
	n := s.String()[len("STATE_"):]
	return string(bytes.ToLower([]byte(n)))
}

func outcomeName(o recordv1.Outcome) string {
	if o == recordv1.Outcome_OUTCOME_UNSPECIFIED {
		return ""
	}
	return string(bytes.ToLower([]byte(o.String()[len("OUTCOME_"):])))
}

const vectorsFile = "testdata/vectors.json"

// TestVectorsAreCurrent holds testdata/vectors.json to buildVectors
// (go test ./receipt -run TestVectorsAreCurrent -update rewrites it).
func TestVectorsAreCurrent(t *testing.T) {
	b, err := json.MarshalIndent(buildVectors(t), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(vectorsFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatalf("read %s: %v (run go test ./receipt -run TestVectorsAreCurrent -update)", vectorsFile, err)
	}
	if !bytes.Equal(got, b) {
		t.Errorf("%s is stale: run go test ./receipt -run TestVectorsAreCurrent -update", vectorsFile)
	}
}

func readVectors(t *testing.T) *Vectors {
	t.Helper()
	b, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var v Vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

var kinds = map[string]error{
	"malformed": receipt.ErrMalformed, "mismatch": receipt.ErrMismatch,
	"signature": receipt.ErrSignature, "proof": receipt.ErrProof,
}

// TestVectors runs the Go verifier over the vectors: every valid receipt
// verifies (and its canonical form is the file's), every tampered one is
// refused with its error class, and a valid one under another key is a
// signature error.
func TestVectors(t *testing.T) {
	v := readVectors(t)
	for i, raw := range v.Valid {
		r, err := receipt.Parse(raw)
		if err != nil {
			t.Fatalf("Parse(valid[%d]) = %v", i, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		if got := receipt.Marshal(r); !bytes.Equal(got, compact.Bytes()) {
			t.Errorf("Marshal(Parse(valid[%d])) = %s, want %s", i, got, compact.Bytes())
		}
		c, err := receipt.Verify(r, v.VerifierKey)
		if err != nil {
			t.Errorf("Verify(valid[%d]) = %v, want nil", i, err)
			continue
		}
		if c.Size != 5 {
			t.Errorf("Verify(valid[%d]).Size = %d, want 5", i, c.Size)
		}
		if _, err := receipt.Verify(r, v.OtherKey); !errors.Is(err, receipt.ErrSignature) {
			t.Errorf("Verify(valid[%d], other key) = %v, want ErrSignature", i, err)
		}
	}
	for _, tc := range v.Tampered {
		t.Run(tc.Name, func(t *testing.T) {
			r, err := receipt.Parse(tc.Receipt)
			if err == nil {
				_, err = receipt.Verify(r, v.VerifierKey)
			}
			if want := kinds[tc.Kind]; !errors.Is(err, want) {
				t.Errorf("Verify(tampered %s) = %v, want %v", tc.Name, err, want)
			}
		})
	}
}

// TestParseRefuses covers what Parse refuses before any check.
func TestParseRefuses(t *testing.T) {
	v := readVectors(t)
	var obj map[string]any
	if err := json.Unmarshal(v.Valid[0], &obj); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
	}{
		{"unknown key", func(m map[string]any) { m["extra"] = 1 }},
		{"missing key", func(m map[string]any) { delete(m, "tool") }},
		{"wrong type", func(m map[string]any) { m["journal_index"] = "2" }},
		{"bad base64", func(m map[string]any) { m["record"] = "!!" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]any{}
			for k, x := range obj {
				m[k] = x
			}
			tc.edit(m)
			b, _ := json.Marshal(m)
			if _, err := receipt.Parse(b); !errors.Is(err, receipt.ErrMalformed) {
				t.Errorf("Parse(%s) = %v, want ErrMalformed", tc.name, err)
			}
		})
	}
	if _, err := receipt.Parse([]byte(strconv.Quote("x"))); !errors.Is(err, receipt.ErrMalformed) {
		t.Errorf("Parse(string) = %v, want ErrMalformed", err)
	}
}

// FuzzVerify: no input makes Parse or Verify panic.
func FuzzVerify(f *testing.F) {
	v := buildVectors(f)
	for _, raw := range v.Valid {
		f.Add([]byte(raw))
	}
	for _, tc := range v.Tampered {
		f.Add([]byte(tc.Receipt))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := receipt.Parse(data)
		if err != nil {
			return
		}
		receipt.Verify(r, v.VerifierKey) //nolint:errcheck // only panics matter
	})
}
