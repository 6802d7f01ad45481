// Package jsonscan is the one strict reader of JSON text (RFC 8259) in
// Latch: a scanner that returns a text's tokens in order and refuses, with
// the byte offset and the path of the value where it happens, everything
// encoding/json would let through or change:
//
//   - invalid UTF-8 in a string, and \u escapes of lone UTF-16 surrogates
//     (encoding/json replaces both by U+FFFD);
//   - a key given twice in one object, compared after unescaping, so
//     {"a":1,"\u0061":2} repeats "a" (encoding/json keeps the last);
//   - nesting of arrays and objects past a depth bound;
//   - anything outside the grammar, numbers included
//     (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), and anything but
//     white space after the value.
//
// Its callers read the same bytes the same way: the catalog's raw-argument
// check (tools), the fingerprint's RFC 8785 canonicaliser (fingerprint) and
// the journal export reader (journal), which alone keeps repeated keys (it
// reports them; see Options.KeepDuplicates). It decodes strings but never
// numbers: a number's range is its caller's business. It imports only the
// standard library, so any package may import it.
package jsonscan

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The kinds of Error (and of EscapeError: ErrSyntax, ErrLoneSurrogate).
var (
	// ErrSyntax: the text is not in the JSON grammar.
	ErrSyntax = errors.New("jsonscan: syntax error")
	// ErrInvalidUTF8: a string holds bytes that are not UTF-8.
	ErrInvalidUTF8 = errors.New("jsonscan: invalid UTF-8")
	// ErrLoneSurrogate: a \u escape names a UTF-16 surrogate that is not
	// half of a pair, which is no character.
	ErrLoneSurrogate = errors.New("jsonscan: lone UTF-16 surrogate")
	// ErrDuplicateKey: an object names the same key twice.
	ErrDuplicateKey = errors.New("jsonscan: duplicate object key")
	// ErrTooDeep: arrays and objects nest deeper than the bound.
	ErrTooDeep = errors.New("jsonscan: nesting too deep")
	// ErrTrailingData: something other than white space follows the value.
	ErrTrailingData = errors.New("jsonscan: data after the JSON value")
)

// DefaultMaxDepth is the nesting bound when Options.MaxDepth is zero.
const DefaultMaxDepth = 512

// Options tune a Scanner. The zero value is the strictest reading.
type Options struct {
	// MaxDepth bounds how deeply arrays and objects nest (0:
	// DefaultMaxDepth); opening one more is ErrTooDeep.
	MaxDepth int
	// KeepDuplicates accepts a key given twice in one object, marking its
	// second and later tokens Repeated, instead of refusing it with
	// ErrDuplicateKey. Only a reader that reports repeats as findings
	// (the journal's export check) wants this.
	KeepDuplicates bool
	// ReplaceInvalidUTF8 reads invalid UTF-8 bytes and lone surrogate
	// escapes as U+FFFD, as encoding/json does, instead of refusing them.
	// Only a reader that must split every text encoding/json reads (the
	// journal's export lines, whose values are checked afterwards) wants
	// this.
	ReplaceInvalidUTF8 bool
}

// Kind is what a Token is.
type Kind uint8

// The kinds of Token.
const (
	ObjectStart Kind = iota + 1
	ObjectEnd
	ArrayStart
	ArrayEnd
	String // a value or, with Key set, an object key
	Number
	True
	False
	Null
)

// Token is one token of the text.
type Token struct {
	Kind Kind
	// Key: a String that is an object key (the value follows).
	Key bool
	// Repeated: a key the object already had (only with KeepDuplicates).
	Repeated bool
	// Offset and End delimit the token in the input: from its first byte
	// to just past its last (for ObjectStart and ArrayStart, the opening
	// bracket only).
	Offset, End int
	// Text is a String's decoded text (no quotes, escapes resolved) or a
	// Number's text as written. It may alias the input or a buffer of the
	// scanner: valid until the next call to Next.
	Text []byte
}

// Step is one step of a path from the top of the text: an object key or,
// with InArray, an array index.
type Step struct {
	Key     string
	Index   int
	InArray bool
}

// Path is where a value is: the steps from the top of the text.
type Path []Step

// String renders p as "cfg.hosts[2].name": keys joined by dots, indexes in
// brackets; the top itself is "".
func (p Path) String() string {
	var b strings.Builder
	for _, s := range p {
		if s.InArray {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.Index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.Key)
	}
	return b.String()
}

