package redact

import (
	"bytes"
	"encoding/json"
)

// JSON is String for a JSON document that should still parse once
// redacted (a script's result). When s parses as one JSON value, its
// strings and object keys are redacted as decoded (so an escape such as
// \u0033 hides nothing) and a number that holds a needle becomes the string
// Mark (`{"pin":12345678}` gives `{"pin":"[REDACTED]"}`, not
// `{"pin":[REDACTED]}`); if anything changed, the document is re-encoded
// compactly with keys sorted, else s is kept as it is. Text that does not
// parse and keys that would collide once redacted fall back to String; the
// result passes String once more, so a needle across tokens is replaced too.
func (r *Redactor) JSON(s string) string {
	if r.Empty() {
		return s
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return r.String(s)
	}
	changed := false
	v, ok := r.jsonValue(v, &changed)
	if !ok {
		return r.String(s)
	}
	if !changed {
		return r.String(s)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return r.String(s)
	}
	return r.String(string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))))
}

// jsonValue redacts a decoded JSON value and sets *changed when it
// replaced anything; ok is false when two keys of an object would become
// one.
func (r *Redactor) jsonValue(v any, changed *bool) (any, bool) {
	str := func(s string) string {
		out := r.String(s)
		if out != s {
			*changed = true
		}
		return out
	}
	switch tv := v.(type) {
	case string:
		return str(tv), true
	case json.Number:
		if str(tv.String()) != tv.String() {
			return Mark, true
		}
		return tv, true
	case []any:
		for i, e := range tv {
			var ok bool
			if tv[i], ok = r.jsonValue(e, changed); !ok {
				return nil, false
			}
		}
		return tv, true
	case map[string]any:
		out := make(map[string]any, len(tv))
		for k, e := range tv {
			re, ok := r.jsonValue(e, changed)
			if !ok {
				return nil, false
			}
			rk := str(k)
			if _, dup := out[rk]; dup {
				return nil, false
			}
			out[rk] = re
		}
		return out, true
	}
	return v, true // bool, nil
}
