package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// tokens returns the kinds and texts of every token of data, or the error.
func tokens(data string, opts Options) ([]string, error) {
	s := New([]byte(data), opts)
	var out []string
	for {
		t, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		tok := map[Kind]string{ObjectStart: "{", ObjectEnd: "}", ArrayStart: "[", ArrayEnd: "]", String: "s:", Number: "n:", True: "true", False: "false", Null: "null"}[t.Kind]
		if t.Key {
			tok = "k:"
		}
		if t.Repeated {
			tok = "k2:"
		}
		out = append(out, tok+string(t.Text))
	}
}

func TestTokens(t *testing.T) {
	got, err := tokens(` {"a" : [1, -2.5e+3, "x\u0041\n", true, false, null, {}], "b\u00e9": {"c": []}} `, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"{", "k:a", "[", "n:1", "n:-2.5e+3", "s:xA\n", "true", "false", "null", "{", "}", "]", "k:bé", "{", "k:c", "[", "]", "}", "}"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens mismatch (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, in string
		opts     Options
		kind     error
		offset   int
		path     string
		inKey    bool
	}{
		{name: "empty", in: ``, kind: ErrSyntax},
		{name: "trailing", in: `{} x`, kind: ErrTrailingData, offset: 3},
		{name: "leading zero", in: `[01]`, kind: ErrSyntax, offset: 2},
		{name: "bare minus", in: `{"a":-}`, kind: ErrSyntax, offset: 6, path: "a"},
		{name: "no digits after the point", in: `[1.]`, kind: ErrSyntax, offset: 3, path: "[0]"},
		{name: "duplicate", in: `{"a":{"k":1,"\u006b":2}}`, kind: ErrDuplicateKey, offset: 12, path: "a", inKey: true},
		{name: "invalid UTF-8 in a value", in: "{\"a\":[\"ok\",\"x\xff\"]}", kind: ErrInvalidUTF8, offset: 13, path: "a[1]"},
		{name: "invalid UTF-8 in a key", in: "{\"a\":{\"\xc3\":1}}", kind: ErrInvalidUTF8, offset: 7, path: "a", inKey: true},
		{name: "lone surrogate", in: `{"a":"xy\udc00"}`, kind: ErrLoneSurrogate, offset: 8, path: "a"},
		{name: "bad escape", in: `["\u12x4"]`, kind: ErrSyntax, offset: 4, path: "[0]"},
		{name: "missing colon", in: `{"a" 1}`, kind: ErrSyntax, offset: 5, path: "a"},
		{name: "missing comma", in: `{"a":1 "b":2}`, kind: ErrSyntax, offset: 7},
		{name: "unterminated array", in: `{"a":[1`, kind: ErrSyntax, offset: 7, path: "a"},
		{name: "trailing comma", in: `[1,]`, kind: ErrSyntax, offset: 3, path: "[1]"},
		{name: "too deep", in: `[[[]]]`, opts: Options{MaxDepth: 2}, kind: ErrTooDeep, offset: 2, path: "[0][0]"},
		{name: "control character", in: "[\"\x01\"]", kind: ErrSyntax, offset: 2, path: "[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tokens(tt.in, tt.opts)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tt.kind) {
				t.Fatalf("tokens(%q) error %v, want an *Error of %v", tt.in, err, tt.kind)
			}
			if diff := cmp.Diff([]any{tt.offset, tt.path, tt.inKey}, []any{e.Offset, e.Path.String(), e.InKey}); diff != "" {
				t.Errorf("tokens(%q) = %v: (offset, path, in key) mismatch (-want +got):\n%s", tt.in, err, diff)
			}
		})
	}
}

func TestKeepDuplicates(t *testing.T) {
	in := `{"a":1,"b":{"a":2},"\u0061":3,"a":4}`
	got, err := tokens(in, Options{KeepDuplicates: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"{", "k:a", "n:1", "k:b", "{", "k:a", "n:2", "}", "k2:a", "n:3", "k2:a", "n:4", "}"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens mismatch (-want +got):\n%s", diff)
	}
	// Past smallObject keys the check is a map; it still finds repeats.
	var b strings.Builder
	b.WriteString("{")
	for i := range 3 * smallObject {
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
	}
	b.WriteString(`"kxx":2}`)
	if err := Valid([]byte(b.String()), Options{}); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("Valid(many keys, one repeated) = %v, want ErrDuplicateKey", err)
	}
}

