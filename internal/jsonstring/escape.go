// Package jsonstring decodes the escape sequences of JSON string literals
// (RFC 8259 section 7) strictly: the two-character escapes, \uXXXX, and a
// character beyond U+FFFF as an escaped UTF-16 surrogate pair; a lone
// surrogate is refused, never replaced by U+FFFD as encoding/json does.
//
// It is the one decoder of the strict JSON readers that must agree on what
// a string means: the catalog's raw-argument scanner (tools/rawargs.go) and
// the fingerprint's RFC 8785 parser (controlplane/fingerprint). It imports
// only the standard library, so either may import it.
package jsonstring

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// The kinds of EscapeError.
var (
	// ErrSyntax: the escape is not in the grammar (unknown letter,
	// truncated, a bad hex digit).
	ErrSyntax = errors.New("jsonstring: malformed escape")
	// ErrLoneSurrogate: a \u escape names a UTF-16 surrogate that is not
	// half of a pair, which is no character.
	ErrLoneSurrogate = errors.New("jsonstring: lone UTF-16 surrogate")
)

// EscapeError is what is wrong with one escape sequence. It unwraps to its
// Kind.
type EscapeError struct {
	Kind   error  // ErrSyntax or ErrLoneSurrogate
	Offset int    // where the problem is, from the backslash
	Detail string // what it is, e.g. `invalid escape \x`
	Rune   rune   // ErrLoneSurrogate: the surrogate
}

func (e *EscapeError) Error() string { return e.Detail }
func (e *EscapeError) Unwrap() error { return e.Kind }

// DecodeEscape decodes the escape sequence at the start of data (data[0]
// is the backslash), writes the character it stands for to sb, and returns
// how many bytes of data it spans. An error is an *EscapeError; sb is then
// as it was.
func DecodeEscape(data []byte, sb *strings.Builder) (int, error) {
	if len(data) < 2 {
		return 0, &EscapeError{Kind: ErrSyntax, Detail: "unterminated escape"}
	}
	switch e := data[1]; e {
	case '"', '\\', '/':
		sb.WriteByte(e)
	case 'b':
		sb.WriteByte('\b')
	case 'f':
		sb.WriteByte('\f')
	case 'n':
		sb.WriteByte('\n')
	case 'r':
		sb.WriteByte('\r')
	case 't':
		sb.WriteByte('\t')
	case 'u':
		r, err := hex4(data, 2)
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(r) {
			sb.WriteRune(r)
			return 6, nil
		}
		if r >= 0xdc00 {
			return 0, &EscapeError{Kind: ErrLoneSurrogate, Rune: r, Detail: fmt.Sprintf(`lone low surrogate \u%04x`, r)}
		}
		// A high surrogate must be followed by an escaped low one.
		if len(data) < 8 || data[6] != '\\' || data[7] != 'u' {
			return 0, &EscapeError{Kind: ErrLoneSurrogate, Rune: r, Detail: fmt.Sprintf(`high surrogate \u%04x without a low surrogate`, r)}
		}
		r2, err := hex4(data, 8)
		if err != nil {
			return 0, err
		}
		if r2 < 0xdc00 || r2 > 0xdfff {
			return 0, &EscapeError{Kind: ErrLoneSurrogate, Rune: r, Detail: fmt.Sprintf(`high surrogate \u%04x followed by \u%04x`, r, r2)}
		}
		sb.WriteRune(utf16.DecodeRune(r, r2))
		return 12, nil
	default:
		return 0, &EscapeError{Kind: ErrSyntax, Detail: fmt.Sprintf(`invalid escape \%c`, rune(e))}
	}
	return 2, nil
}

// hex4 reads the four hex digits of a \u escape at data[at:].
func hex4(data []byte, at int) (rune, error) {
	if at+4 > len(data) {
		return 0, &EscapeError{Kind: ErrSyntax, Offset: at, Detail: `truncated \u escape`}
	}
	var r rune
	for _, c := range data[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, &EscapeError{Kind: ErrSyntax, Offset: at, Detail: fmt.Sprintf(`invalid hex digit %q in \u escape`, rune(c))}
		}
	}
	return r, nil
}
