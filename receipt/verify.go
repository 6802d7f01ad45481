package receipt

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/encoding/protowire"
)

// Checked is what Verify proved: the checkpoint the receipt is anchored to.
type Checked struct {
	// Origin is the journal's origin (the key's name).
	Origin string
	// Size is the checkpoint's tree size: the record is one of its first
	// Size leaves.
	Size int64
	// Root is the checkpoint's root hash.
	Root tlog.Hash
	// Witnesses are the cosignatures Options.WitnessKeys asked for, in
	// their order.
	Witnesses []Cosigned
}

// Options are what VerifyWith checks beyond Verify.
type Options struct {
	// WitnessKeys are cosignature verifier keys of witnesses
	// (c2sp.org/tlog-witness): the checkpoint must carry a valid
	// cosignature of each, or the check fails with ErrWitness.
	WitnessKeys []string
}

// Verify checks r under verifierKey, the journal's note verifier key
// ("<origin>+<hash>+<key>", as `latch audit` prints it): the checks of the
// package comment, in order. The error of the first failing check wraps
// ErrMalformed, ErrBadKey, ErrMismatch (naming the field), ErrSignature or
// ErrProof.
func Verify(r *Receipt, verifierKey string) (*Checked, error) {
	return VerifyWith(r, verifierKey, Options{})
}

// VerifyWith is Verify that also checks the checkpoint's witness
// cosignatures (Options.WitnessKeys), last; that check's error wraps
// ErrWitness, or ErrBadKey for a witness key that does not parse.
func VerifyWith(r *Receipt, verifierKey string, opts Options) (*Checked, error) {
	if r.Format != Format {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrMalformed, r.Format, Format)
	}
	lh := leafHash(r.Record)
	if !bytes.Equal(lh[:], r.LeafHash) {
		return nil, fmt.Errorf("%w: leaf_hash is not the hash of record (SHA-256(0x00 || record) is %s)", ErrProof, base64.StdEncoding.EncodeToString(lh[:]))
	}
	rec, err := parseRecord(r.Record)
	if err != nil {
		return nil, err
	}
	if err := compare(r, rec); err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(strings.TrimSpace(verifierKey))
	if err != nil {
		return nil, fmt.Errorf("%w: %w (want the journal's verifier key, <origin>+<hash>+<key>)", ErrBadKey, err)
	}
	c, err := openCheckpoint([]byte(r.Checkpoint), v)
	if err != nil {
		return nil, err
	}
	if r.JournalIndex >= uint64(c.Size) {
		return nil, fmt.Errorf("%w: journal_index %d is not covered by the checkpoint of size %d", ErrProof, r.JournalIndex, c.Size)
	}
	if len(r.Proof) > 63 {
		return nil, fmt.Errorf("%w: proof has %d hashes, more than any tree needs", ErrProof, len(r.Proof))
	}
	proof := make(tlog.RecordProof, len(r.Proof))
	for i, p := range r.Proof {
		if len(p) != tlog.HashSize {
			return nil, fmt.Errorf("%w: proof hash %d is %d bytes, want %d", ErrProof, i, len(p), tlog.HashSize)
		}
		copy(proof[i][:], p)
	}
	if err := tlog.CheckRecord(proof, c.Size, c.Root, int64(r.JournalIndex), tlog.Hash(lh)); err != nil {
		return nil, fmt.Errorf("%w: the proof does not take record %d to the root of the checkpoint of size %d", ErrProof, r.JournalIndex, c.Size)
	}
	if c.Witnesses, err = checkWitnesses([]byte(r.Checkpoint), opts.WitnessKeys); err != nil {
		return nil, err
	}
	return c, nil
}

// record is what a verifier reads of a journal entry.
type record struct {
	index                        uint64
	id, tool, actor, fingerprint string
	state, outcome               uint64
	targetStatus                 int32
	resultSHA256                 []byte
	hasExecution                 bool
}

// Field numbers of latch.record.v1.JournalEntry and Execution that a
// receipt repeats (record_test.go holds them to the descriptors).
const (
	entryIndex     = 1
	entryExecution = 9

	execID           = 1
	execFingerprint  = 2
	execActor        = 3
	execTool         = 5
	execState        = 11
	execOutcome      = 12
	execTargetStatus = 13
	execResultSHA256 = 33
)

// stateNames and outcomeNames are the names of latch.record.v1.State and
// Outcome, lowercase without their prefixes, by number.
var (
	stateNames = []string{"unspecified", "accepted", "awaiting_approval", "authorized", "dispatched", "completed",
		"delivered", "outcome_unknown", "not_executed", "needs_review", "rejected", "cancelled"}
	outcomeNames = []string{"", "succeeded", "failed_at_target"}
)

