// Package actorname is the one rule for actor names: the name an execution,
// a task, a token and a journal record are filed under, however the actor
// authenticated (a control-plane token, a JWT claim, a certificate). The MCP
// front and the control plane both import it, so a name one accepts the
// other accepts too, and no two accepted names look alike because one hides
// characters the other lacks.
//
// An actor name (Check):
//   - is non-empty and at most MaxLen bytes;
//   - is valid UTF-8 in Unicode Normalization Form C. A name that is not NFC
//     is refused, not normalised: what is journaled is what was sent, and
//     "é" written as e + U+0301 and as U+00E9 cannot become two actors;
//   - holds only letters (L), marks (M), numbers (N), punctuation (P) and
//     symbols (S), and does not start with a mark. Refused are therefore
//     every control (Cc, C0 and C1, e.g. U+0085), format character (Cf: the
//     zero-width characters U+200B-U+200D, U+2060, U+FEFF and the bidi
//     controls U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), space (Zs: the
//     ASCII space, U+00A0 no-break space, U+3000 …), line and paragraph
//     separator (Zl, Zp), surrogate (Cs), private-use (Co) and unassigned
//     (Cn) code point;
//   - holds no other invisible code point either: the default-ignorable
//     letters and marks (Other_Default_Ignorable_Code_Point: the Hangul
//     fillers U+115F, U+1160, U+3164, U+FFA0, U+034F …), the variation
//     selectors, and U+2800 BRAILLE PATTERN BLANK.
//
// Names Latch issues credentials for (control-plane agent and operator
// tokens, console operators: CheckIssued) are further limited to at most
// MaxIssuedLen ASCII letters, digits and _ . @ -, starting with a letter or
// digit: a subset of Check that holds no ':', so an issued name never
// equals an OAuth actor made with a prefix that ends in ':' (the front's
// default, oauth:).
package actorname

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

const (
	// MaxLen bounds an actor name in bytes.
	MaxLen = 256
	// MaxIssuedLen bounds a name CheckIssued accepts, in bytes (ASCII).
	MaxIssuedLen = 128
)

// ErrInvalid is wrapped by every error of Check and CheckIssued.
var ErrInvalid = errors.New("actorname: invalid actor name")

// allowed are the general categories a name's code points may have.
var allowed = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S}

// invisible are code points of allowed categories that show as nothing.
var invisible = []*unicode.RangeTable{unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector}

// Check reports whether name is an acceptable actor name (see the package
// comment); the error, wrapping ErrInvalid, says which rule it breaks and
// names the offending code point.
func Check(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalid)
	case len(name) > MaxLen:
		return fmt.Errorf("%w: the name is %d bytes long, at most %d are allowed", ErrInvalid, len(name), MaxLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalid, name)
	}
	for i, r := range name {
		if why := refused(r, i == 0); why != "" {
			return fmt.Errorf("%w: %q holds U+%04X at byte %d, %s; actor names are letters, marks, numbers, punctuation and symbols only", ErrInvalid, name, r, i, why)
		}
	}
	if !norm.NFC.IsNormalString(name) {
		return fmt.Errorf("%w: %q is not in Unicode normalization form NFC (its NFC form is %q); send the NFC form, names are not normalised", ErrInvalid, name, norm.NFC.String(name))
	}
	return nil
}

// refused says why r may not be in a name ("" if it may).
func refused(r rune, first bool) string {
	switch {
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "an invisible format character (zero-width or bidi control)"
	case unicode.Is(unicode.Zs, r):
		return "a space"
	case unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return "a line or paragraph separator"
	case unicode.Is(unicode.Co, r):
		return "a private-use character"
	case !unicode.In(r, allowed...):
		return "an unassigned or surrogate code point"
	case unicode.In(r, invisible...), r == 0x2800:
		return "an invisible character"
	case first && unicode.Is(unicode.M, r):
		return "a combining mark with nothing to combine with"
	}
	return ""
}

// CheckIssued reports whether name is acceptable for a credential Latch
// issues (see the package comment): it passes Check and is 1-MaxIssuedLen
// ASCII letters, digits, _ . @ -, starting with a letter or digit.
func CheckIssued(name string) error {
	if err := Check(name); err != nil {
		return err
	}
	if len(name) > MaxIssuedLen {
		return fmt.Errorf("%w: the name is %d bytes long, an issued name has at most %d", ErrInvalid, len(name), MaxIssuedLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '.' || c == '@' || c == '-')) {
			continue
		}
		return fmt.Errorf("%w: %q: use 1-%d letters, digits, _ . @ -, starting with a letter or digit", ErrInvalid, name, MaxIssuedLen)
	}
	return nil
}
