package engine

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Redaction of secret arguments.
//
// A tool's secret arguments (fingerprint.secret) are held in memory only
// (Engine.secrets) until the execution is settled. A target may echo them:
// an HTTP answer that repeats the request body or a header, a command that
// prints its environment, a script marker's failure reason. redactAttempt
// replaces every occurrence with "[REDACTED]" before an Attempt's result and
// reason are stored, so nothing a later Get, Watch or attach returns, and
// nothing in the data dir, carries the value. It works like the HTTP
// dispatcher's credential redaction (httpdispatch), with these choices:
//
//   - every string leaf of a secret value is a needle (an object-valued
//     secret is redacted field by field), and so are numbers; booleans and
//     null carry nothing secret;
//   - each needle is also looked for in the forms a target is likely to echo
//     it in: JSON-escaped (with and without HTML escaping), URL query- and
//     path-escaped;
//   - needles shorter than minSecretRedact bytes are left alone: they would
//     match ordinary text, and a value that short is guessable anyway;
//   - when a body was cut at the output cap, a tail that is the start of a
//     needle is cut too, so a truncated body never ends in half a secret.

// minSecretRedact is the shortest secret value that is redacted.
const minSecretRedact = 4

// redactedMark replaces a secret value.
const redactedMark = "[REDACTED]"

// redactAttempt returns a with every secret argument value of execution x
// replaced in its result (body, header names and values, summary, signal)
// and its reason. a.Result is copied, never modified in place. Without
// secrets in memory for x it returns a unchanged.
func (e *Engine) redactAttempt(x *recordv1.Execution, a Attempt) Attempt {
	tool, ok := e.Catalog().Tools[x.GetTool()]
	if !ok || len(tool.Fingerprint.Secret) == 0 {
		return a
	}
	e.secretsMu.Lock()
	args := e.secrets[x.GetId()]
	e.secretsMu.Unlock()
	var needles [][]byte
	for _, name := range tool.Fingerprint.Secret {
		if v, ok := args[name]; ok {
			needles = appendNeedles(needles, v)
		}
	}
	// A needle inside the mark itself would make redaction grow the text
	// each time it is applied; such a value is not worth hiding.
	needles = slices.DeleteFunc(needles, func(n []byte) bool { return bytes.Contains([]byte(redactedMark), n) })
	if len(needles) == 0 {
		return a
	}
	// Longest first, so a needle inside a longer one does not break it up.
	slices.SortFunc(needles, func(p, q []byte) int { return cmp.Compare(len(q), len(p)) })
	needles = slices.CompactFunc(needles, bytes.Equal)
	scrub := func(b []byte, cut bool) []byte {
		for _, n := range needles {
			if bytes.Contains(b, n) {
				b = bytes.ReplaceAll(b, n, []byte(redactedMark))
			}
		}
		if cut {
			for _, n := range needles {
				for k := len(n) - 1; k >= 1; k-- {
					if bytes.HasSuffix(b, n[:k]) {
						b = b[:len(b)-k]
						break
					}
				}
			}
		}
		return b
	}
	str := func(s string) string { return string(scrub([]byte(s), false)) }
	a.Reason = str(a.Reason)
	if a.Result != nil {
		r := proto.Clone(a.Result).(*recordv1.Result)
		r.Body = scrub(r.GetBody(), r.GetBodyTruncated())
		r.Summary = str(r.GetSummary())
		r.Signal = str(r.GetSignal())
		if len(r.GetHeaders()) > 0 {
			h := make(map[string]string, len(r.GetHeaders()))
			for k, v := range r.GetHeaders() {
				h[str(k)] = str(v)
			}
			r.Headers = h
		}
		a.Result = r
	}
	return a
}

// appendNeedles adds the byte strings that stand for secret value v.
func appendNeedles(out [][]byte, v any) [][]byte {
	switch tv := v.(type) {
	case string:
		if len(tv) < minSecretRedact {
			return out
		}
		forms := []string{tv, url.QueryEscape(tv), url.PathEscape(tv)}
		if b, err := json.Marshal(tv); err == nil {
			forms = append(forms, string(b[1:len(b)-1]))
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(tv) == nil {
			b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			forms = append(forms, string(b[1:len(b)-1]))
		}
		for _, f := range forms {
			if len(f) >= minSecretRedact {
				out = append(out, []byte(f))
			}
		}
	case float64:
		if s := strconv.FormatFloat(tv, 'f', -1, 64); len(s) >= minSecretRedact {
			out = append(out, []byte(s))
		}
		if b, err := json.Marshal(tv); err == nil && len(b) >= minSecretRedact {
			out = append(out, b)
		}
	case map[string]any:
		for _, e := range tv {
			out = appendNeedles(out, e)
		}
	case []any:
		for _, e := range tv {
			out = appendNeedles(out, e)
		}
	}
	return out
}
