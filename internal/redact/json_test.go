package redact

import (
	"encoding/json"
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
		{name: "a bare number secret becomes a string", in: `{"pin":12345678,"n":7}`, want: `{"n":7,"pin":"[REDACTED]"}`, parses: true},
		{name: "inside a string", in: `{"auth":"Bearer s3cr3t-value","ok":true}`, want: `{"auth":"Bearer [REDACTED]","ok":true}`, parses: true},
		{name: "a key", in: `{"s3cr3t-value":1}`, want: `{"[REDACTED]":1}`, parses: true},
		{name: "nested and in arrays", in: `[{"a":["s3cr3t-value",12345678.0]},null]`, want: `[{"a":["[REDACTED]","[REDACTED]"]},null]`, parses: true},
		{name: "JSON-escaped form inside a string", in: `{"a":"s3cr\u0033t-value"}`, want: `{"a":"[REDACTED]"}`, parses: true},
		{name: "not JSON: as text", in: `pin=12345678`, want: `pin=[REDACTED]`},
		{name: "two values: as text", in: `{"a":"s3cr3t-value"} {}`, want: `{"a":"[REDACTED]"} {}`},
		{name: "keys that would collide: as text", in: `{"s3cr3t-value":1,"[REDACTED]":2}`, want: `{"[REDACTED]":1,"[REDACTED]":2}`},
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
