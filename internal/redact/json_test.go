package redact

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	r := New(Needles(Needles(nil, "s3cr3t-value"), 12345678.0))
	tests := []struct {
		name, in, want string
		parses         bool
	}{
		{name: "no secret: unchanged, formatting kept", in: `{ "b": 1,  "a": "x" }`, want: `{ "b": 1,  "a": "x" }`, parses: true},
		{name: "a bare number secret becomes a string", in: `{"pin":12345678,"n":7}`, want: `{"pin":"[REDACTED]","n":7}`, parses: true},
		{name: "a number in another form", in: `{"pin":1.2345678e7}`, want: `{"pin":"[REDACTED]"}`, parses: true},
		{name: "duplicate keys: each value redacted", in: `{"a":"\u0073\u0033cr3t-value","a":"x"}`, want: `{"a":"[REDACTED]","a":"x"}`, parses: true},
		{name: "an escaped key beside a redacted one", in: `{"xs3cr3t-value":1,"y":"\u0073\u0033cr3t-value"}`, want: `{"x[REDACTED]":1,"y":"[REDACTED]"}`, parses: true},
		{name: "inside a string", in: `{"auth":"Bearer s3cr3t-value","ok":true}`, want: `{"auth":"Bearer [REDACTED]","ok":true}`, parses: true},
		{name: "a key", in: `{"s3cr3t-value":1}`, want: `{"[REDACTED]":1}`, parses: true},
		{name: "deeply nested, empty containers kept", in: `{"a":{"b":"s3cr3t-value","c":[1,{"d":2},[]]},"e":{},"f":[[]]}`, want: `{"a":{"b":"[REDACTED]","c":[1,{"d":2},[]]},"e":{},"f":[[]]}`, parses: true},
		{name: "nested and in arrays", in: `[{"a":["s3cr3t-value",12345678.0]},null,true]`, want: `[{"a":["[REDACTED]","[REDACTED]"]},null,true]`, parses: true},
		{name: "JSON-escaped form inside a string", in: `{"a":"s3cr\u0033t-value"}`, want: `{"a":"[REDACTED]"}`, parses: true},
		{name: "not JSON: as text", in: `pin=12345678`, want: `pin=[REDACTED]`},
		{name: "two values: as text", in: `{"a":"s3cr3t-value"} {}`, want: `{"a":"[REDACTED]"} {}`},
		{name: "keys that become one: both kept", in: `{"s3cr3t-value":1,"[REDACTED]":2}`, want: `{"[REDACTED]":1,"[REDACTED]":2}`},
		{name: "not valid UTF-8: as text", in: "{\"a\":\"s3cr3t-value\xff\"}", want: "{\"a\":\"[REDACTED]\xff\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.JSON(tt.in)
			if got != tt.want {
				t.Errorf("JSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
			if strings.Contains(got, "s3cr3t-value") || strings.Contains(got, "12345678") {
				t.Errorf("JSON(%s) = %s still holds a secret", tt.in, got)
			}
			if tt.parses && !json.Valid([]byte(got)) {
				t.Errorf("JSON(%s) = %s does not parse", tt.in, got)
			}
		})
	}
	if got := (*Redactor)(nil).JSON(`{"pin":12345678}`); got != `{"pin":12345678}` {
		t.Errorf("nil redactor changed the document: %s", got)
	}
}

// FuzzJSON: whatever the document, JSON leaves no needle in clear, and a
// document that parsed still parses once a needle was replaced in it.
func FuzzJSON(f *testing.F) {
	f.Add(`{"pin":12345678}`, "12345678")
	f.Add(`["abcd","xabcdy"]`, "abcd")
	f.Add(`{"abcd":"abcd"}`, "abcd")
	f.Fuzz(func(t *testing.T, doc, secret string) {
		if len(secret) < MinLen {
			return
		}
		r := New(Needles(nil, secret))
		got := r.JSON(doc)
		if r.String(got) != got {
			t.Fatalf("JSON(%q) with secret %q = %q: a needle is left", doc, secret, got)
		}
		if got != doc && json.Valid([]byte(doc)) && !json.Valid([]byte(got)) && r.String(doc) != got {
			t.Fatalf("JSON(%q) with secret %q = %q: parsed before, not after (and not the text fallback)", doc, secret, got)
		}
	})
}

// TestNeedlesASCIIEscaped: a non-ASCII secret is found as JSON writers that
// escape every non-ASCII character write it, in either case of hex digit,
// also outside a JSON document.
func TestNeedlesASCIIEscaped(t *testing.T) {
	r := New(Needles(nil, "pässwörd1🔑"))
	for _, in := range []string{
		`p\u00e4ssw\u00f6rd1\ud83d\udd11`,
		`p\u00E4ssw\u00F6rd1\uD83D\uDD11`,
		"pässwörd1🔑",
	} {
		if got := r.String("x=" + in); got != "x=[REDACTED]" {
			t.Errorf("String(x=%s) = %s, want x=[REDACTED]", in, got)
		}
	}
	// Upper-case hex touches \u escapes only, never the text after an
	// escaped backslash.
	forms := Forms(`a\u00e4ä`)
	if !slices.Contains(forms, `a\\u00e4\u00E4`) || slices.Contains(forms, `a\\u00E4\u00E4`) {
		t.Errorf("Forms(%q) = %q, want a\\\\u00e4\\u00E4 and not a\\\\u00E4\\u00E4", `a\u00e4ä`, forms)
	}
}
