package tools

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The evidence rules of the contract (docs/design §13): what a target must be
// given, and what its answers mean, before Latch may conclude from them that
// an execution did or did not happen.

// ExecutionIDVar is the reserved template variable that renders the
// execution ID in an HTTP tool's request (path, query, headers, body):
// "{{execution_id}}". It is not an argument: input_schema may not define a
// property of that name, and it never enters the fingerprint.
const ExecutionIDVar = "execution_id"

// DefaultSettle is how long after the last request could have reached it a
// target is given to make that request visible to its status endpoint, when
// the target sets no settle.
const DefaultSettle = 30 * time.Second

// Default status endpoint answers (see StatusQuery).
var (
	DefaultAbsent     = []int{404, 410}
	DefaultInProgress = []int{202, 409, 425}
)

// StatusAnswer is what a status endpoint's HTTP status means as evidence.
type StatusAnswer int

const (
	// StatusNoEvidence: the answer says nothing about the execution (a 5xx,
	// a 401, a redirect); ask again later.
	StatusNoEvidence StatusAnswer = iota
	// StatusCompleted: a 2xx not listed as in progress; the answer (status,
	// headers, body) is the execution's stored result.
	StatusCompleted
	// StatusInProgress: the target has the request and has not finished it.
	StatusInProgress
	// StatusAbsent: the target has no record of the execution ID. It proves
	// nothing happened only once no request carrying the ID can still be in
	// flight (see Target.Settle).
	StatusAbsent
)

// Classify says what HTTP status code means as an answer of this endpoint.
// Lists left nil (a StatusQuery not built by the loader) take the defaults.
func (s *StatusQuery) Classify(code int) StatusAnswer {
	absent, inProgress := s.Absent, s.InProgress
	if absent == nil {
		absent = DefaultAbsent
	}
	if inProgress == nil {
		inProgress = DefaultInProgress
	}
	switch {
	case slices.Contains(inProgress, code):
		return StatusInProgress
	case slices.Contains(absent, code):
		return StatusAbsent
	case code >= 200 && code < 300:
		return StatusCompleted
	default:
		return StatusNoEvidence
	}
}

// DispatchTimeout bounds one send of the tool's request or command: the
// tool's timeout, else the target's, else DefaultHTTPTimeout.
func (t *Tool) DispatchTimeout(tg *Target) time.Duration {
	switch {
	case t.Timeout > 0:
		return t.Timeout
	case tg != nil && tg.Timeout > 0:
		return tg.Timeout
	default:
		return DefaultHTTPTimeout
	}
}

// KeyCarrier is implemented by the kinds whose targets learn the execution
// ID (HTTPKind, SSHKind, LocalKind).
type KeyCarrier interface {
	// KeyCarriers lists where tool t hands the execution ID to tg.
	KeyCarriers(t *Tool, tg *Target) []string
}

// KeyCarriers lists where the tool's action hands the execution ID to its
// target, as its kind says (KeyCarrier); empty when the target never
// learns it.
func (t *Tool) KeyCarriers(tg *Target) []string {
	if tg == nil {
		return HTTPKind{}.KeyCarriers(t, nil)
	}
	if kc, ok := tg.Kind().(KeyCarrier); ok {
		return kc.KeyCarriers(t, tg)
	}
	return nil
}