// Error is a refusal: its Kind (one of the sentinels above), where it is,
// and what it is. It unwraps to its Kind.
type Error struct {
	Kind error
	// Offset is the byte offset of the problem in the input.
	Offset int
	// Path is the value the problem is in. For a problem in an object key
	// (InKey), or between an object's or array's members, it is the
	// object's or array's path.
	Path Path
	// InKey: the problem is in an object key.
	InKey bool
	// Detail says what is wrong, in the scanner's words (e.g.
	// "malformed number", `invalid escape \x`).
	Detail string
	// Byte is the offending byte (ErrInvalidUTF8).
	Byte byte
	// Rune is the surrogate (ErrLoneSurrogate).
	Rune rune
	// Key is the repeated key, decoded (ErrDuplicateKey).
	Key string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v at offset %d: %s", e.Kind, e.Offset, e.Detail)
}

func (e *Error) Unwrap() error { return e.Kind }

// smallObject is how many keys an object may have before its duplicate
// check switches from a linear search to a map.
const smallObject = 16

// frame is one open object or array.
type frame struct {
	object bool
	// inMember: the scanner is inside the current member (after its key,
	// or at an array element), so the member is part of the path.
	inMember bool
	index    int // array: the current element's index
	// Object: keys[keysFrom:] are this object's keys, in s.arena; key is
	// the current one; set holds them all once there are many.
	keysFrom int
	key      span
	set      map[string]struct{}
}

type span struct{ from, to int }

// Scanner reads one JSON text token by token.
type Scanner struct {
	data  []byte
	pos   int
	opts  Options
	state state
	stack []frame
	keys  []span // the keys of every open object, by frame
	arena []byte // the decoded keys' text
	buf   []byte // a string's decoded text when it has escapes
	err   error  // once set, every later call returns it
}

type state uint8

const (
	stValue       state = iota // a value is next
	stObjectFirst              // just after '{': a key or '}'
	stKey                      // after ',' in an object: a key
	stColon                    // after a key: ':' then a value
	stArrayFirst               // just after '[': a value or ']'
	stAfter                    // after a member: ',' or the closing bracket
	stDone                     // after the top value: only white space
	stEOF
)

// New returns a Scanner of data.
func New(data []byte, opts Options) *Scanner {
	s := &Scanner{}
	s.Reset(data, opts)
	return s
}

// Reset makes s a Scanner of data, keeping its buffers.
func (s *Scanner) Reset(data []byte, opts Options) {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	*s = Scanner{data: data, opts: opts, stack: s.stack[:0], keys: s.keys[:0], arena: s.arena[:0], buf: s.buf[:0]}
}

// Offset is the offset just past what s has read.
func (s *Scanner) Offset() int { return s.pos }

// Depth is how many objects and arrays are open.
func (s *Scanner) Depth() int { return len(s.stack) }

// Path is the path of the value s is in (see Error.Path).
func (s *Scanner) Path() Path {
	var p Path
	for i := range s.stack {
		f := &s.stack[i]
		if !f.inMember {
			break
		}
		if f.object {
			p = append(p, Step{Key: string(s.arena[f.key.from:f.key.to])})
		} else {
			p = append(p, Step{Index: f.index, InArray: true})
		}
	}
	return p
}

// pool keeps Valid's Scanners, and their buffers, between calls.
var pool = sync.Pool{New: func() any { return new(Scanner) }}

