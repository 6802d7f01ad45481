package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/url"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrTooShort is returned by Secrets for a credential value too short to be
// redacted (shorter than MinLen bytes, or inside Mark): it could not be
// told apart from ordinary text, so it would be stored as it is. A caller
// refuses to present such a credential rather than store it.
var ErrTooShort = errors.New("redact: secret is too short to be redacted")

// Secrets appends to out the needles of credential values (an HTTP
// credential's Secrets: tokens, passwords, "user:pass" pairs, session
// tokens), every form Forms gives. Empty values are skipped (a credential
// without a session token has none). Unlike a secret argument, which is
// left alone when shorter than MinLen (Needles), a credential value that
// cannot be redacted is an error wrapping ErrTooShort: the caller must not
// present it. The error never quotes the value.
func Secrets(out [][]byte, values [][]byte) ([][]byte, error) {
	for i, v := range values {
		if len(v) == 0 {
			continue
		}
		if len(v) < MinLen || bytes.Contains([]byte(Mark), v) {
			return out, fmt.Errorf("%w: secret %d of the credential has %d bytes, at least %d are needed", ErrTooShort, i+1, len(v), MinLen)
		}
		for _, f := range Forms(string(v)) {
			out = append(out, []byte(f))
		}
	}
	return out, nil
}

// Forms returns s and every encoded form of it a target may echo, each
// once, the forms shorter than MinLen left out:
//
//   - raw;
//   - JSON string content, as encoding/json writes it (HTML-escaped or not)
//     and as other writers do: "/" as `\/` (PHP) or \u002F, <, >, &, ' and
//     " as \u00XX, controls as \u00XX rather than \n, every non-ASCII character as \uXXXX (Python), in lower- and
//     upper-case hex, in every combination;
//   - URL-escaped: query escaping (+ for space) and path escaping (%20),
//     in upper- and lower-case hex;
//   - base64, standard and URL alphabets, padded and unpadded, and the
//     part of each that does not depend on the bytes around s when s is
//     encoded inside a longer text (at each of the three offsets);
//   - HTML: the named entities (&amp; &lt; &gt; &quot; &#39;, and &#x27;,
//     &apos; and &#x2F; as other encoders write ' and /) and decimal and
//     hexadecimal numeric references for those characters.
func Forms(s string) []string {
	forms := []string{s}
	forms = append(forms, jsonForms(s)...)
	forms = append(forms, urlForms(s)...)
	forms = append(forms, base64Forms(s)...)
	forms = append(forms, htmlForms(s)...)
	out := forms[:0]
	for _, f := range forms {
		if len(f) >= MinLen && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// JSON escaping choices, combined in jsonForms.
const (
	jsonSlash    = 1 << iota // "/" as `\/`
	jsonHTML                 // <, >, & as \u00XX
	jsonQuote                // ' and " as \u00XX
	jsonASCII                // non-ASCII as \uXXXX
	jsonUpper                // upper-case hex in \u escapes
	jsonShortC               // controls as \u00XX even where \n, \t... exist
	jsonHexSlash             // "/" as \u002F (before jsonSlash)
	jsonAll      = 1<<iota - 1
)

func jsonForms(s string) []string {
	var forms []string
	if b, err := json.Marshal(s); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	for mode := 0; mode <= jsonAll; mode++ {
		forms = append(forms, jsonEscape(s, mode))
	}
	return forms
}

// jsonEscape is s as JSON string content, escaped as mode says. Invalid
// UTF-8 is kept byte for byte (the writers differ; the raw form covers it).
func jsonEscape(s string, mode int) string {
	var b strings.Builder
	hex := func(r rune) {
		f := "\\u%04x"
		if mode&jsonUpper != 0 {
			f = "\\u%04X"
		}
		fmt.Fprintf(&b, f, r)
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteByte(s[i])
			i++
			continue
		}
		i += size
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case (r == '"' || r == '\'') && mode&jsonQuote != 0:
			hex(r)
		case r == '"':
			b.WriteString(`\"`)
		case r == '/' && mode&jsonHexSlash != 0:
			hex(r)
		case r == '/' && mode&jsonSlash != 0:
			b.WriteString(`\/`)
		case (r == '<' || r == '>' || r == '&') && mode&jsonHTML != 0:
			hex(r)
		case r < 0x20:
			short := map[rune]string{'\n': `\n`, '\r': `\r`, '\t': `\t`, '\b': `\b`, '\f': `\f`}[r]
			if short != "" && mode&jsonShortC == 0 {
				b.WriteString(short)
			} else {
				hex(r)
			}
		case r >= utf8.RuneSelf && mode&jsonASCII != 0:
			if r > 0xFFFF {
				r1, r2 := utf16.EncodeRune(r)
				hex(r1)
				hex(r2)
			} else {
				hex(r)
			}
		case (r == '\u2028' || r == '\u2029') && mode&jsonHTML != 0:
			hex(r) // as encoding/json writes them
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func urlForms(s string) []string {
	q, p := url.QueryEscape(s), url.PathEscape(s)
	return []string{q, p, lowerPercent(q), lowerPercent(p)}
}

// lowerPercent is s with the hex digits of its %XX escapes in lower case.
func lowerPercent(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func lowerHex(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

func base64Forms(s string) []string {
	var forms []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(s)), enc.WithPadding(base64.NoPadding).EncodeToString([]byte(s)))
		// Inside a longer encoded text, s starts k bytes into a 3-byte
		// group: the characters that hold only bits of s are the same
		// whatever surrounds it.
		raw := enc.WithPadding(base64.NoPadding)
		for k := 0; k < 3; k++ {
			buf := make([]byte, k+len(s)+2)
			copy(buf[k:], s)
			e := raw.EncodeToString(buf)
			lo, hi := (8*k+5)/6, 8*(k+len(s))/6
			if lo < hi {
				forms = append(forms, e[lo:hi])
			}
		}
	}
	return forms
}

// htmlSpecial are the characters HTML encoders replace; some leave "/"
// alone.
const htmlSpecial = `&<>"'/`

func htmlForms(s string) []string {
	if !strings.ContainsAny(s, htmlSpecial) {
		return nil
	}
	named := html.EscapeString(s) // &amp; &lt; &gt; &#34; &#39;
	forms := []string{
		named,
		strings.NewReplacer("&#34;", "&quot;").Replace(named),
		strings.NewReplacer("&#34;", "&quot;", "&#39;", "&#x27;").Replace(named),
		strings.NewReplacer("&#34;", "&quot;", "&#39;", "&apos;").Replace(named),
		strings.NewReplacer("&#34;", "&quot;", "&#39;", "&#x27;", "/", "&#x2F;").Replace(named),
	}
	for _, special := range []string{htmlSpecial, htmlSpecial[:5]} {
		for _, f := range []string{"&#%d;", "&#x%x;", "&#x%X;", "&#X%x;", "&#X%X;"} {
			var b strings.Builder
			for _, r := range s {
				if strings.ContainsRune(special, r) {
					fmt.Fprintf(&b, f, r)
				} else {
					b.WriteRune(r)
				}
			}
			forms = append(forms, b.String())
		}
	}
	return forms
}