// KeyCarriers lists where the tool's request hands the execution ID to its
// target ("idempotency_header Idempotency-Key", "request.path",
// "request.query.k", "request.headers.H", "request.body").
func (HTTPKind) KeyCarriers(t *Tool, tg *Target) []string {
	var out []string
	if tg != nil && tg.IdempotencyHeader != "" { // only http targets have one
		out = append(out, "idempotency_header "+tg.IdempotencyHeader)
	}
	r := t.Request
	if r == nil {
		return out
	}
	if usesExecutionID(r.Path) {
		out = append(out, "request.path")
	}
	for _, k := range slices.Sorted(maps.Keys(r.Query)) {
		if usesExecutionID(r.Query[k]) {
			out = append(out, "request.query."+k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		if usesExecutionID(r.Headers[k]) {
			out = append(out, "request.headers."+k)
		}
	}
	if bodyUsesExecutionID(r.Body, 0) {
		out = append(out, "request.body")
	}
	return out
}

func usesExecutionID(s string) bool {
	names, err := templateArgs(s)
	return err == nil && slices.Contains(names, ExecutionIDVar)
}

func bodyUsesExecutionID(v any, depth int) bool {
	if depth > maxBodyDepth {
		return false
	}
	switch tv := v.(type) {
	case string:
		return usesExecutionID(tv)
	case map[string]any:
		for _, e := range tv {
			if bodyUsesExecutionID(e, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range tv {
			if bodyUsesExecutionID(e, depth+1) {
				return true
			}
		}
	}
	return false
}

// RenderRequestAs is RenderRequest with {{execution_id}} rendering id. The
// channel uses it; args are not modified.
func (t *Tool) RenderRequestAs(id string, args map[string]any) (method, path string, query, headers map[string]string, body []byte, err error) {
	withID := make(map[string]any, len(args)+1)
	maps.Copy(withID, args)
	withID[ExecutionIDVar] = id
	return t.RenderRequest(withID)
}

// checkEvidence is the one rule for replay classes whose recovery relies on
// the target knowing the execution ID: idempotency_key (the re-send is
// recognised by the key) and status_query over HTTP (a status endpoint asked
// about a key it was never given answers "absent" whatever happened).
func (p *parser) checkEvidence(f map[string]kv, t *Tool, tg *Target, what string) {
	if tg == nil || t.Request == nil { // only http tools have a request
		return
	}
	at := f["replay"].keyNode
	fix := fmt.Sprintf("set idempotency_header on target %s, or put {{%s}} in the request's path, query, a header or the body", tg.Name, ExecutionIDVar)
	switch t.Replay {
	case ReplayIdempotencyKey:
		if len(t.KeyCarriers(tg)) == 0 {
			p.addf(at, "%s: replay idempotency_key needs the target to receive the execution ID as its idempotency key, and this request never sends it: %s", what, fix)
		}
	case ReplayStatusQuery:
		if tg.Status == nil {
			p.addf(at, "%s: replay status_query needs status on target %s (the endpoint that answers for an execution ID)", what, tg.Name)
		}
		if len(t.KeyCarriers(tg)) == 0 {
			p.addf(at, "%s: replay status_query needs the target to receive the execution ID, and this request never sends it, so a status query could only ever answer \"absent\": %s", what, fix)
		}
	}
}

// requestInfo is info with the reserved {{execution_id}} added as a
// required property, for checking request templates.
func requestInfo(info *schemaInfo) *schemaInfo {
	if info == nil {
		return nil
	}
	out := *info
	out.props = maps.Clone(info.props)
	out.required = maps.Clone(info.required)
	if out.props == nil {
		out.props = map[string]bool{}
	}
	if out.required == nil {
		out.required = map[string]bool{}
	}
	out.props[ExecutionIDVar] = true
	out.required[ExecutionIDVar] = true
	return &out
}

// settle parses a target's settle: a duration that may be 0.
func (p *parser) settle(e kv, what string) (time.Duration, bool) {
	n := deref(e.val)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.addf(e.keyNode, "%s: settle must be a duration like 30s, or 0 when the target commits before answering", what)
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil || d < 0 {
		p.addf(e.keyNode, "%s: settle %q must be a duration like 30s, or 0 when the target commits before answering", what, n.Value)
		return 0, false
	}
	return d, true
}

// statusCodes parses a status endpoint's absent or in_progress list.
func (p *parser) statusCodes(e kv, what string) ([]int, bool) {
	n := deref(e.val)
	if n == nil || n.Kind != yaml.SequenceNode {
		p.addf(e.keyNode, "%s: must be a list of HTTP status codes like [404, 410]", what)
		return nil, false
	}
	out := []int{}
	ok := true
	for i, c := range n.Content {
		c = deref(c)
		var code int
		at := e.keyNode
		if c != nil {
			at = c
		}
		if c == nil || c.Kind != yaml.ScalarNode || c.ShortTag() != "!!int" || c.Decode(&code) != nil || code < 100 || code > 599 {
			p.addf(at, "%s[%d]: must be an HTTP status code from 100 to 599", what, i)
			ok = false
			continue
		}
		if slices.Contains(out, code) {
			p.addf(at, "%s: lists %d twice", what, code)
			ok = false
			continue
		}
		out = append(out, code)
	}
	return out, ok
}

// statusAnswers parses and checks status.absent and status.in_progress.
func (p *parser) statusAnswers(sf map[string]kv, sq *StatusQuery, what string) bool {
	ok := true
	sq.Absent, sq.InProgress = slices.Clone(DefaultAbsent), slices.Clone(DefaultInProgress)
	if e, has := sf["absent"]; has {
		codes, cok := p.statusCodes(e, what+": status.absent")
		for _, c := range codes {
			if c >= 200 && c < 300 {
				p.addf(e.keyNode, "%s: status.absent lists %d: a 2xx answer is the stored result, never absence", what, c)
				cok = false
			}
		}
		sq.Absent, ok = codes, ok && cok
	}
	if e, has := sf["in_progress"]; has {
		codes, cok := p.statusCodes(e, what+": status.in_progress")
		sq.InProgress, ok = codes, ok && cok
	}
	var both []string
	for _, c := range sq.Absent {
		if slices.Contains(sq.InProgress, c) {
			both = append(both, fmt.Sprint(c))
		}
	}
	if len(both) > 0 {
		at := sf["absent"].keyNode
		if at == nil {
			at = sf["in_progress"].keyNode
		}
		p.addf(at, "%s: status code(s) %s are both absent and in_progress; an answer means one thing", what, strings.Join(both, ", "))
		ok = false
	}
	return ok
}
