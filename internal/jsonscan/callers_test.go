package jsonscan_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/internal/jsonscan"
	"github.com/latchhq/latch/tools"
)

// TestCallersAgree runs every escape through both callers: the catalog's
// raw-argument check (tools.CheckRawArguments) and the fingerprint's JCS
// parser (fingerprint.Canonicalize). Both accept or both refuse it; a
// refused lone surrogate is ErrInvalidUTF8 to the fingerprint and "a lone
// UTF-16 surrogate" to the argument check; an accepted escape decodes, in
// both, to what DecodeEscape says.
func TestCallersAgree(t *testing.T) {
	for _, tt := range cases(t) {
		t.Run(tt.name, func(t *testing.T) {
			// The escape alone as a string value, then in a key beside
			// the same text spelled another way.
			str := `"` + tt.esc + `"`
			_, fpErr := fingerprint.Canonicalize([]byte(str))
			argErr := tools.CheckRawArguments([]byte(`{"a":` + str + `}`))
			if (fpErr == nil) != (argErr == nil) {
				t.Fatalf("%s: fingerprint says %v, the argument check says %v; want the same verdict", str, fpErr, argErr)
			}
			if fpErr != nil {
				lone := errors.Is(tt.err, jsonscan.ErrLoneSurrogate)
				if errors.Is(fpErr, fingerprint.ErrInvalidUTF8) != lone || !errors.Is(fpErr, fingerprint.ErrNotCanonicalizable) {
					t.Errorf("fingerprint.Canonicalize(%s) = %v; want ErrInvalidUTF8 %v", str, fpErr, lone)
				}
				if strings.Contains(argErr.Error(), "lone UTF-16 surrogate") != lone || !errors.Is(argErr, tools.ErrInvalidArguments) {
					t.Errorf("tools.CheckRawArguments(%s) = %v; want a lone surrogate %v", str, argErr, lone)
				}
				return
			}
			// Decoded the same: the fingerprint's canonical form is that
			// of the decoded string, and the argument check sees the key
			// spelled with the escape and the key spelled otherwise as
			// one key.
			got, _ := fingerprint.Canonicalize([]byte(str))
			want, err := fingerprint.CanonicalizeValue(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("fingerprint.Canonicalize(%s) = %s, want %s (the JCS form of %q)", str, got, want, tt.want)
			}
			if alt := respell(tt.want); alt != tt.esc {
				dup := fmt.Sprintf(`{"%s":1,"%s":2}`, tt.esc, alt)
				if err := tools.CheckRawArguments([]byte(dup)); err == nil || !strings.Contains(err.Error(), "twice") {
					t.Errorf("tools.CheckRawArguments(%s) = %v, want the key given twice (%q decodes to %q)", dup, err, tt.esc, tt.want)
				}
			}
		})
	}
}

type callerCase struct {
	name, esc, want string
	err             error
}

// cases are the escapes of TestDecodeEscape that fit in a string literal
// (an escape that runs into the closing quote is a different input), with
// what DecodeEscape makes of each.
func cases(t *testing.T) []callerCase {
	in := []string{
		`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`,
		`\u0000`, `\u0041`, `\u00e9`, `\u00E9`, `\uAbCd`, `\ud7ff`, `\ue000`, `\uffff`, `\u001f`,
		`\ud800\udc00`, `\ud83d\ude00`, `\uD83D\uDE00`, `\udbff\udfff`,
		`\x`, `\N`, `\'`, `\0`, `\U0041`, `\u`, `\u004`, `\u00g1`, `\u+041`,
		`\ud800`, `\ud800abcdef`, `\ud800\n`, `\ud800\u0041`, `\udbff\udbff`, `\ud800\u12`, `\ud800\udcz0`,
		`\udc00`, `\udfff`, `\ude00\ud83d`,
	}
	var out []callerCase
	for _, esc := range in {
		got, n, err := jsonscan.DecodeEscape(nil, []byte(esc))
		if err == nil && n != len(esc) {
			t.Fatalf("case %s: DecodeEscape spans %d of its %d bytes; cases are one escape each", esc, n, len(esc))
		}
		out = append(out, callerCase{name: esc, esc: esc, want: string(got), err: err})
	}
	return out
}

// respell spells s another way in a JSON string: printable ASCII as
// itself, everything else as \u escapes of its UTF-16 units.
func respell(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 0x20 && r < 0x7f && r != '"' && r != '\\':
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
