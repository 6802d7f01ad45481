package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// JSON is String for a JSON document that should still parse once
// redacted (a script's result). When s is one JSON value, it is walked
// token by token (every key and string as decoded, duplicates included, so
// an escape such as \u0053 hides nothing): needles are replaced inside
// strings and keys, and a number that holds one, in any of its forms
// (12345678, 1.2345678e7), becomes the string Mark (`{"pin":12345678}` gives
// `{"pin":"[REDACTED]"}`, not `{"pin":[REDACTED]}`). If anything changed,
// the document is re-encoded compactly in its own order, else s is kept as
// it is. Text that is not one JSON value, or not valid UTF-8, is redacted
// as text; the result passes String once more, so a needle across tokens is
// replaced too.
func (r *Redactor) JSON(s string) string {
	if r.Empty() {
		return s
	}
	if !utf8.ValidString(s) {
		return r.String(s)
	}
	out, changed, err := r.walkJSON(s)
	if err != nil {
		return r.String(s)
	}
	if !changed {
		return r.String(s)
	}
	return r.String(out)
}

// walkJSON re-encodes the one JSON value s holds with its strings, keys and
// numbers redacted, and says whether it replaced anything.
func (r *Redactor) walkJSON(s string) (string, bool, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var out bytes.Buffer
	changed := false
	// Each open container: its kind and whether the next token is its
	// first member; objects also track key/value turns.
	type level struct {
		object, first, value bool
	}
	var stack []level
	sep := func() {
		if len(stack) == 0 {
			return
		}
		top := &stack[len(stack)-1]
		switch {
		case top.object && top.value:
			out.WriteByte(':')
		case !top.first:
			out.WriteByte(',')
		}
		top.first = false
	}
	// after moves an object from its key to its value and back.
	after := func() {
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].value = !stack[len(stack)-1].value
		}
	}
	str := func(v string) {
		red := r.String(v)
		changed = changed || red != v
		b, _ := marshalString(red)
		out.Write(b)
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", false, err
		}
		switch tv := tok.(type) {
		case json.Delim:
			switch tv {
			case '{', '[':
				sep()
				out.WriteByte(byte(tv))
				stack = append(stack, level{object: tv == '{', first: true})
				continue
			default:
				out.WriteByte(byte(tv))
				stack = stack[:len(stack)-1]
			}
		case string:
			sep()
			str(tv)
		case json.Number:
			sep()
			if r.holdsNumber(tv) {
				changed = true
				b, _ := marshalString(Mark)
				out.Write(b)
			} else {
				out.WriteString(tv.String())
			}
		case bool:
			sep()
			out.WriteString(strconv.FormatBool(tv))
		case nil:
			sep()
			out.WriteString("null")
		}
		after()
		if len(stack) == 0 {
			break // the one value is complete
		}
	}
	if len(stack) != 0 {
		return "", false, errors.New("redact: unterminated JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", false, errors.New("redact: more than one JSON value")
	}
	return out.String(), changed, nil
}

// holdsNumber reports whether a JSON number holds a needle as written or in
// its decimal or JSON form (1.2345678e7 is 12345678).
func (r *Redactor) holdsNumber(n json.Number) bool {
	forms := []string{n.String()}
	if f, err := strconv.ParseFloat(n.String(), 64); err == nil {
		forms = append(forms, strconv.FormatFloat(f, 'f', -1, 64))
		if b, err := json.Marshal(f); err == nil {
			forms = append(forms, string(b))
		}
	}
	for _, f := range forms {
		if r.String(f) != f {
			return true
		}
	}
	return false
}

// marshalString is a JSON string without HTML escaping.
func marshalString(s string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
