package tools

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/latchhq/latch/internal/jsonstring"
)

// Raw-argument checking. encoding/json, which decodes the arguments, is
// lenient in three ways that would let two different requests reach the
// same decoded value, or let a request mean one thing to Latch and another
// to a target: it replaces invalid UTF-8 and lone UTF-16 surrogate escapes
// ("\ud800") by U+FFFD, and it keeps the last of duplicate object keys
// ({"env":"staging","env":"prod"}). CheckRawArguments refuses all three in
// the raw bytes, before anything is decoded, and names where: the argument
// (and the path inside it) that holds the bad string or the repeated key.
// Keys are compared after unescaping, so {"a":1,"\u0061":2} is a duplicate.

// MaxArgumentsDepth bounds how deeply arrays and objects may nest inside the
// arguments object (the same bound the fingerprint's canonicaliser uses).
const MaxArgumentsDepth = 512

// CheckRawArguments checks one JSON text of a call's arguments: valid JSON,
// valid UTF-8 in every string (no raw invalid bytes, no lone surrogate
// escapes), no duplicate key in any object at any depth, nesting at most
// MaxArgumentsDepth. It does not decode numbers; PrepareArguments refuses
// those out of range. Errors wrap ErrInvalidArguments, name the argument
// path ("argument config.hosts[2].name") and never quote argument values.
func CheckRawArguments(data []byte) error {
	s := rawScanner{data: data}
	s.space()
	if err := s.value("", 0); err != nil {
		return err
	}
	s.space()
	if s.pos != len(s.data) {
		return argError("arguments are not valid JSON: unexpected data after the JSON value (offset %d)", s.pos)
	}
	return nil
}

type rawScanner struct {
	data []byte
	pos  int
}

// where names a path in a message: "the arguments" for the top level.
func where(at string) string {
	if at == "" {
		return "the arguments"
	}
	return "argument " + printablePath(at)
}

// printablePath quotes a path that holds characters a message should not
// carry raw (control characters, invalid UTF-8, quotes).
func printablePath(at string) string {
	for _, r := range at {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || r == '"' || !strconv.IsPrint(r) {
			return strconv.QuoteToASCII(at)
		}
	}
	return at
}

func (s *rawScanner) syntax(at, format string, args ...any) error {
	return argError("arguments are not valid JSON: %s (in %s, offset %d)", fmt.Sprintf(format, args...), where(at), s.pos)
}

func (s *rawScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *rawScanner) value(at string, depth int) error {
	if s.pos >= len(s.data) {
		return s.syntax(at, "unexpected end of input")
	}
	switch c := s.data[s.pos]; {
	case c == '{' || c == '[':
		if depth >= MaxArgumentsDepth {
			return argError("%s nests arrays and objects deeper than %d levels", where(at), MaxArgumentsDepth)
		}
		if c == '{' {
			return s.object(at, depth+1)
		}
		return s.array(at, depth+1)
	case c == '"':
		_, err := s.str(at, false)
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number(at)
	case s.literal("true"), s.literal("false"), s.literal("null"):
		return nil
	default:
		return s.syntax(at, "unexpected character %q", rune(c))
	}
}

func (s *rawScanner) literal(word string) bool {
	if strings.HasPrefix(string(s.data[s.pos:min(len(s.data), s.pos+len(word))]), word) {
		s.pos += len(word)
		return true
	}
	return false
}

func (s *rawScanner) object(at string, depth int) error {
	s.pos++ // '{'
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	seen := map[string]struct{}{}
	for {
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.syntax(at, "expected a string as object key")
		}
		key, err := s.str(at, true)
		if err != nil {
			return err
		}
		child := joinAt(at, key)
		if _, dup := seen[key]; dup {
			if at == "" {
				return argError("argument %s is given twice; give each argument once", printablePath(key))
			}
			return argError("%s has the key %s twice; give each key once", where(at), strconv.QuoteToASCII(key))
		}
		seen[key] = struct{}{}
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.syntax(child, "expected ':' after the key")
		}
		s.pos++
		s.space()
		if err := s.value(child, depth); err != nil {
			return err
		}
		s.space()
		if s.pos >= len(s.data) {
			return s.syntax(at, "unterminated object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.syntax(at, "expected ',' or '}' in object")
		}
	}
}

func (s *rawScanner) array(at string, depth int) error {
	s.pos++ // '['
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		s.space()
		if err := s.value(fmt.Sprintf("%s[%d]", at, i), depth); err != nil {
			return err
		}
		s.space()
		if s.pos >= len(s.data) {
			return s.syntax(at, "unterminated array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.syntax(at, "expected ',' or ']' in array")
		}
	}
}

// str scans a string at the opening quote. With decode it returns the
// unescaped text (object keys); otherwise only checks. at names the value
// the string is (or, for a key, the object it is in).
func (s *rawScanner) str(at string, decode bool) (string, error) {
	what := func() string {
		if decode {
			return "a key of " + where(at)
		}
		return where(at)
	}
	s.pos++ // opening quote
	var sb strings.Builder
	for {
		if s.pos >= len(s.data) {
			return "", s.syntax(at, "unterminated string")
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return sb.String(), nil
		case c < 0x20:
			return "", s.syntax(at, "unescaped control character %#x in a string", c)
		case c < utf8.RuneSelf && c != '\\':
			if decode {
				sb.WriteByte(c)
			}
			s.pos++
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && n <= 1 {
				return "", argError("%s is not valid UTF-8 (byte %#x at offset %d); send text as UTF-8", what(), c, s.pos)
			}
			if decode {
				sb.WriteRune(r)
			}
			s.pos += n
		default:
			if err := s.escape(at, what, &sb); err != nil {
				return "", err
			}
		}
	}
}

// escape decodes the escape sequence at s.pos (jsonstring: the same
// decoder as the fingerprint's JCS parser).
func (s *rawScanner) escape(at string, what func() string, sb *strings.Builder) error {
	n, err := jsonstring.DecodeEscape(s.data[s.pos:], sb)
	var e *jsonstring.EscapeError
	switch {
	case err == nil:
		s.pos += n
		return nil
	case !errors.As(err, &e):
		return s.syntax(at, "%v", err)
	case errors.Is(e, jsonstring.ErrLoneSurrogate):
		return argError("%s holds a lone UTF-16 surrogate \\u%04x at offset %d (not a character); send valid Unicode", what(), e.Rune, s.pos)
	default:
		s.pos += e.Offset
		return s.syntax(at, "%s", e.Detail)
	}
}

// number checks the JSON number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *rawScanner) number(at string) error {
	digits := func() int {
		n := 0
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case digits() == 0:
		return s.syntax(at, "malformed number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return s.syntax(at, "malformed number")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return s.syntax(at, "malformed number")
		}
	}
	return nil
}
