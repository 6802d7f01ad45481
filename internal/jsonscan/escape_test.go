package jsonscan

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// escapeCases is every escape of RFC 8259 section 7 and every way one can
// be malformed. The callers' test (callers_test.go) runs the same cases
// through tools.CheckRawArguments and fingerprint.Canonicalize.
var escapeCases = []struct {
	name string
	in   string // from the backslash; may run on past the escape
	// accepted: want and n
	want string
	n    int
	// refused: kind, offset and detail
	kind   error
	offset int
	detail string
}{
	{name: "quote", in: `\"`, want: `"`, n: 2},
	{name: "backslash", in: `\\`, want: `\`, n: 2},
	{name: "slash", in: `\/`, want: "/", n: 2},
	{name: "backspace", in: `\b`, want: "\b", n: 2},
	{name: "form feed", in: `\f`, want: "\f", n: 2},
	{name: "newline", in: `\n`, want: "\n", n: 2},
	{name: "carriage return", in: `\r`, want: "\r", n: 2},
	{name: "tab", in: `\t`, want: "\t", n: 2},
	{name: "two-letter escape, text after it", in: `\nabc`, want: "\n", n: 2},
	{name: "u: NUL", in: `\u0000`, want: "\x00", n: 6},
	{name: "u: ASCII letter", in: `\u0041`, want: "A", n: 6},
	{name: "u: lower-case hex", in: `\u00e9`, want: "é", n: 6},
	{name: "u: upper-case hex", in: `\u00E9`, want: "é", n: 6},
	{name: "u: mixed-case hex", in: `\uAbCd`, want: "\uabcd", n: 6},
	{name: "u: last before the surrogates", in: `\ud7ff`, want: "\ud7ff", n: 6},
	{name: "u: first after the surrogates", in: `\ue000`, want: "\ue000", n: 6},
	{name: "u: U+FFFF", in: `\uffff`, want: "\uffff", n: 6},
	{name: "u: text after it", in: `\u0041\u0042`, want: "A", n: 6},
	{name: "pair: first above U+FFFF", in: `\ud800\udc00`, want: "\U00010000", n: 12},
	{name: "pair: emoji", in: `\ud83d\ude00`, want: "😀", n: 12},
	{name: "pair: upper-case hex", in: `\uD83D\uDE00`, want: "😀", n: 12},
	{name: "pair: last character", in: `\udbff\udfff`, want: "\U0010ffff", n: 12},

	{name: "backslash at the end", in: `\`, kind: ErrSyntax, detail: "unterminated escape"},
	{name: "unknown letter", in: `\x`, kind: ErrSyntax, detail: `invalid escape \x`},
	{name: "upper-case letter", in: `\N`, kind: ErrSyntax, detail: `invalid escape \N`},
	{name: "escaped apostrophe (not JSON)", in: `\'`, kind: ErrSyntax, detail: `invalid escape \'`},
	{name: "escaped zero (not JSON)", in: `\0`, kind: ErrSyntax, detail: `invalid escape \0`},
	{name: "u: upper-case U", in: `\U0041`, kind: ErrSyntax, detail: `invalid escape \U`},
	{name: "u: no digits", in: `\u`, kind: ErrSyntax, offset: 2, detail: `truncated \u escape`},
	{name: "u: three digits", in: `\u004`, kind: ErrSyntax, offset: 2, detail: `truncated \u escape`},
	{name: "u: a non-hex digit", in: `\u00g1`, kind: ErrSyntax, offset: 2, detail: `invalid hex digit 'g' in \u escape`},
	{name: "u: a quote among the digits", in: `\u00"`, kind: ErrSyntax, offset: 2, detail: `truncated \u escape`},
	{name: "u: a sign among the digits", in: `\u+041`, kind: ErrSyntax, offset: 2, detail: `invalid hex digit '+' in \u escape`},
	{name: "lone high surrogate", in: `\ud800`, kind: ErrLoneSurrogate, detail: `high surrogate \ud800 without a low surrogate`},
	{name: "high surrogate then text", in: `\ud800abcdef`, kind: ErrLoneSurrogate, detail: `high surrogate \ud800 without a low surrogate`},
	{name: "high surrogate then a two-letter escape", in: `\ud800\n`, kind: ErrLoneSurrogate, detail: `high surrogate \ud800 without a low surrogate`},
	{name: "high surrogate then a character", in: `\ud800\u0041`, kind: ErrLoneSurrogate, detail: `high surrogate \ud800 followed by \u0041`},
	{name: "two high surrogates", in: `\udbff\udbff`, kind: ErrLoneSurrogate, detail: `high surrogate \udbff followed by \udbff`},
	{name: "high surrogate then a truncated escape", in: `\ud800\u12`, kind: ErrSyntax, offset: 8, detail: `truncated \u escape`},
	{name: "high surrogate then a bad hex digit", in: `\ud800\udcz0`, kind: ErrSyntax, offset: 8, detail: `invalid hex digit 'z' in \u escape`},
	{name: "lone low surrogate", in: `\udc00`, kind: ErrLoneSurrogate, detail: `lone low surrogate \udc00`},
	{name: "last low surrogate", in: `\udfff`, kind: ErrLoneSurrogate, detail: `lone low surrogate \udfff`},
	{name: "low before high (reversed pair)", in: `\ude00\ud83d`, kind: ErrLoneSurrogate, detail: `lone low surrogate \ude00`},
}

func TestDecodeEscape(t *testing.T) {
	for _, tt := range escapeCases {
		t.Run(tt.name, func(t *testing.T) {
			got, n, err := DecodeEscape([]byte("pre:"), []byte(tt.in))
			sb := string(got)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("DecodeEscape(%q) error %v, want %q", tt.in, err, tt.want)
				}
				if got := strings.TrimPrefix(sb, "pre:"); got != tt.want || n != tt.n {
					t.Errorf("DecodeEscape(%q) = %q, %d; want %q, %d", tt.in, got, n, tt.want, tt.n)
				}
				return
			}
			var e *EscapeError
			if !errors.As(err, &e) || !errors.Is(err, tt.kind) {
				t.Fatalf("DecodeEscape(%q) error %v, want an *EscapeError of %v", tt.in, err, tt.kind)
			}
			if diff := cmp.Diff([]any{tt.offset, tt.detail, 0}, []any{e.Offset, e.Error(), n}); diff != "" {
				t.Errorf("DecodeEscape(%q) (offset, detail, n) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if sb != "pre:" {
				t.Errorf("DecodeEscape(%q) refused but wrote %q", tt.in, strings.TrimPrefix(sb, "pre:"))
			}
			if tt.kind == ErrLoneSurrogate && (e.Rune < 0xd800 || e.Rune > 0xdfff) {
				t.Errorf("DecodeEscape(%q) Rune = %U, want the surrogate", tt.in, e.Rune)
			}
		})
	}
}

// FuzzDecodeEscape: no input panics; what is accepted spans at most 12
// bytes and decodes to valid UTF-8.
func FuzzDecodeEscape(f *testing.F) {
	for _, tt := range escapeCases {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = append([]byte{'\\'}, data...)
		got, n, err := DecodeEscape(nil, data)
		if err != nil {
			return
		}
		if n < 2 || n > 12 || n > len(data) {
			t.Fatalf("DecodeEscape(%q) spans %d bytes", data, n)
		}
		if !utf8.Valid(got) {
			t.Fatalf("DecodeEscape(%q) = %q, not valid UTF-8", data, got)
		}
	})
}
