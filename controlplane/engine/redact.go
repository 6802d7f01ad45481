package engine

import (
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/internal/redact"
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
// dispatcher's credential redaction (httpdispatch); the rules (which forms
// of a value are looked for, the shortest value redacted, a truncated body
// never ending in half a secret) are package internal/redact's, which the
// host agent's shim shares for the output copy it keeps on the target.

// redactedMark replaces a secret value.
const redactedMark = redact.Mark

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
			needles = redact.Needles(needles, v)
		}
	}
	red := redact.New(needles)
	if red.Empty() {
		return a
	}
	scrub := red.Bytes
	str := red.String
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
