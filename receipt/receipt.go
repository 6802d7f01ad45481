package receipt

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	receiptv1 "github.com/latchhq/latch/proto/latch/receipt/v1"
)

// Format is the receipt's format field.
const Format = "latch-receipt/v1"

// JS is the JavaScript twin of this package (receipt.mjs), an ES module
// for agents and browsers; the console serves it.
//
//go:embed receipt.mjs
var JS []byte

// Errors of this package. Verify's errors wrap one of them and say which
// field or check failed.
var (
	// ErrMalformed: a receipt that does not parse or lacks a field.
	ErrMalformed = errors.New("receipt: malformed receipt")
	// ErrBadKey: a verifier key that does not parse.
	ErrBadKey = errors.New("receipt: invalid verifier key")
	// ErrSignature: a checkpoint not signed by the verifier key.
	ErrSignature = errors.New("receipt: checkpoint signature does not verify")
	// ErrProof: a leaf hash or inclusion proof that does not reach the
	// checkpoint's root.
	ErrProof = errors.New("receipt: proof does not verify")
	// ErrMismatch: a receipt field that is not the record's.
	ErrMismatch = errors.New("receipt: field is not the record's")
)

// Receipt is a receipt in its JSON form.
type Receipt struct {
	Format       string   `json:"format"`
	ExecutionID  string   `json:"execution_id"`
	Tool         string   `json:"tool"`
	Actor        string   `json:"actor"`
	Fingerprint  string   `json:"fingerprint"`
	State        string   `json:"state"`
	Outcome      string   `json:"outcome"`
	TargetStatus int32    `json:"target_status"`
	ResultSHA256 string   `json:"result_sha256"`
	JournalIndex uint64   `json:"journal_index"`
	LeafHash     []byte   `json:"leaf_hash"`
	Record       []byte   `json:"record"`
	Proof        [][]byte `json:"proof"`
	Checkpoint   string   `json:"checkpoint"`
}

// FromProto is the receipt of a receiptv1.Receipt.
func FromProto(p *receiptv1.Receipt) *Receipt {
	return &Receipt{
		Format: p.GetFormat(), ExecutionID: p.GetExecutionId(), Tool: p.GetTool(), Actor: p.GetActor(),
		Fingerprint: p.GetFingerprint(), State: p.GetState(), Outcome: p.GetOutcome(), TargetStatus: p.GetTargetStatus(),
		ResultSHA256: p.GetResultSha256(), JournalIndex: p.GetJournalIndex(), LeafHash: p.GetLeafHash(),
		Record: p.GetRecord(), Proof: p.GetProof(), Checkpoint: p.GetCheckpoint(),
	}
}

// Proto is r as a receiptv1.Receipt.
func (r *Receipt) Proto() *receiptv1.Receipt {
	return &receiptv1.Receipt{
		Format: r.Format, ExecutionId: r.ExecutionID, Tool: r.Tool, Actor: r.Actor,
		Fingerprint: r.Fingerprint, State: r.State, Outcome: r.Outcome, TargetStatus: r.TargetStatus,
		ResultSha256: r.ResultSHA256, JournalIndex: r.JournalIndex, LeafHash: r.LeafHash,
		Record: r.Record, Proof: r.Proof, Checkpoint: r.Checkpoint,
	}
}

// Digest is the receipt's short name: the lowercase hex of its leaf hash.
func (r *Receipt) Digest() string { return hex.EncodeToString(r.LeafHash) }

// Line is the receipt's one-line text form, for clients that show only
// text: "receipt <execution_id> <state> journal:<index> leaf:<digest>".
func (r *Receipt) Line() string {
	return fmt.Sprintf("receipt %s %s journal:%d leaf:%s", r.ExecutionID, r.State, r.JournalIndex, r.Digest())
}

// MarshalJSON writes the canonical form (Marshal).
func (r *Receipt) MarshalJSON() ([]byte, error) { return Marshal(r), nil }

