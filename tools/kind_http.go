package tools

import (
	"net/url"
	"strings"
)

// ChannelHTTP is the channel of HTTP targets.
const ChannelHTTP Channel = "http"

// HTTPKind is the catalog half of the http channel: a target is a base URL
// (credential, idempotency_header, status query, allow_private), a tool's
// action its request: template.
type HTTPKind struct{}

var _ Kind = HTTPKind{}

func (HTTPKind) Channel() Channel { return ChannelHTTP }

// HTTPTarget is the settings of an http target, embedded in Target.
type HTTPTarget struct {
	BaseURL           string
	IdempotencyHeader string
	Status            *StatusQuery
	// AllowPrivate permits private (RFC 1918, ULA) and loopback addresses.
	// An mcp target copies its upstream's allow_private here.
	AllowPrivate bool
}

// HTTPAction is the action of an HTTP tool, embedded in Tool.
type HTTPAction struct {
	Request *Request
}

// StatusQuery is how to ask an HTTP target what became of an execution.
// "{execution_id}" in Path is replaced by the execution ID. Its answers mean
// (see Classify): a status in InProgress, the request is still being
// processed (no evidence, ask again); in Absent, the target has no record of
// the ID (evidence only after the settle point); any other 2xx, completed,
// the answer being the stored result; anything else, no evidence.
type StatusQuery struct {
	Method string
	Path   string
	// Absent lists the "no record of this ID" statuses (default 404, 410).
	Absent []int
	// InProgress lists the "still in progress" statuses (default 202, 409, 425).
	InProgress []int
}

// Request is an HTTP tool's request template. Strings may contain {{arg}}.
type Request struct {
	Method  string
	Path    string
	Query   map[string]string
	Headers map[string]string
	// Body is a JSON-shaped template tree (map[string]any, []any, string,
	// int64 or float64 as written, bool, nil). A string that is exactly
	// "{{arg}}" becomes the argument's JSON value (left out when absent);
	// other strings get plain substitution.
	Body any
}

func (HTTPKind) TargetKeys() []string {
	return []string{"channel", "base_url", "credential", "idempotency_header", "status", "allow_private", "timeout", "settle"}
}

func (HTTPKind) ToolKeys() []string { return []string{"request"} }

func (HTTPKind) ParseTarget(s *TargetSpec) {
	s.p.httpTarget(s.entry, s.f, s.Target, s.what)
}

// ParseTool parses request: and checks that the replay class has the
// evidence an HTTP target can give (checkEvidence).
func (HTTPKind) ParseTool(s *ToolSpec) {
	p, f, t, tg, what := s.p, s.f, s.Tool, s.Target, s.what
	for _, k := range s.foreign {
		p.addf(f[k].keyNode, "%s: %s does not apply to HTTP tools (target %s is http); use request:", what, k, tg.Name)
	}
	if re, has := f["request"]; !has {
		p.addf(s.at, "%s: request is required: target %s is http", what, tg.Name)
	} else {
		t.Request = p.request(re, tg, s.info, what)
	}
	if s.ReplayOK {
		p.checkEvidence(f, t, tg, what)
	}
}

func (p *parser) httpTarget(te kv, f map[string]kv, t *Target, what string) {
	if t.Timeout == 0 {
		t.Timeout = DefaultHTTPTimeout
	}
	if e, ok := f["base_url"]; !ok {
		p.addf(te.keyNode, "%s: base_url is required for http targets", what)
	} else if s, ok := p.str(e, what+": base_url"); ok {
		u, err := url.Parse(s)
		switch {
		case strings.ContainsAny(s, "{}"):
			p.addf(e.keyNode, "%s: base_url cannot be templated: arguments never choose the host", what)
		case err != nil:
			p.addf(e.keyNode, "%s: base_url: %v", what, err)
		case u.Scheme != "http" && u.Scheme != "https":
			p.addf(e.keyNode, "%s: base_url must be an http:// or https:// URL", what)
		case u.Host == "" || u.Hostname() == "":
			p.addf(e.keyNode, "%s: base_url has no host", what)
		case u.User != nil:
			p.addf(e.keyNode, "%s: base_url must not carry credentials; use credential:", what)
		case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			p.addf(e.keyNode, "%s: base_url must not have a query or fragment", what)
		default:
			t.BaseURL = s
		}
	}
	if e, ok := f["allow_private"]; ok {
		t.AllowPrivate, _ = p.boolean(e, what+": allow_private")
	}
	if t.BaseURL != "" {
		p.checkHost(f["base_url"], t, what)
	}
	if e, ok := f["idempotency_header"]; ok {
		if s, ok := p.str(e, what+": idempotency_header"); ok {
			switch {
			case !headerNameRE.MatchString(s):
				p.addf(e.keyNode, "%s: idempotency_header %q is not a valid header name", what, s)
			case ReservedHeader(s):
				p.addf(e.keyNode, "%s: idempotency_header %s is a reserved header (the HTTP transport sets it); name another header", what, s)
			default:
				t.IdempotencyHeader = s
			}
		}
	}
	if e, ok := f["status"]; ok {
		sf := p.fields(e.val, what+": status", statusKeys)
		if sf == nil {
			return
		}
		sq := &StatusQuery{Method: "GET"}
		ok := true
		if me, has := sf["method"]; has {
			m, mok := p.str(me, what+": status.method")
			if mok && m != "GET" && m != "POST" {
				p.addf(me.keyNode, "%s: status.method must be GET or POST", what)
				mok = false
			}
			sq.Method, ok = m, ok && mok
		}
		pe, has := sf["path"]
		if !has {
			p.addf(e.keyNode, "%s: status.path is required", what)
			return
		}
		path, pok := p.str(pe, what+": status.path")
		if pok {
			switch {
			case !strings.HasPrefix(path, "/"):
				p.addf(pe.keyNode, "%s: status.path must start with /", what)
				pok = false
			case !strings.Contains(path, "{execution_id}"):
				p.addf(pe.keyNode, "%s: status.path must contain {execution_id}", what)
				pok = false
			case strings.Contains(path, "{{") || strings.ContainsAny(path, "?#"):
				p.addf(pe.keyNode, "%s: status.path may use only {execution_id}, with no query or fragment", what)
				pok = false
			}
		}
		sq.Path = path
		if !p.statusAnswers(sf, sq, what) {
			ok = false
		}
		if ok && pok {
			t.Status = sq
		}
	}
}

// checkHost refuses base_urls whose host is an address literal the HTTP
// dispatcher would refuse anyway (checkHostAddr). Host names are checked by
// the dispatcher when it resolves them.
func (p *parser) checkHost(e kv, t *Target, what string) {
	u, err := url.Parse(t.BaseURL)
	if err != nil {
		return
	}
	p.checkHostAddr(e, "base_url", u.Hostname(), t.AllowPrivate, what, "sends")
}
