package fingerprint

import (
	"bytes"
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
	v, err := parse(data)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(data))
	writeValue(&buf, v)
	return buf.Bytes(), nil
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

// node is a parsed JSON value: one of nil (null), bool, float64, string,
// []node, or object.
type node any

type member struct {
	key   string
	value node
}

type object []member

// scanners keeps Scanners (and their buffers) between calls: the
// fingerprint runs on every call.
var scanners = sync.Pool{New: func() any { return new(jsonscan.Scanner) }}

// parse reads the JSON text data into a tree with the strict scanner
// (jsonscan: the same reading as the catalog's argument check).
func parse(data []byte) (node, error) {
	s := scanners.Get().(*jsonscan.Scanner)
	defer scanners.Put(s)
	s.Reset(data, jsonscan.Options{MaxDepth: MaxDepth})
	t, err := s.Next()
	if err != nil {
		return nil, scanError(err)
	}
	v, err := value(s, t)
	if err != nil {
		return nil, err
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		return nil, scanError(err)
	}
	return v, nil
}

// value builds the value whose first token is t.
func value(s *jsonscan.Scanner, t jsonscan.Token) (node, error) {
	switch t.Kind {
	case jsonscan.ObjectStart:
		obj := object{}
		for {
			k, err := s.Next()
			if err != nil {
				return nil, scanError(err)
			}
			if k.Kind == jsonscan.ObjectEnd {
				return obj, nil
			}
			key := string(k.Text)
			t, err := s.Next()
			if err != nil {
				return nil, scanError(err)
			}
			v, err := value(s, t)
			if err != nil {
				return nil, err
			}
			obj = append(obj, member{key: key, value: v})
		}
	case jsonscan.ArrayStart:
		arr := []node{}
		for {
			t, err := s.Next()
			if err != nil {
				return nil, scanError(err)
			}
			if t.Kind == jsonscan.ArrayEnd {
				return arr, nil
			}
			v, err := value(s, t)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
	case jsonscan.String:
		return string(t.Text), nil
	case jsonscan.Number:
		// Converted once, correctly rounded, to a double.
		f, err := strconv.ParseFloat(string(t.Text), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%w at offset %d: %s", ErrNumberRange, t.Offset, t.Text)
		}
		return f, nil
	case jsonscan.True:
		return true, nil
	case jsonscan.False:
		return false, nil
	default: // jsonscan.Null; the scanner returns no other kind here
		return nil, nil
	}
}

// scanError turns the scanner's refusal into this package's: a lone
// surrogate is ErrInvalidUTF8, like invalid bytes.
func scanError(err error) error {
	var e *jsonscan.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	switch e.Kind {
	case jsonscan.ErrInvalidUTF8, jsonscan.ErrLoneSurrogate:
		return fmt.Errorf("%w at offset %d: %s", ErrInvalidUTF8, e.Offset, e.Detail)
	case jsonscan.ErrDuplicateKey:
		return fmt.Errorf("%w %q at offset %d", ErrDuplicateKey, e.Key, e.Offset)
	case jsonscan.ErrTooDeep:
		return fmt.Errorf("%w at offset %d: more than %d levels", ErrTooDeep, e.Offset, MaxDepth)
	case jsonscan.ErrTrailingData:
		return fmt.Errorf("%w at offset %d", ErrTrailingData, e.Offset)
	default:
		return fmt.Errorf("%w at offset %d: %s", ErrSyntax, e.Offset, e.Detail)
	}
}

func writeValue(buf *bytes.Buffer, v node) {
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if v {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case float64:
		buf.WriteString(formatNumber(v))
	case string:
		writeString(buf, v)
	case []node:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeValue(buf, e)
		}
		buf.WriteByte(']')
	case object:
		// The tree is this call's own: sort in place.
		sorted := v
		slices.SortFunc(sorted, func(a, b member) int { return compareUTF16(a.key, b.key) })
		buf.WriteByte('{')
		for i, m := range sorted {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, m.key)
			buf.WriteByte(':')
			writeValue(buf, m.value)
		}
		buf.WriteByte('}')
	}
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// §3.2.3 requires. It differs from Go's byte (code point) order only when a
// string holds characters above U+FFFF and others in U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
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
	case a == "" && b == "":
		return 0
	case a == "":
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

// writeString writes s as RFC 8785 §3.2.2.2 requires.
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			if c < 0x20 {
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xf])
			} else {
				buf.WriteByte(c)
			}
		}
	}
	buf.WriteByte('"')
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
