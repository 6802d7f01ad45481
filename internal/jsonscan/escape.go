package jsonscan

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
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
// is the backslash), appends the character it stands for to dst, and
// returns dst and how many bytes of data it spans. An error is an
// *EscapeError; dst is then returned as it was.
func DecodeEscape(dst, data []byte) ([]byte, int, error) {
	if len(data) < 2 {
		return dst, 0, &EscapeError{Kind: ErrSyntax, Detail: "unterminated escape"}
	}
	switch e := data[1]; e {
	case '"', '\\', '/':
		dst = append(dst, e)
	case 'b':
		dst = append(dst, '\b')
	case 'f':
		dst = append(dst, '\f')
	case 'n':
		dst = append(dst, '\n')
	case 'r':
		dst = append(dst, '\r')
	case 't':
		dst = append(dst, '\t')
	case 'u':
		r, err := hex4(data, 2)
		if err != nil {
			return dst, 0, err
		}
		if !utf16.IsSurrogate(r) {
			dst = utf8.AppendRune(dst, r)
			return dst, 6, nil
		}
		if r >= 0xdc00 {
			return dst, 0, &EscapeError{Kind: ErrLoneSurrogate, Rune: r, Detail: fmt.Sprintf(`lone low surrogate \u%04x`, r)}
		}
		// A high surrogate must be followed by an escaped low one.
		if len(data) < 8 || data[6] != '\\' || data[7] != 'u' {
			return dst, 0, &EscapeError{Kind: ErrLoneSurrogate, Rune: r, Detail: fmt.Sprintf(`high surrogate \u%04x without a low surrogate`, r)}
		}
		r2, err := hex4(data, 8)
		if err != nil {
			return dst, 0, err
		}
		if r2 < 0xdc00 || r2 > 0xdfff {
			return dst, 0, &EscapeError{Kind: ErrLoneSurrogate, Rune: r, Detail: fmt.Sprintf(`high surrogate \u%04x followed by \u%04x`, r, r2)}
		}
		dst = utf8.AppendRune(dst, utf16.DecodeRune(r, r2))
		return dst, 12, nil
	default:
		return dst, 0, &EscapeError{Kind: ErrSyntax, Detail: fmt.Sprintf(`invalid escape \%c`, rune(e))}
	}
	return dst, 2, nil
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