// Marshal is the canonical JSON form of r (package comment).
func Marshal(r *Receipt) []byte {
	var b bytes.Buffer
	b.Grow(512 + len(r.Checkpoint) + base64.StdEncoding.EncodedLen(len(r.Record)) + len(r.Proof)*48)
	b.WriteString(`{"actor":`)
	writeString(&b, r.Actor)
	b.WriteString(`,"checkpoint":`)
	writeString(&b, r.Checkpoint)
	b.WriteString(`,"execution_id":`)
	writeString(&b, r.ExecutionID)
	b.WriteString(`,"fingerprint":`)
	writeString(&b, r.Fingerprint)
	b.WriteString(`,"format":`)
	writeString(&b, r.Format)
	b.WriteString(`,"journal_index":`)
	b.WriteString(strconv.FormatUint(r.JournalIndex, 10))
	b.WriteString(`,"leaf_hash":`)
	writeBase64(&b, r.LeafHash)
	b.WriteString(`,"outcome":`)
	writeString(&b, r.Outcome)
	b.WriteString(`,"proof":[`)
	for i, p := range r.Proof {
		if i > 0 {
			b.WriteByte(',')
		}
		writeBase64(&b, p)
	}
	b.WriteString(`],"record":`)
	writeBase64(&b, r.Record)
	b.WriteString(`,"result_sha256":`)
	writeString(&b, r.ResultSHA256)
	b.WriteString(`,"state":`)
	writeString(&b, r.State)
	b.WriteString(`,"target_status":`)
	b.WriteString(strconv.FormatInt(int64(r.TargetStatus), 10))
	b.WriteString(`,"tool":`)
	writeString(&b, r.Tool)
	b.WriteByte('}')
	return b.Bytes()
}

// writeString writes s as RFC 8785 does (and JavaScript's JSON.stringify):
// '"' and '\' escaped, control characters as \b \t \n \f \r or \u00xx,
// everything else as it is. Invalid UTF-8 is written as U+FFFD. Runs of
// bytes written as they are go in one write.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteString(s[start:i])
				b.WriteString("\uFFFD")
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			fmt.Fprintf(b, `\u%04x`, c)
		}
		i++
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// writeBase64 writes p in standard base64 as a JSON string: its alphabet
// needs no escaping.
func writeBase64(b *bytes.Buffer, p []byte) {
	b.WriteByte('"')
	b.Write(base64.StdEncoding.AppendEncode(b.AvailableBuffer(), p))
	b.WriteByte('"')
}

// maxReceipt bounds what Parse reads: a record is a few kilobytes, a proof
// at most 63 hashes.
const maxReceipt = 4 << 20

// Parse reads a receipt in any JSON form of its object. Every key is
// required (outcome and result_sha256 may be empty strings, proof an empty
// list); an unknown key, a wrong type or a format other than Format is an
// ErrMalformed error naming it.
func Parse(data []byte) (*Receipt, error) {
	if len(data) > maxReceipt {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(data), maxReceipt)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: not UTF-8", ErrMalformed)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %w", ErrMalformed, err)
	}
	for _, k := range fieldNames {
		if _, ok := keys[k]; !ok {
			return nil, fmt.Errorf("%w: key %q is missing", ErrMalformed, k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	r := new(Receipt)
	if err := dec.Decode(r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if r.Format != Format {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrMalformed, r.Format, Format)
	}
	return r, nil
}

// fieldNames are the keys of the canonical form, sorted.
var fieldNames = []string{
	"actor", "checkpoint", "execution_id", "fingerprint", "format", "journal_index", "leaf_hash",
	"outcome", "proof", "record", "result_sha256", "state", "target_status", "tool",
}

// leafHash is the RFC 6962 leaf hash of data.
func leafHash(data []byte) [sha256.Size]byte {
	return sha256.Sum256(append([]byte{0}, data...))
}
