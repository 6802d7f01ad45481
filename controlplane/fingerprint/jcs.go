package fingerprint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/latchhq/latch/internal/jsonscan"
)

// Errors returned by Canonicalize and CanonicalizeValue. Every one of them
// wraps ErrNotCanonicalizable, so callers that only need to know "this is
// not acceptable input" test for that; the wrapped message names the
// problem and its byte offset.
var (
	// ErrNotCanonicalizable is the class of every input refusal.
	ErrNotCanonicalizable = errors.New("fingerprint: input is not canonicalizable JSON")
	// ErrSyntax: the input is not a JSON text.
	ErrSyntax = fmt.Errorf("%w: syntax error", ErrNotCanonicalizable)
	// ErrInvalidUTF8: the input holds bytes that are not UTF-8, or a string
	// escapes a lone UTF-16 surrogate.
	ErrInvalidUTF8 = fmt.Errorf("%w: invalid UTF-8 or lone surrogate", ErrNotCanonicalizable)
	// ErrDuplicateKey: an object names the same member twice.
	ErrDuplicateKey = fmt.Errorf("%w: duplicate object key", ErrNotCanonicalizable)
	// ErrNumberRange: a number is beyond the IEEE-754 double range (or is
	// NaN or an infinity, which JSON text cannot spell but Go values can).
	ErrNumberRange = fmt.Errorf("%w: number out of double range", ErrNotCanonicalizable)
	// ErrTrailingData: something follows the JSON text.
	ErrTrailingData = fmt.Errorf("%w: data after the JSON value", ErrNotCanonicalizable)
	// ErrTooDeep: arrays and objects nest deeper than MaxDepth.
	ErrTooDeep = fmt.Errorf("%w: nesting too deep", ErrNotCanonicalizable)
)

// MaxDepth bounds the nesting of arrays and objects Canonicalize accepts,
// so hostile input cannot exhaust the stack.
const MaxDepth = 512

// Canonicalize returns the RFC 8785 (JCS) form of the JSON text data.
//
// It parses with the strict scanner (jsonscan) rather than encoding/json, because
// encoding/json silently replaces invalid UTF-8 and lone surrogate escapes
// by U+FFFD and keeps the last of duplicate keys: all three would let two
// different inputs share one canonical form. Numbers are kept as text until
// they are converted once, with correct rounding, to a double; no precision
// is lost on the way.
func Canonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: the input is not valid UTF-8", ErrInvalidUTF8)
	}
	return canonicalize(data)
}

// CanonicalizeValue marshals v with encoding/json and returns the JCS form
// of the result. Values encoding/json cannot marshal (NaN, channels, ...)
// are refused with an error wrapping ErrNotCanonicalizable.
func CanonicalizeValue(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		var unsupported *json.UnsupportedValueError
		if errors.As(err, &unsupported) {
			return nil, fmt.Errorf("%w: %v", ErrNumberRange, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNotCanonicalizable, err)
	}
	return Canonicalize(raw)
}

// canon writes the canonical form of one text as it scans it: no tree.
// An object's members are written as they come and, only when their keys
// are not already in RFC 8785 order (encoding/json writes map keys in
// byte order, which nearly always is), reordered when the object ends.
type canon struct {
	s       jsonscan.Scanner
	out     []byte
	keys    []byte   // the decoded keys of the open objects' members
	members []member // the members of the open objects
	tmp     []byte   // an object's members while they are reordered
}

// member is one member of an object: its key (in canon.keys) and its
// "key":value text (in canon.out).
type member struct {
	keyFrom, keyTo int
	from, to       int
}

// canons keeps canons (their scanner and buffers) between calls: the
// fingerprint runs on every call.
var canons = sync.Pool{New: func() any { return new(canon) }}

