package redact

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/url"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// EncodedForm is one way a target may echo a secret.
type EncodedForm struct {
	Name   string
	Encode func(string) string
}

// EncodedForms are the forms the regression tests echo a secret in; the
// dispatcher's tests use the same list (redacttest would be one more
// package for one table, so it is repeated there by name).
var EncodedForms = []EncodedForm{
	{"raw", func(s string) string { return s }},
	{"json escaped slash", func(s string) string { return strings.ReplaceAll(jsonContent(s), "/", `\/`) }},
	{"json \\u00xx", func(s string) string { return uEscape(s, "\\u%04x") }},
	{"json \\u00XX", func(s string) string { return uEscape(s, "\\u%04X") }},
	{"json go", func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }},
	{"url query", url.QueryEscape},
	{"url path", url.PathEscape},
	{"base64 std", func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }},
	{"base64 std raw", func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }},
	{"base64 url", func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }},
	{"base64 url raw", func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }},
	{"base64 inside a longer text", func(s string) string {
		return base64.StdEncoding.EncodeToString([]byte(`{"token":"` + s + `"}`))
	}},
	{"html named", html.EscapeString},
	{"html &quot; &#x27;", func(s string) string {
		return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;").Replace(s)
	}},
	{"html decimal", func(s string) string { return numericHTML(s, "&#%d;") }},
	{"html hex", func(s string) string { return numericHTML(s, "&#x%X;") }},
}

// jsonContent is s as a JSON string's content, as encoding/json writes it
// without HTML escaping.
func jsonContent(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// uEscape writes the characters JSON writers may \u-escape (HTML specials,
// quotes, "/", controls, non-ASCII) as format says.
func uEscape(s string, format string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			b.WriteString(fmt.Sprintf(format, r1) + fmt.Sprintf(format, r2))
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r >= 0x80 || strings.ContainsRune(`<>&'"/`, r):
			fmt.Fprintf(&b, format, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func numericHTML(s, format string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`&<>"'/`, r) {
			fmt.Fprintf(&b, format, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestEncodedForms: a secret echoed in any form, inside other text, is
// replaced and no part of the encoded form stays. The secrets have a "/"
// (JSON's `\/`), HTML specials and non-ASCII.
func TestEncodedForms(t *testing.T) {
	secrets := []string{"a/b-secret-123", `p<&>"'w/d-9876`, "pässwörd-42", "tok en+with=sp/ace"}
	for _, secret := range secrets {
		r := New(Needles(nil, secret))
		for _, f := range EncodedForms {
			t.Run(f.Name+"/"+secret, func(t *testing.T) {
				enc := f.Encode(secret)
				in := "before " + enc + " after"
				got := r.String(in)
				if strings.Contains(got, enc) || !strings.Contains(got, Mark) {
					t.Errorf("String(%q) = %q, want the %s form replaced", in, got, f.Name)
				}
				if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") {
					t.Errorf("String(%q) = %q, want the text around it kept", in, got)
				}
			})
		}
	}
}

// TestSecrets: credential values get every form, and a value too short to
// be redacted is refused, never passed through.
func TestSecrets(t *testing.T) {
	needles, err := Secrets(nil, [][]byte{[]byte("tok/en-0123"), nil, []byte("deployer:pa ss")})
	if err != nil {
		t.Fatalf("Secrets = %v", err)
	}
	r := New(needles)
	for _, in := range []string{
		`tok\/en-0123`,
		base64.StdEncoding.EncodeToString([]byte("tok/en-0123")),
		base64.StdEncoding.EncodeToString([]byte("deployer:pa ss")),
		"deployer%3Apa+ss",
	} {
		if got := r.String(in); got != Mark {
			t.Errorf("String(%q) = %q, want %s", in, got, Mark)
		}
	}
	for _, short := range []string{"abc", "DACT", "x"} {
		_, err := Secrets(nil, [][]byte{[]byte("long-enough-1"), []byte(short)})
		if !errors.Is(err, ErrTooShort) {
			t.Errorf("Secrets(%q) = %v, want ErrTooShort", short, err)
		} else if strings.Contains(err.Error(), short) {
			t.Errorf("Secrets(%q) error %q quotes the value", short, err)
		}
	}
}

// FuzzForms: whatever the secret, each encoder's output of it, inside other
// text, is replaced, and the text around it is kept.
func FuzzForms(f *testing.F) {
	for _, s := range []string{"a/b-secret-123", `p<&>"'w/d`, "pässwörd", "\x00\x01\n\u2028", "🔑🔑"} {
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, secret string, pick int) {
		if len(secret) < MinLen || len(secret) > 64 || !utf8.ValidString(secret) || strings.ContainsAny(secret, "\x1e\x1f") || strings.Contains(Mark, secret) {
			return
		}
		form := EncodedForms[uint(pick)%uint(len(EncodedForms))]
		enc := form.Encode(secret)
		r := New(Needles(nil, secret))
		got := r.String("\x1e" + enc + "\x1f")
		if strings.Contains(got, enc) {
			t.Fatalf("secret %q, %s form %q: String kept it: %q", secret, form.Name, enc, got)
		}
		if !strings.HasPrefix(got, "\x1e") || !strings.HasSuffix(got, "\x1f") {
			t.Fatalf("secret %q, %s form %q: String = %q, want the text around it kept", secret, form.Name, enc, got)
		}
	})
}
