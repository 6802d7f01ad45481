package tools

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckRawArguments(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// want is a substring of the error; "" means accepted.
		want string
	}{
		{"object", `{"a":"x","b":[1,2.5e3,{"c":null}],"d":true}`, ""},
		{"escaped pair is a character", `{"emoji":"\ud83d\ude00"}`, ""},
		{"empty key once", `{"":1}`, ""},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2}}`, ""},
		{"top-level duplicate", `{"env":"staging","env":"prod"}`, "argument env is given twice"},
		{"duplicate after unescaping", `{"a":1,"\u0061":2}`, "argument a is given twice"},
		{"nested duplicate", `{"cfg":{"hosts":[{"n":1},{"n":2,"n":3}]}}`, `argument cfg.hosts[1] has the key "n" twice`},
		{"lone high surrogate", `{"name":"\ud800"}`, `argument name holds a lone UTF-16 surrogate \ud800`},
		{"high surrogate then letter", `{"name":"\ud800\u0041"}`, `argument name holds a lone UTF-16 surrogate`},
		{"lone low surrogate", `{"x":["ok","\udc00"]}`, `argument x[1] holds a lone UTF-16 surrogate \udc00`},
		{"surrogate in a key", `{"\ud800":1}`, "a key of the arguments holds a lone UTF-16 surrogate"},
		{"invalid UTF-8 in a value", "{\"title\":\"a\xffb\"}", "argument title is not valid UTF-8"},
		{"invalid UTF-8 in a nested key", "{\"m\":{\"k\xc3\":1}}", "a key of argument m is not valid UTF-8"},
		{"overlong encoding", "{\"t\":\"\xc0\xaf\"}", "argument t is not valid UTF-8"},
		{"encoded surrogate", "{\"t\":\"\xed\xa0\x80\"}", "argument t is not valid UTF-8"},
		{"trailing data", `{"a":1} {"a":2}`, "unexpected data after the JSON value"},
		{"syntax", `{"a":01}`, "not valid JSON"},
		{"bad escape", `{"a":"\x"}`, "invalid escape"},
		{"control character", "{\"a\":\"\x01\"}", "unescaped control character"},
		{"too deep", `{"a":` + strings.Repeat("[", MaxArgumentsDepth) + strings.Repeat("]", MaxArgumentsDepth) + `}`, "deeper than 512 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRawArguments([]byte(tt.in))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckRawArguments(%q) = %v, want nil", tt.in, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("CheckRawArguments(%q) = %v, want an error containing %q", tt.in, err, tt.want)
			case err != nil && !errors.Is(err, ErrInvalidArguments):
				t.Fatalf("CheckRawArguments(%q) = %v, does not wrap ErrInvalidArguments", tt.in, err)
			}
		})
	}
}

// TestPrepareArgumentsRefusesWhatDecodingWouldChange: the checks run on the
// raw bytes inside PrepareArguments, so no caller can skip them.
func TestPrepareArgumentsRefusesWhatDecodingWouldChange(t *testing.T) {
	tool := mustParse(t, argsCatalog).Tools["deploy"]
	for _, in := range []string{
		`{"service":"api","version":"1","version":"2"}`,
		`{"service":"api","version":"\udfff"}`,
		"{\"service\":\"api\",\"version\":\"\xfe\"}",
	} {
		if args, err := tool.PrepareArguments([]byte(in)); err == nil || !strings.Contains(err.Error(), "argument version") {
			t.Errorf("PrepareArguments(%q) = %v, %v; want an error naming argument version", in, args, err)
		}
	}
}