// parseRecord reads a JournalEntry's index and execution fields as
// protobuf does: the last value of a scalar field wins, and the values of
// a message field given more than once are merged (its occurrences are
// parsed as one).
func parseRecord(data []byte) (*record, error) {
	rec := new(record)
	var exec []byte
	err := walk(data, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		switch {
		case num == entryIndex && typ == protowire.VarintType:
			rec.index = v
		case num == entryExecution && typ == protowire.BytesType:
			exec = append(exec, b...)
			rec.hasExecution = true
		case num == entryIndex || num == entryExecution:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: record is not a journal entry: %w", ErrMalformed, err)
	}
	err = walk(exec, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		str := func(dst *string) error {
			if typ != protowire.BytesType {
				return fmt.Errorf("execution field %d has wire type %d", num, typ)
			}
			*dst = string(b)
			return nil
		}
		varint := func(dst *uint64) error {
			if typ != protowire.VarintType {
				return fmt.Errorf("execution field %d has wire type %d", num, typ)
			}
			*dst = v
			return nil
		}
		switch num {
		case execID:
			return str(&rec.id)
		case execFingerprint:
			return str(&rec.fingerprint)
		case execActor:
			return str(&rec.actor)
		case execTool:
			return str(&rec.tool)
		case execState:
			return varint(&rec.state)
		case execOutcome:
			return varint(&rec.outcome)
		case execTargetStatus:
			var u uint64
			err := varint(&u)
			rec.targetStatus = int32(u) // int32: a negative value is sign-extended
			return err
		case execResultSHA256:
			if typ != protowire.BytesType {
				return fmt.Errorf("execution field %d has wire type %d", num, typ)
			}
			rec.resultSHA256 = b
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: record's execution does not parse: %w", ErrMalformed, err)
	}
	return rec, nil
}

// walk calls fn for each field of a protobuf message: v is a varint's
// value, b a length-delimited field's bytes.
func walk(data []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return protowire.ParseError(n)
		}
		data = data[n:]
		var v uint64
		var b []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(data)
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(data)
		default:
			n = protowire.ConsumeFieldValue(num, typ, data)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		data = data[n:]
		if err := fn(num, typ, v, b); err != nil {
			return err
		}
	}
	return nil
}

func enumName(names []string, v uint64) string {
	if v < uint64(len(names)) {
		return names[v]
	}
	return "#" + strconv.FormatUint(v, 10) // a value this verifier does not know: never equal to a name
}

// compare holds each receipt field against the record's.
func compare(r *Receipt, rec *record) error {
	if !rec.hasExecution {
		return fmt.Errorf("%w: the record carries no execution", ErrMismatch)
	}
	check := []struct {
		field     string
		got, want string
	}{
		{"journal_index", strconv.FormatUint(r.JournalIndex, 10), strconv.FormatUint(rec.index, 10)},
		{"execution_id", r.ExecutionID, rec.id},
		{"tool", r.Tool, rec.tool},
		{"actor", r.Actor, rec.actor},
		{"fingerprint", r.Fingerprint, rec.fingerprint},
		{"state", r.State, enumName(stateNames, rec.state)},
		{"outcome", r.Outcome, enumName(outcomeNames, rec.outcome)},
		{"target_status", strconv.FormatInt(int64(r.TargetStatus), 10), strconv.FormatInt(int64(rec.targetStatus), 10)},
		{"result_sha256", r.ResultSHA256, hex.EncodeToString(rec.resultSHA256)},
	}
	for _, c := range check {
		if c.got != c.want {
			return fmt.Errorf("%w: %s is %q in the receipt but %q in the record", ErrMismatch, c.field, c.got, c.want)
		}
	}
	return nil
}

// maxCheckpoint bounds the checkpoint notes Verify opens.
const maxCheckpoint = 1 << 16

// openCheckpoint verifies a C2SP checkpoint note under v and parses its
// origin, size and root hash lines.
func openCheckpoint(msg []byte, v note.Verifier) (*Checked, error) {
	if len(msg) > maxCheckpoint {
		return nil, fmt.Errorf("%w: checkpoint is %d bytes, more than %d", ErrMalformed, len(msg), maxCheckpoint)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return nil, fmt.Errorf("%w: no signature by %q on the checkpoint", ErrSignature, v.Name())
		case errors.As(err, &invalid):
			return nil, fmt.Errorf("%w: %w", ErrSignature, err)
		}
		return nil, fmt.Errorf("%w: checkpoint does not parse: %w", ErrMalformed, err)
	}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) < 3 || lines[0] != v.Name() {
		return nil, fmt.Errorf("%w: checkpoint text is not <origin %s>, <size>, <root hash>", ErrMalformed, v.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || lines[1] != strconv.FormatInt(size, 10) {
		return nil, fmt.Errorf("%w: checkpoint size line %q is not a decimal size", ErrMalformed, lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return nil, fmt.Errorf("%w: checkpoint root line %q is not a base64 SHA-256 hash", ErrMalformed, lines[2])
	}
	c := &Checked{Origin: lines[0], Size: size}
	copy(c.Root[:], root)
	return c, nil
}