// canonicalize reads the JSON text data with the strict scanner
// (jsonscan: the same reading as the catalog's argument check) and returns
// its canonical form.
func canonicalize(data []byte) ([]byte, error) {
	c := canons.Get().(*canon)
	defer canons.Put(c)
	c.s.Reset(data, jsonscan.Options{MaxDepth: MaxDepth})
	c.out = make([]byte, 0, len(data))
	c.keys, c.members = c.keys[:0], c.members[:0]
	t, err := c.s.Next()
	if err != nil {
		return nil, scanError(err)
	}
	if err := c.value(t); err != nil {
		return nil, err
	}
	if _, err := c.s.Next(); !errors.Is(err, io.EOF) {
		return nil, scanError(err)
	}
	out := c.out
	c.out = nil // the caller's now
	return out, nil
}

// value writes the value whose first token is t.
func (c *canon) value(t jsonscan.Token) error {
	switch t.Kind {
	case jsonscan.ObjectStart:
		return c.object()
	case jsonscan.ArrayStart:
		c.out = append(c.out, '[')
		for i := 0; ; i++ {
			t, err := c.s.Next()
			if err != nil {
				return scanError(err)
			}
			if t.Kind == jsonscan.ArrayEnd {
				c.out = append(c.out, ']')
				return nil
			}
			if i > 0 {
				c.out = append(c.out, ',')
			}
			if err := c.value(t); err != nil {
				return err
			}
		}
	case jsonscan.String:
		c.out = appendString(c.out, t.Text)
	case jsonscan.Number:
		if plainInteger(t.Text) {
			c.out = append(c.out, t.Text...) // its own ECMAScript form
			return nil
		}
		// Converted once, correctly rounded, to a double.
		f, err := strconv.ParseFloat(string(t.Text), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%w at offset %d: %s", ErrNumberRange, t.Offset, t.Text)
		}
		c.out = append(c.out, formatNumber(f)...)
	case jsonscan.True:
		c.out = append(c.out, "true"...)
	case jsonscan.False:
		c.out = append(c.out, "false"...)
	default: // jsonscan.Null; the scanner returns no other kind here
		c.out = append(c.out, "null"...)
	}
	return nil
}

// object writes the object whose '{' Next just returned, its members
// sorted by their keys' UTF-16 code units (RFC 8785 §3.2.3).
func (c *canon) object() error {
	c.out = append(c.out, '{')
	start, first, keysFrom := len(c.out), len(c.members), len(c.keys)
	for {
		k, err := c.s.Next()
		if err != nil {
			return scanError(err)
		}
		if k.Kind == jsonscan.ObjectEnd {
			break
		}
		if len(c.members) > first {
			c.out = append(c.out, ',')
		}
		m := member{keyFrom: len(c.keys), from: len(c.out)}
		c.keys = append(c.keys, k.Text...)
		m.keyTo = len(c.keys)
		c.out = appendString(c.out, k.Text)
		c.out = append(c.out, ':')
		t, err := c.s.Next()
		if err != nil {
			return scanError(err)
		}
		if err := c.value(t); err != nil {
			return err
		}
		m.to = len(c.out)
		c.members = append(c.members, m)
	}
	ms := c.members[first:]
	byKey := func(a, b member) int { return compareKeys(c.keys[a.keyFrom:a.keyTo], c.keys[b.keyFrom:b.keyTo]) }
	if !slices.IsSortedFunc(ms, byKey) {
		slices.SortFunc(ms, byKey)
		c.tmp = append(c.tmp[:0], c.out[start:]...)
		c.out = c.out[:start]
		for i, m := range ms {
			if i > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, c.tmp[m.from-start:m.to-start]...)
		}
	}
	c.out = append(c.out, '}')
	c.members, c.keys = c.members[:first], c.keys[:keysFrom]
	return nil
}

// plainInteger reports whether a number's text is an integer that a double
// holds exactly and ECMAScript writes as is: up to 15 digits, not -0.
func plainInteger(text []byte) bool {
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
		if len(digits) == 1 && digits[0] == '0' {
			return false
		}
	}
	if len(digits) == 0 || len(digits) > 15 {
		return false
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return false
		}
	}
	return true
}

