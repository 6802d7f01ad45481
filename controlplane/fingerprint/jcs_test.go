package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"testing"
)

// TestCanonicalizeRFC8785 runs the examples of RFC 8785 and the reference
// implementation's test files (cyberphone/json-canonicalization testdata).
func TestCanonicalizeRFC8785(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{
			name: "rfc 8785 3.2.2 values",
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			name: "rfc 8785 3.2.3 sorting",
			in: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{
			name: "cyberphone values",
			in:   "{\n  \"numbers\": [1E30, 4.50, 333333333.33333329, 2e-3, 0.000000000000000000000000001],\n  \"escaping\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n  \"literals\": [null, true, false]\n}",
			want: "{\"escaping\":\"€$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\",\"literals\":[null,true,false],\"numbers\":[1e+30,4.5,333333333.3333333,0.002,1e-27]}",
		},
		{
			name: "cyberphone weird",
			in:   "{\n  \"\\u20ac\": \"Euro Sign\",\n  \"1\": \"One\",\n  \"\\u0080\": \"Control\\u007f\",\n  \"\\ud83d\\ude02\": \"Smiley\",\n  \"\\u00f6\": \"Latin Small Letter O With Diaeresis\",\n  \"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\",\n  \"</script>\": \"Browser Challenge\"\n}\n",
			want: "{\"1\":\"One\",\"</script>\":\"Browser Challenge\",\"\u0080\":\"Control\u007f\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😂\":\"Smiley\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{
			name: "cyberphone french",
			in:   "{\n  \"peach\": \"This sorting order\",\n  \"péché\": \"is wrong according to French\",\n  \"pêche\": \"but canonicalization MUST\",\n  \"sin\":   \"ingnore locale\"\n}\n",
			want: "{\"peach\":\"This sorting order\",\"péché\":\"is wrong according to French\",\"pêche\":\"but canonicalization MUST\",\"sin\":\"ingnore locale\"}",
		},
		{
			name: "cyberphone structures",
			in:   "{\n  \"1\": {\"f\": {\"f\": \"hi\",\"F\": 5} ,\"\\n\": 56.0},\n  \"10\": { },\n  \"\": \"empty\",\n  \"a\": { },\n  \"111\": [ { } ],\n  \"A\": { }\n}",
			want: "{\"\":\"empty\",\"1\":{\"\\n\":56,\"f\":{\"F\":5,\"f\":\"hi\"}},\"10\":{},\"111\":[{}],\"A\":{},\"a\":{}}",
		},
		{
			name: "cyberphone unicode is not normalised",
			in:   "{\n  \"Unnormalized Unicode\":\"\\u1e0d\\u0307\"\n}\n",
			want: "{\"Unnormalized Unicode\":\"\u1e0d\u0307\"}",
		},
		{
			name: "cyberphone arrays",
			in:   "[\n  56,\n  {\n    \"d\": true,\n    \"10\": null,\n    \"1\": [ ]\n  }\n]\n",
			want: `[56,{"1":[],"10":null,"d":true}]`,
		},
		{
			name: "controls escaped in lowercase hex, del and line separator literal",
			in:   `"\u0001\u001F\u007f\u2028\b\f\t"`,
			want: "\"\\u0001\\u001f\u007f\u2028\\b\\f\\t\"",
		},
		{name: "scalars", in: ` [true,false,null,"",-0,0.0,-0.0e5] `, want: `[true,false,null,"",0,0,0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q) error: %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestFormatNumberRFC8785 is the number table of RFC 8785 Appendix B.
func TestFormatNumberRFC8785(t *testing.T) {
	tests := []struct {
		bits string
		want string // "" means: not representable, must be refused
	}{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"7fffffffffffffff", ""},
		{"7ff0000000000000", ""},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	for _, tt := range tests {
		t.Run(tt.bits, func(t *testing.T) {
			u, err := strconv.ParseUint(tt.bits, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			f := math.Float64frombits(u)
			got, err := CanonicalizeValue(f)
			if tt.want == "" {
				if !errors.Is(err, ErrNumberRange) {
					t.Fatalf("CanonicalizeValue(%v) = %s, %v; want ErrNumberRange", f, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CanonicalizeValue(%v) error: %v", f, err)
			}
			if string(got) != tt.want {
				t.Errorf("CanonicalizeValue(%v) = %s, want %s", f, got, tt.want)
			}
			// The canonical text parses back to the same double and is
			// its own canonical form.
			again, err := Canonicalize([]byte(tt.want))
			if err != nil || string(again) != tt.want {
				t.Errorf("Canonicalize(%s) = %s, %v; want it unchanged", tt.want, again, err)
			}
		})
	}
}

func TestNumberForms(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1.0", "1"},
		{"1e2", "100"},
		{"100", "100"},
		{"1E+2", "100"},
		{"-1.50", "-1.5"},
		{"1e21", "1e+21"},
		{"123456789012345678901", "123456789012345680000"},
		{"1e-6", "0.000001"},
		{"1e-7", "1e-7"},
		{"0.1", "0.1"},
		{"1.5e-7", "1.5e-7"},
		{"12345678.9e-30", "1.23456789e-23"},
		{"1e-400", "0"},                          // underflows to zero: representable
		{"-1e-400", "0"},                         // and -0 is 0
		{"9007199254740993", "9007199254740992"}, // rounds to the nearest double
		{"0.30000000000000004", "0.30000000000000004"},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil {
			t.Errorf("Canonicalize(%q) error: %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("Canonicalize(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"invalid utf8", "\"a\xffb\"", ErrInvalidUTF8},
		{"lone high surrogate", `"\ud800"`, ErrInvalidUTF8},
		{"lone high surrogate then char", `"\ud800x"`, ErrInvalidUTF8},
		{"high then non-low", `"\ud800\u0041"`, ErrInvalidUTF8},
		{"lone low surrogate", `"\udc00"`, ErrInvalidUTF8},
		{"duplicate key", `{"a":1,"a":1}`, ErrDuplicateKey},
		{"duplicate key by escape", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"nested duplicate key", `[{"x":{"b":1,"b":2}}]`, ErrDuplicateKey},
		{"number overflow", `1e309`, ErrNumberRange},
		{"negative overflow", `[-1e400]`, ErrNumberRange},
		{"trailing value", `{} {}`, ErrTrailingData},
		{"trailing garbage", `1 x`, ErrTrailingData},
		{"leading zero", `01`, ErrTrailingData},
		{"empty", ``, ErrSyntax},
		{"only space", `  `, ErrSyntax},
		{"NaN literal", `NaN`, ErrSyntax},
		{"bare minus", `-`, ErrSyntax},
		{"dot without digits", `1.`, ErrSyntax},
		{"exponent without digits", `1e+`, ErrSyntax},
		{"plus sign", `+1`, ErrSyntax},
		{"unterminated string", `"abc`, ErrSyntax},
		{"raw control in string", "\"a\nb\"", ErrSyntax},
		{"bad escape", `"\x41"`, ErrSyntax},
		{"bad hex", `"\u00G1"`, ErrSyntax},
		{"trailing comma", `[1,]`, ErrSyntax},
		{"missing colon", `{"a" 1}`, ErrSyntax},
		{"non-string key", `{1:2}`, ErrSyntax},
		{"bom", "\ufeff{}", ErrSyntax},
		{"unterminated object", `{"a":1`, ErrSyntax},
		{"too deep", string(bytes.Repeat([]byte("["), MaxDepth+1)) + string(bytes.Repeat([]byte("]"), MaxDepth+1)), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrNotCanonicalizable) {
				t.Fatalf("Canonicalize(%q) = %q, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
	// Exactly MaxDepth levels are fine.
	deep := string(bytes.Repeat([]byte("["), MaxDepth)) + string(bytes.Repeat([]byte("]"), MaxDepth))
	if _, err := Canonicalize([]byte(deep)); err != nil {
		t.Errorf("Canonicalize(%d nested arrays) error: %v", MaxDepth, err)
	}
}

func TestCanonicalizeValueRefusesNaN(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"x": math.Inf(-1)}} {
		if _, err := CanonicalizeValue(v); !errors.Is(err, ErrNumberRange) {
			t.Errorf("CanonicalizeValue(%v) error = %v, want ErrNumberRange", v, err)
		}
	}
	if _, err := CanonicalizeValue(make(chan int)); !errors.Is(err, ErrNotCanonicalizable) {
		t.Errorf("CanonicalizeValue(chan) error = %v, want ErrNotCanonicalizable", err)
	}
}

// TestKeyOrderUTF16 checks the case where UTF-16 order and code point
// (UTF-8 byte) order disagree: characters above U+FFFF encode as surrogates
// 0xD800–0xDFFF, which sort before U+E000–U+FFFF.
func TestKeyOrderUTF16(t *testing.T) {
	in := `{"\uffff":1,"\ud83d\ude00":2,"\ue000":3,"\ud7ff":4,"\ud800\udc00":5,"":6,"a":7,"ab":8}`
	want := "{\"\":6,\"a\":7,\"ab\":8,\"\ud7ff\":4,\"\U00010000\":5,\"😀\":2,\"\ue000\":3,\"\uffff\":1}"
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("Canonicalize(%q)\n got %q\nwant %q", in, got, want)
	}
	if compareUTF16("\U0001F600", "\uffff") >= 0 {
		t.Errorf("compareUTF16(U+1F600, U+FFFF) >= 0, want < 0")
	}
	if compareUTF16("a", "a") != 0 || compareUTF16("a", "ab") >= 0 || compareUTF16("b", "ab") <= 0 {
		t.Errorf("compareUTF16 ordering of ASCII prefixes is wrong")
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1.0,2e2,-0,"x\u0000"]}`,
		`[333333333.33333329, 1E30, 4.50, 2e-3, 1e-27]`,
		`{"\ud83d\ude00":1,"\uffff":2}`,
		`"\ud800"`, `{"a":1,"a":2}`, `1e400`, `[[[]]]`, `null`, ` true `,
		"\"\u2028\u007f\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Canonicalize(data)
		if err != nil {
			if !errors.Is(err, ErrNotCanonicalizable) {
				t.Fatalf("Canonicalize(%q) error %v does not wrap ErrNotCanonicalizable", data, err)
			}
			return
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("Canonicalize(Canonicalize(%q) = %q) error: %v", data, out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", data, out, again)
		}
		// The output is JSON of the same value as the input (as far as
		// encoding/json can tell; it accepts everything we accept).
		var in, res any
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatalf("encoding/json refuses input %q that Canonicalize accepted: %v", data, err)
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("encoding/json refuses output %q: %v", out, err)
		}
		if !reflect.DeepEqual(normalizeZero(in), normalizeZero(res)) {
			t.Fatalf("value changed: %q (%#v) -> %q (%#v)", data, in, out, res)
		}
	})
}

// normalizeZero maps -0 to 0: JCS serialises both as 0.
func normalizeZero(v any) any {
	switch v := v.(type) {
	case float64:
		if v == 0 {
			return 0.0
		}
		return v
	case []any:
		for i := range v {
			v[i] = normalizeZero(v[i])
		}
		return v
	case map[string]any:
		for k := range v {
			v[k] = normalizeZero(v[k])
		}
		return v
	}
	return v
}
