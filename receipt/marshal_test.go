package receipt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// runeByRune is writeString as it was first written, one rune at a time:
// the reference the run-at-a-time writer is held to.
func runeByRune(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, c := range s {
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
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteRune(c)
			}
		}
	}
	b.WriteByte('"')
}

func checkWriteString(t *testing.T, s string) {
	t.Helper()
	var got, want bytes.Buffer
	writeString(&got, s)
	runeByRune(&want, s)
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("writeString(%q) = %s, want %s", s, got.Bytes(), want.Bytes())
	}
	var back string
	if err := json.Unmarshal(got.Bytes(), &back); err != nil {
		t.Fatalf("writeString(%q) = %s, not a JSON string: %v", s, got.Bytes(), err)
	}
}

func TestWriteString(t *testing.T) {
	for _, s := range []string{"", "plain", `a"b\c`, "tab\tnl\ncr\r\b\f\x00\x1f\x7f", "é ✓ 🙂", "\xff", "a\xc3", "\xed\xa0\x80", "\uFFFD", "ends with \\",
		"latch/activity\n12\nAbC=\n\n— latch/activity AbCd+/==\n"} {
		checkWriteString(t, s)
	}
}

func FuzzWriteString(f *testing.F) {
	for _, s := range []string{"", `"\`, "é\x00\xff", "— x\n"} {
		f.Add(s)
	}
	f.Fuzz(checkWriteString)
}

// BenchmarkMarshal: one receipt of the size latch bench's calls get (a
// record of about 700 bytes, 12 proof hashes, a checkpoint with one
// signature) as canonical JSON.
func BenchmarkMarshal(b *testing.B) {
	r := &Receipt{
		Format: Format, ExecutionID: "act_01M8XBE2V1RGZTACBRQ0XBDFRR", Actor: "dev", Tool: "deploy_release", State: "completed",
		Outcome: "succeeded", TargetStatus: 200, Fingerprint: strings.Repeat("ab", 32), ResultSHA256: strings.Repeat("cd", 32),
		JournalIndex: 4095, LeafHash: bytes.Repeat([]byte{1}, 32), Record: bytes.Repeat([]byte("record"), 120),
		Checkpoint: "latch/activity\n4096\n" + strings.Repeat("A", 44) + "\n\n— latch/activity " + strings.Repeat("B", 92) + "\n",
	}
	for range 12 {
		r.Proof = append(r.Proof, bytes.Repeat([]byte{2}, 32))
	}
	b.ReportAllocs()
	for b.Loop() {
		Marshal(r)
	}
}