// scanError turns the scanner's refusal into this package's: a lone
// surrogate is ErrInvalidUTF8, like invalid bytes.
func scanError(err error) error {
	var e *jsonscan.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	switch {
	case errors.Is(e, jsonscan.ErrInvalidUTF8), errors.Is(e, jsonscan.ErrLoneSurrogate):
		return fmt.Errorf("%w at offset %d: %s", ErrInvalidUTF8, e.Offset, e.Detail)
	case errors.Is(e, jsonscan.ErrDuplicateKey):
		return fmt.Errorf("%w %q at offset %d", ErrDuplicateKey, e.Key, e.Offset)
	case errors.Is(e, jsonscan.ErrTooDeep):
		return fmt.Errorf("%w at offset %d: more than %d levels", ErrTooDeep, e.Offset, MaxDepth)
	case errors.Is(e, jsonscan.ErrTrailingData):
		return fmt.Errorf("%w at offset %d", ErrTrailingData, e.Offset)
	default:
		return fmt.Errorf("%w at offset %d: %s", ErrSyntax, e.Offset, e.Detail)
	}
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// §3.2.3 requires. It differs from Go's byte (code point) order only when a
// string holds characters above U+FFFF and others in U+E000–U+FFFF.
func compareUTF16(a, b string) int { return compareKeys([]byte(a), []byte(b)) }

// compareKeys is compareUTF16 of keys as the scanner returns them.
func compareKeys(a, b []byte) int {
	// The common prefix is equal in any order; past it, ASCII on both
	// sides orders as bytes.
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	switch {
	case i == len(a) && i == len(b):
		return 0
	case i == len(a):
		return -1
	case i == len(b):
		return 1
	case a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf:
		if a[i] < b[i] {
			return -1
		}
		return 1
	}
	// Back to the start of the character that differs.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	a, b = a[i:], b[i:]
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		a, b = a[na:], b[nb:]
		if ra == rb {
			continue
		}
		ua, ub := utf16Units(ra), utf16Units(rb)
		for i := range 2 {
			if ua[i] != ub[i] {
				if ua[i] < ub[i] {
					return -1
				}
				return 1
			}
		}
	}
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return -1
	default:
		return 1
	}
}

// utf16Units returns the UTF-16 code units of r, padded with a zero unit
// (which sorts first, like the end of a string would).
func utf16Units(r rune) [2]uint16 {
	if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
		return [2]uint16{uint16(r1), uint16(r2)}
	}
	return [2]uint16{uint16(r), 0}
}

const hexDigits = "0123456789abcdef"

// appendString appends s as RFC 8785 §3.2.2.2 requires.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	plain := 0 // s[plain:i] is still to copy as it is
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[plain:i]...)
		plain = i + 1
		switch c {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	dst = append(dst, s[plain:]...)
	return append(dst, '"')
}

// formatNumber serialises f as ECMAScript's Number.prototype.toString
// (ECMA-262 Number::toString, radix 10), which RFC 8785 §3.2.2.3 adopts.
// Go's shortest round-trip formatting yields the same digits as the
// ECMAScript algorithm (the shortest that round-trip, the closest to f
// when several do); only the layout differs.
func formatNumber(f float64) string {
	if f == 0 { // also -0
		return "0"
	}
	if f < 0 {
		return "-" + formatNumber(-f)
	}
	// "d.dddde±xx": digits and decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp) // cannot fail: FormatFloat wrote it
	k := len(digits)
	n := x + 1 // f = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	sign := "+"
	if n-1 < 0 {
		sign = "-"
	}
	abs := n - 1
	if abs < 0 {
		abs = -abs
	}
	if k == 1 {
		return digits + "e" + sign + strconv.Itoa(abs)
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + strconv.Itoa(abs)
}