// Valid reports whether data is one strict JSON text, as Next reads it
// with opts.
func Valid(data []byte, opts Options) error {
	s := pool.Get().(*Scanner)
	defer pool.Put(s)
	s.Reset(data, opts)
	for {
		if _, err := s.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// Next returns the next token. After the last token of the value it
// returns io.EOF, or an Error of ErrTrailingData if anything but white
// space follows. After an error it returns that error again.
func (s *Scanner) Next() (Token, error) {
	if s.err != nil {
		return Token{}, s.err
	}
	t, err := s.next()
	if err != nil {
		s.err = err
	}
	return t, err
}

func (s *Scanner) next() (Token, error) {
	for {
		s.space()
		switch s.state {
		case stValue:
			return s.value()
		case stObjectFirst:
			if s.pos < len(s.data) && s.data[s.pos] == '}' {
				return s.close(ObjectEnd), nil
			}
			s.state = stKey
		case stKey:
			return s.key()
		case stColon:
			if s.pos >= len(s.data) || s.data[s.pos] != ':' {
				return Token{}, s.syntax("expected ':' after the key")
			}
			s.pos++
			s.state = stValue
		case stArrayFirst:
			if s.pos < len(s.data) && s.data[s.pos] == ']' {
				return s.close(ArrayEnd), nil
			}
			s.top().inMember = true
			s.state = stValue
		case stAfter:
			f := s.top()
			if s.pos >= len(s.data) {
				if f.object {
					return Token{}, s.syntax("unterminated object")
				}
				return Token{}, s.syntax("unterminated array")
			}
			switch c := s.data[s.pos]; {
			case c == ',':
				s.pos++
				if f.object {
					s.state = stKey
				} else {
					f.index++
					f.inMember = true
					s.state = stValue
				}
			case f.object && c == '}':
				return s.close(ObjectEnd), nil
			case !f.object && c == ']':
				return s.close(ArrayEnd), nil
			case f.object:
				return Token{}, s.syntax("expected ',' or '}' in object")
			default:
				return Token{}, s.syntax("expected ',' or ']' in array")
			}
		case stDone:
			if s.pos != len(s.data) {
				return Token{}, s.fail(ErrTrailingData, false, "unexpected data after the JSON value")
			}
			s.state = stEOF
			return Token{}, io.EOF
		default:
			return Token{}, io.EOF
		}
	}
}

// Skip skips the rest of the value whose first token Next just returned
// (nothing for a scalar) and returns the offset just past it.
func (s *Scanner) Skip(t Token) (int, error) {
	if t.Kind != ObjectStart && t.Kind != ArrayStart {
		return t.End, nil
	}
	depth := len(s.stack)
	for {
		u, err := s.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = s.syntax("unexpected end of input")
			}
			return 0, err
		}
		if (u.Kind == ObjectEnd || u.Kind == ArrayEnd) && len(s.stack) < depth {
			return u.End, nil
		}
	}
}

func (s *Scanner) top() *frame { return &s.stack[len(s.stack)-1] }

// done ends a value: the member it was, or the text.
func (s *Scanner) done() {
	if len(s.stack) == 0 {
		s.state = stDone
		return
	}
	s.top().inMember = false
	s.state = stAfter
}

func (s *Scanner) close(k Kind) Token {
	t := Token{Kind: k, Offset: s.pos, End: s.pos + 1}
	s.pos++
	f := s.top()
	if f.object {
		if len(s.keys) > f.keysFrom {
			s.arena = s.arena[:s.keys[f.keysFrom].from]
		}
		s.keys = s.keys[:f.keysFrom]
	}
	s.stack = s.stack[:len(s.stack)-1]
	s.done()
	return t
}

func (s *Scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *Scanner) fail(kind error, inKey bool, format string, args ...any) *Error {
	return &Error{Kind: kind, Offset: s.pos, Path: s.Path(), InKey: inKey, Detail: fmt.Sprintf(format, args...)}
}

func (s *Scanner) syntax(format string, args ...any) *Error {
	return s.fail(ErrSyntax, false, format, args...)
}

func (s *Scanner) value() (Token, error) {
	if s.pos >= len(s.data) {
		return Token{}, s.syntax("unexpected end of input")
	}
	start := s.pos
	switch c := s.data[s.pos]; c {
	case '{', '[':
		if len(s.stack) >= s.opts.MaxDepth {
			return Token{}, s.fail(ErrTooDeep, false, "arrays and objects nest deeper than %d levels", s.opts.MaxDepth)
		}
		s.pos++
		if c == '{' {
			s.stack = append(s.stack, frame{object: true, keysFrom: len(s.keys)})
			s.state = stObjectFirst
			return Token{Kind: ObjectStart, Offset: start, End: s.pos}, nil
		}
		s.stack = append(s.stack, frame{})
		s.state = stArrayFirst
		return Token{Kind: ArrayStart, Offset: start, End: s.pos}, nil
	case '"':
		text, err := s.str(false)
		if err != nil {
			return Token{}, err
		}
		s.done()
		return Token{Kind: String, Offset: start, End: s.pos, Text: text}, nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if err := s.number(); err != nil {
			return Token{}, err
		}
		s.done()
		return Token{Kind: Number, Offset: start, End: s.pos, Text: s.data[start:s.pos]}, nil
	case 't', 'f', 'n':
		for _, l := range [...]struct {
			word string
			kind Kind
		}{{"true", True}, {"false", False}, {"null", Null}} {
			if len(s.data)-s.pos >= len(l.word) && string(s.data[s.pos:s.pos+len(l.word)]) == l.word {
				s.pos += len(l.word)
				s.done()
				return Token{Kind: l.kind, Offset: start, End: s.pos}, nil
			}
		}
	}
	return Token{}, s.syntax("unexpected character %q", rune(s.data[s.pos]))
}