func TestReplaceInvalidUTF8(t *testing.T) {
	in := "[\"a\xffb\", \"\\ud800\\u0041\", \"\\udc00\"]"
	got, err := tokens(in, Options{ReplaceInvalidUTF8: true})
	if err != nil {
		t.Fatal(err)
	}
	var want []any
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	wantTokens := []string{"["}
	for _, w := range want {
		wantTokens = append(wantTokens, "s:"+w.(string))
	}
	wantTokens = append(wantTokens, "]")
	if diff := cmp.Diff(wantTokens, got); diff != "" {
		t.Errorf("tokens mismatch with encoding/json's reading (-want +got):\n%s", diff)
	}
}

func TestSkip(t *testing.T) {
	in := []byte(`{"a":[1,{"b":"]}"}],"c":2}`)
	s := New(in, Options{})
	if tok, err := s.Next(); err != nil || tok.Kind != ObjectStart {
		t.Fatalf("Next = %v, %v; want '{'", tok, err)
	}
	for _, want := range []string{`[1,{"b":"]}"}]`, `2`} {
		if k, err := s.Next(); err != nil || !k.Key {
			t.Fatalf("Next = %v, %v; want a key", k, err)
		}
		v, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		end, err := s.Skip(v)
		if err != nil || string(in[v.Offset:end]) != want {
			t.Errorf("Skip = %q, %v; want %q", in[v.Offset:end], err, want)
		}
	}
	if tok, err := s.Next(); err != nil || tok.Kind != ObjectEnd {
		t.Fatalf("Next = %v, %v; want '}'", tok, err)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
}

// FuzzScanner compares the scanner with encoding/json: what the scanner
// accepts, encoding/json accepts and decodes to the same value; what
// encoding/json accepts, the scanner accepts unless a strict rule refuses
// it (invalid UTF-8, a lone surrogate, a repeated key, nesting); and with
// ReplaceInvalidUTF8 and KeepDuplicates it reads every string as
// encoding/json does.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `0`, `-0.5e-7`, `"x"`, `{"a":[1,{"b":null}],"c":true}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
		`"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `[01]`, `[1.]`, `{"a" 1}`, `[1,]`, ` [ ] `, `{} {}`, `"\u00e9\n\t\/"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		strictErr := Valid(data, Options{})
		jsonOK := json.Valid(data)
		if strictErr == nil {
			if !jsonOK {
				t.Fatalf("Valid(%q) accepted it, encoding/json refuses it", data)
			}
			if got, want := decode(t, data, Options{}), decodeStd(t, data); !cmp.Equal(got, want) {
				t.Fatalf("%q: scanner reads %#v, encoding/json %#v", data, got, want)
			}
			return
		}
		var e *Error
		if !errors.As(strictErr, &e) {
			t.Fatalf("Valid(%q) = %v, not an *Error", data, strictErr)
		}
		if !jsonOK {
			return
		}
		// encoding/json accepts it: only a strict rule may refuse it.
		switch {
		case errors.Is(e, ErrInvalidUTF8), errors.Is(e, ErrLoneSurrogate), errors.Is(e, ErrDuplicateKey), errors.Is(e, ErrTooDeep):
		default:
			t.Fatalf("Valid(%q) = %v, but encoding/json accepts it", data, strictErr)
		}
		lenient := Options{KeepDuplicates: true, ReplaceInvalidUTF8: true, MaxDepth: 10000}
		if err := Valid(data, lenient); err != nil {
			t.Fatalf("Valid(%q, lenient) = %v, but encoding/json accepts it", data, err)
		}
		if got, want := decode(t, data, lenient), decodeStd(t, data); !cmp.Equal(got, want) {
			t.Fatalf("%q: lenient scanner reads %#v, encoding/json %#v", data, got, want)
		}
	})
}

// decode reads data with the scanner into what encoding/json's UseNumber
// decoding makes (the last of repeated keys kept).
func decode(t *testing.T, data []byte, opts Options) any {
	s := New(data, opts)
	var val func(tok Token) any
	next := func() Token {
		tok, err := s.Next()
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		return tok
	}
	val = func(tok Token) any {
		switch tok.Kind {
		case ObjectStart:
			m := map[string]any{}
			for k := next(); k.Kind != ObjectEnd; k = next() {
				key := string(k.Text)
				m[key] = val(next())
			}
			return m
		case ArrayStart:
			a := []any{}
			for e := next(); e.Kind != ArrayEnd; e = next() {
				a = append(a, val(e))
			}
			return a
		case String:
			if !utf8.Valid(tok.Text) {
				t.Fatalf("%q: string %q is not UTF-8", data, tok.Text)
			}
			return string(tok.Text)
		case Number:
			return json.Number(tok.Text)
		case True:
			return true
		case False:
			return false
		}
		return nil
	}
	return val(next())
}

func decodeStd(t *testing.T, data []byte) any {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("encoding/json: %q: %v", data, err)
	}
	return v
}
