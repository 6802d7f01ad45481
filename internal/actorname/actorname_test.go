package actorname

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		ok      bool
		errPart string // part of the error message, when refused
	}{
		{"ascii", "dev", true, ""},
		{"email", "alice@example.com", true, ""},
		{"prefixed", "oauth:google-oauth2|1234", true, ""},
		{"accented NFC", "jos\u00e9", true, ""},
		{"cjk", "\u5c71\u7530", true, ""},
		{"max length", strings.Repeat("a", MaxLen), true, ""},
		{"empty", "", false, "empty"},
		{"too long", strings.Repeat("a", MaxLen+1), false, "at most 256"},
		{"invalid utf8", "a\xffb", false, "not valid UTF-8"},
		{"ascii space", "two words", false, "a space"},
		{"zero width space", "dev\u200b", false, "U+200B"},
		{"zero width joiner", "de\u200dv", false, "format character"},
		{"bom", "\ufeffdev", false, "format character"},
		{"no-break space", "dev\u00a0", false, "U+00A0"},
		{"ideographic space", "dev\u3000", false, "a space"},
		{"bidi override", "a\u202eb", false, "U+202E"},
		{"bidi isolate", "a\u2066b", false, "format character"},
		{"next line C1", "\u0085x", false, "U+0085"},
		{"del", "a\x7f", false, "control"},
		{"tab", "a\tb", false, "control"},
		{"line separator", "a\u2028b", false, "line or paragraph"},
		{"private use", "a\ue000", false, "private-use"},
		{"unassigned", "a\U000e0080", false, "unassigned"},
		{"noncharacter", "a\uffff", false, "unassigned"},
		{"hangul filler", "dev\u3164", false, "invisible"},
		{"variation selector", "dev\ufe0f", false, "invisible"},
		{"braille blank", "dev\u2800", false, "invisible"},
		{"leading mark", "\u0301dev", false, "combining mark"},
		{"not NFC", "e\u0301", false, "NFC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.in)
			if tt.ok {
				if err != nil {
					t.Errorf("Check(%q) = %v, want nil", tt.in, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.errPart) {
				t.Errorf("Check(%q) = %v, want ErrInvalid saying %q", tt.in, err, tt.errPart)
			}
		})
	}
}

func TestCheckIssued(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"dev", true}, {"ops-alice", true}, {"a.b_c@d-e", true}, {strings.Repeat("a", MaxIssuedLen), true},
		{"", false}, {"-dash", false}, {"has space", false}, {"oauth:dev", false}, {"jos\u00e9", false},
		{"dev\u200b", false}, {strings.Repeat("a", MaxIssuedLen+1), false},
	} {
		if err := CheckIssued(tt.in); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("CheckIssued(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

// FuzzCheck: Check never panics; what it accepts is NFC UTF-8 of at most
// MaxLen bytes; what CheckIssued accepts, Check accepts.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"dev", "dev\u200b", "e\u0301", "a\u202eb", "oauth:x", "-x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := Check(s)
		if err == nil && (!utf8.ValidString(s) || !norm.NFC.IsNormalString(s) || len(s) > MaxLen || s == "") {
			t.Errorf("Check(%q) = nil for a name outside the rule", s)
		}
		if CheckIssued(s) == nil && err != nil {
			t.Errorf("CheckIssued(%q) = nil but Check(%q) = %v", s, s, err)
		}
	})
}