// key reads an object key and checks it is not one the object has.
func (s *Scanner) key() (Token, error) {
	f := s.top()
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return Token{}, s.syntax("expected a string as object key")
	}
	start := s.pos
	text, err := s.str(true)
	if err != nil {
		return Token{}, err
	}
	repeated := s.seen(f, text)
	if repeated && !s.opts.KeepDuplicates {
		e := s.fail(ErrDuplicateKey, true, "duplicate object key %q", text)
		e.Offset, e.Key = start, string(text)
		return Token{}, e
	}
	k := span{len(s.arena), len(s.arena) + len(text)}
	s.arena = append(s.arena, text...)
	s.keys = append(s.keys, k)
	if f.set != nil {
		f.set[string(text)] = struct{}{}
	} else if len(s.keys)-f.keysFrom > smallObject {
		f.set = make(map[string]struct{}, 2*smallObject)
		for _, k := range s.keys[f.keysFrom:] {
			f.set[string(s.arena[k.from:k.to])] = struct{}{}
		}
	}
	f.key, f.inMember = k, true
	s.state = stColon
	return Token{Kind: String, Key: true, Repeated: repeated, Offset: start, End: s.pos, Text: s.arena[k.from:k.to]}, nil
}

// seen reports whether the object of f already has the key.
func (s *Scanner) seen(f *frame, key []byte) bool {
	if f.set != nil {
		_, ok := f.set[string(key)]
		return ok
	}
	for _, k := range s.keys[f.keysFrom:] {
		if string(s.arena[k.from:k.to]) == string(key) {
			return true
		}
	}
	return false
}

// str reads a string at its opening quote and returns its decoded text
// (aliasing the input when it has no escapes, else s.buf).
func (s *Scanner) str(inKey bool) ([]byte, error) {
	s.pos++ // opening quote
	start := s.pos
	escaped := false
	s.buf = s.buf[:0]
	for {
		// The run of plain ASCII, in one go.
		i := s.pos
		for i < len(s.data) {
			c := s.data[i]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		if escaped {
			s.buf = append(s.buf, s.data[s.pos:i]...)
		}
		s.pos = i
		if s.pos >= len(s.data) {
			return nil, s.fail(ErrSyntax, inKey, "unterminated string")
		}
		switch c := s.data[s.pos]; {
		case c == '"':
			s.pos++
			if escaped {
				return s.buf, nil
			}
			return s.data[start : s.pos-1], nil
		case c < 0x20:
			return nil, s.fail(ErrSyntax, inKey, "unescaped control character %#x in a string", c)
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && n <= 1 && s.opts.ReplaceInvalidUTF8 {
				if !escaped {
					escaped = true
					s.buf = append(s.buf, s.data[start:s.pos]...)
				}
				s.buf = utf8.AppendRune(s.buf, utf8.RuneError)
				s.pos++
				continue
			}
			if r == utf8.RuneError && n <= 1 {
				e := s.fail(ErrInvalidUTF8, inKey, "invalid UTF-8 byte %#x", c)
				e.Byte = c
				return nil, e
			}
			if escaped {
				s.buf = append(s.buf, s.data[s.pos:s.pos+n]...)
			}
			s.pos += n
		default: // '\\'
			if !escaped {
				escaped = true
				s.buf = append(s.buf, s.data[start:s.pos]...)
			}
			var n int
			var err error
			s.buf, n, err = DecodeEscape(s.buf, s.data[s.pos:])
			if errors.Is(err, ErrLoneSurrogate) && s.opts.ReplaceInvalidUTF8 {
				s.buf = utf8.AppendRune(s.buf, utf8.RuneError)
				s.pos += len(`\uXXXX`) // the surrogate's escape alone
				continue
			}
			if err != nil {
				var ee *EscapeError
				errors.As(err, &ee) // DecodeEscape returns only *EscapeError
				e := s.fail(ee.Kind, inKey, "%s", ee.Detail)
				e.Offset += ee.Offset
				e.Rune = ee.Rune
				return nil, e
			}
			s.pos += n
		}
	}
}

// number reads the number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; the caller checks
// s.data[s.pos] is '-' or a digit.
func (s *Scanner) number() error {
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
		return s.syntax("malformed number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return s.syntax("malformed number")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return s.syntax("malformed number")
		}
	}
	return nil
}
