package tools

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

// Upstream MCP servers (catalog section upstreams:).
//
// An upstream is an MCP server whose tools Latch exposes to agents. Its
// tools are never imported wholesale: each one the agents may call is a
// tool entry named "<upstream>.<tool>" with a contract (upstream, tool,
// replay, attach_window, approval, fingerprint, and optionally
// idempotency_argument). Its input schema is the upstream's own: Parse
// leaves InputSchema nil, and the control plane binds it (BindUpstreamSchema)
// when it has listed the upstream's tools.
//
// Each upstream is also a target of channel mcp under the same name, so the
// engine finds its channel the way it does for every other tool.

// Upstream transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Upstream is one upstream MCP server.
type Upstream struct {
	Name      string
	Transport string
	// Mode is the mode of the upstream's tools that set none ("": enforce).
	Mode Mode

	// stdio: the process the control plane starts and supervises.
	Command []string
	Env     map[string]string
	Cwd     string
	// CredentialEnv names the environment variable that receives the
	// credential's secret (a bearer token or a header credential's value).
	CredentialEnv string

	// http: the Streamable HTTP endpoint.
	URL          string
	AllowPrivate bool

	// Credential is the credential_ref held by the vault ("" for none). For
	// http it is presented on every request the way its kind says (bearer,
	// basic, header, sigv4, oauth2); for stdio it goes in CredentialEnv.
	Credential string
	// Timeout bounds one call (default DefaultHTTPTimeout).
	Timeout time.Duration
}

var (
	upstreamKeys      = []string{"transport", "command", "env", "cwd", "credential", "credential_env", "url", "allow_private", "timeout", "mode"}
	upstreamTransport = map[string][]string{
		TransportStdio: {"transport", "command", "env", "cwd", "credential", "credential_env", "timeout", "mode"},
		TransportHTTP:  {"transport", "url", "credential", "allow_private", "timeout", "mode"},
	}
	// upstreamToolKeys are the keys of an upstream tool's contract.
	upstreamToolKeys = []string{"description", "upstream", "tool", "idempotency_argument", "timeout", "mode", "replay", "attach_window", "approval", "fingerprint"}
	// notForUpstreamTools are the keys every other tool takes for its
	// target and arguments that an upstream tool cannot have (the upstream
	// defines them); the action keys of every kind are refused beside them
	// (parser.upstreamTool asks the registry).
	notForUpstreamTools = []string{"target", "input_schema", "defaults"}
	// mcpToolNameRE is the MCP tool name rule (2025-11-25: 1 to 128 of
	// A-Z a-z 0-9 _ - .).
	mcpToolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// IsUpstreamToolName reports whether name has the form of an upstream tool
// ("<upstream>.<tool>").
func IsUpstreamToolName(name string) bool {
	up, tool, ok := strings.Cut(name, ".")
	return ok && nameRE.MatchString(up) && mcpToolNameRE.MatchString(tool)
}

// UpstreamOf returns the upstream tool t is called on (nil for other tools).
func (c *Catalog) UpstreamOf(t *Tool) *Upstream {
	if t == nil || t.Upstream == "" {
		return nil
	}
	return c.Upstreams[t.Upstream]
}

// upstreams parses the upstreams: section; each upstream is also a target.
func (p *parser) upstreams(e kv, cat *Catalog) {
	cat.Upstreams = map[string]*Upstream{}
	for _, ue := range p.pairs(e.val, "upstreams") {
		if !p.checkName(ue, "upstream") {
			continue
		}
		if _, dup := cat.Targets[ue.key]; dup {
			p.addf(ue.keyNode, "upstream %s: a target has the same name; upstreams and targets share one namespace", ue.key)
			continue
		}
		if u := p.upstream(ue); u != nil {
			cat.Upstreams[u.Name] = u
			cat.Targets[u.Name] = &Target{Name: u.Name, Channel: ChannelMCP, Credential: u.Credential, Timeout: u.Timeout, Mode: u.Mode, Settle: DefaultSettle, HTTPTarget: HTTPTarget{AllowPrivate: u.AllowPrivate}}
		}
	}
}

func (p *parser) upstream(e kv) *Upstream {
	what := "upstream " + e.key
	f := p.fields(e.val, what, upstreamKeys)
	if f == nil {
		return nil
	}
	u := &Upstream{Name: e.key, Timeout: DefaultHTTPTimeout}
	te, ok := f["transport"]
	if !ok {
		p.addf(e.keyNode, "%s: transport is required (stdio or http)", what)
		return nil
	}
	tr, ok := p.str(te, what+": transport")
	if !ok {
		return nil
	}
	allowed, known := upstreamTransport[tr]
	if !known {
		p.addf(te.keyNode, "%s: unknown transport %q (want stdio or http)", what, tr)
		return nil
	}
	u.Transport = tr
	bad := false
	for _, k := range sortedKeys(f) {
		if !slices.Contains(allowed, k) {
			p.addf(f[k].keyNode, "%s: %s does not apply to %s upstreams", what, k, tr)
			bad = true
		}
	}
	if ce, ok := f["credential"]; ok {
		u.Credential, _ = p.str(ce, what+": credential")
	}
	if d, ok := f["timeout"]; ok {
		u.Timeout, _ = p.duration(d, what+": timeout")
	}
	u.Mode = p.mode(f, what, "")
	switch tr {
	case TransportStdio:
		ce, ok := f["command"]
		if !ok {
			p.addf(e.keyNode, "%s: command (argv) is required for stdio upstreams", what)
			return nil
		}
		u.Command = p.upstreamCommand(ce, what)
		if ee, ok := f["env"]; ok && !isNull(ee.val) && p.isMapping(ee.val, what+": env") {
			u.Env = map[string]string{}
			for _, kv := range p.pairs(ee.val, what+": env") {
				n := deref(kv.val)
				switch {
				case !envNameRE.MatchString(kv.key):
					p.addf(kv.keyNode, "%s: env: %q is not a valid variable name", what, kv.key)
				case n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null":
					p.addf(kv.keyNode, "%s: env.%s: must be a string", what, kv.key)
				default:
					u.Env[kv.key] = n.Value
				}
			}
		}
		if cwd, ok := f["cwd"]; ok {
			if s, ok := p.str(cwd, what+": cwd"); ok {
				if !strings.HasPrefix(s, "/") {
					p.addf(cwd.keyNode, "%s: cwd must be an absolute path", what)
				}
				u.Cwd = s
			}
		}
		if ce, ok := f["credential_env"]; ok {
			if s, ok := p.str(ce, what+": credential_env"); ok {
				if !envNameRE.MatchString(s) {
					p.addf(ce.keyNode, "%s: credential_env %q is not a valid variable name", what, s)
				}
				if _, clash := u.Env[s]; clash {
					p.addf(ce.keyNode, "%s: credential_env %s is also set in env; the credential would be overwritten", what, s)
				}
				u.CredentialEnv = s
			}
		}
		if (u.Credential == "") != (u.CredentialEnv == "") {
			p.addf(e.keyNode, "%s: a stdio upstream's credential goes in an environment variable: set both credential and credential_env, or neither", what)
		}
	case TransportHTTP:
		if ae, ok := f["allow_private"]; ok {
			u.AllowPrivate, _ = p.boolean(ae, what+": allow_private")
		}
		ue, ok := f["url"]
		if !ok {
			p.addf(e.keyNode, "%s: url (the Streamable HTTP endpoint) is required for http upstreams", what)
			return nil
		}
		if s, ok := p.str(ue, what+": url"); ok {
			uu, err := url.Parse(s)
			switch {
			case err != nil:
				p.addf(ue.keyNode, "%s: url: %v", what, err)
			case uu.Scheme != "http" && uu.Scheme != "https":
				p.addf(ue.keyNode, "%s: url must be an http:// or https:// URL", what)
			case uu.Hostname() == "":
				p.addf(ue.keyNode, "%s: url has no host", what)
			case uu.User != nil:
				p.addf(ue.keyNode, "%s: url must not carry credentials; use credential:", what)
			case uu.Fragment != "":
				p.addf(ue.keyNode, "%s: url must not have a fragment", what)
			default:
				u.URL = s
				p.checkHostAddr(ue, "url", uu.Hostname(), u.AllowPrivate, what, "connects")
			}
		}
	}
	if bad {
		return nil
	}
	return u
}

func (p *parser) upstreamCommand(e kv, what string) []string {
	n := deref(e.val)
	if n == nil || n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.addf(e.keyNode, "%s: command must be a non-empty list (argv), never a shell string", what)
		return nil
	}
	var argv []string
	for i, c := range n.Content {
		c = deref(c)
		if c == nil || c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null" {
			p.addf(c, "%s: command[%d] must be a string", what, i)
			return nil
		}
		if i == 0 && !strings.HasPrefix(c.Value, "/") {
			p.addf(c, "%s: command[0] must be an absolute path, got %q", what, c.Value)
			return nil
		}
		argv = append(argv, c.Value)
	}
	return argv
}

// isUpstreamTool reports whether a tools: entry is an upstream tool's
// contract (it names an upstream, or its name has the upstream form).
func isUpstreamTool(e kv) bool {
	if strings.Contains(e.key, ".") {
		return true
	}
	n := deref(e.val)
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := deref(n.Content[i]); k != nil && k.Value == "upstream" {
			return true
		}
	}
	return false
}

// upstreamTool parses the contract of one upstream tool.
func (p *parser) upstreamTool(e kv, cat *Catalog) *Tool {
	what := "tool " + e.key
	refused := slices.Concat(notForUpstreamTools, p.kinds.actionKeys())
	f := p.fields(e.val, what, slices.Concat(upstreamToolKeys, refused))
	if f == nil {
		return nil
	}
	for _, k := range refused {
		if ke, ok := f[k]; ok {
			p.addf(ke.keyNode, "%s: %s does not apply to upstream tools: the upstream defines the tool and its input schema (latch catalog upstream-tools shows them)", what, k)
		}
	}
	t := &Tool{Name: e.key, Approval: ApprovalNone}
	upName, toolName, _ := strings.Cut(e.key, ".")
	if ue, ok := f["upstream"]; !ok {
		p.addf(e.keyNode, "%s: upstream is required (the name of an entry under upstreams:)", what)
	} else if s, ok := p.str(ue, what+": upstream"); ok {
		t.Upstream, t.Target = s, s
		if cat.Upstreams[s] == nil {
			p.addf(ue.keyNode, "%s: unknown upstream %q", what, s)
		}
	}
	if te, ok := f["tool"]; !ok {
		p.addf(e.keyNode, "%s: tool is required (the upstream's name for it; latch catalog upstream-tools lists them)", what)
	} else if s, ok := p.str(te, what+": tool"); ok {
		if !mcpToolNameRE.MatchString(s) {
			p.addf(te.keyNode, "%s: tool %q is not an MCP tool name (1 to 128 of A-Z a-z 0-9 _ - .)", what, s)
		}
		t.UpstreamTool = s
	}
	if t.Upstream != "" && t.UpstreamTool != "" && (upName != t.Upstream || toolName != t.UpstreamTool) {
		p.addf(e.keyNode, "%s: an upstream tool is named <upstream>.<tool>: rename it %s.%s", what, t.Upstream, t.UpstreamTool)
	}
	if d, ok := f["description"]; ok {
		t.Description, _ = p.str(d, what+": description")
	}
	if d, ok := f["timeout"]; ok {
		t.Timeout, _ = p.duration(d, what+": timeout")
	}
	if ie, ok := f["idempotency_argument"]; ok {
		if s, ok := p.str(ie, what+": idempotency_argument"); ok {
			t.IdempotencyArgument = s
		}
	}
	t.Mode = p.toolMode(f, what, cat.Targets[t.Target])
	replayOK := false
	if re, ok := f["replay"]; !ok {
		if !t.Observed() {
			p.addf(e.keyNode, "%s: replay is required (%s)%s", what, strings.Join(replays, ", "), observeHint)
		}
	} else if s, ok := p.str(re, what+": replay"); ok {
		switch Replay(s) {
		case ReplayReadOnly, ReplayReview, ReplayStatusQuery:
			// status_query needs an upstream that runs the call as a task
			// (tasks/get): checked when the upstream is reached, which
			// holds the tool otherwise (controlplane/mcpchannel).
			t.Replay, replayOK = Replay(s), true
		case ReplayIdempotencyKey:
			if t.IdempotencyArgument == "" {
				p.addf(re.keyNode, "%s: replay idempotency_key needs idempotency_argument: the argument the upstream treats as an idempotency key (Latch sets it to the execution ID); without one use review", what)
			} else {
				t.Replay, replayOK = Replay(s), true
			}
		default:
			p.addf(re.keyNode, "%s: unknown replay class %q (want %s)", what, s, strings.Join(replays, ", "))
		}
	}
	p.approvalAndWindow(t, f, what, replayOK)
	// The schema is the upstream's: fingerprint names are checked when it
	// is bound (BindUpstreamSchema).
	p.fingerprint(f, t, nil, what)
	if t.IdempotencyArgument != "" && slices.Contains(append(slices.Clone(t.Fingerprint.Ignore), t.Fingerprint.Secret...), t.IdempotencyArgument) {
		p.addf(f["idempotency_argument"].keyNode, "%s: idempotency_argument %s is set by Latch, not by the agent: do not list it under fingerprint", what, t.IdempotencyArgument)
	}
	return t
}

// BindUpstreamSchema returns a copy of upstream tool t with the upstream's
// input schema bound: the schema is checked as a catalog's would be, the
// fingerprint names and the idempotency argument must be its properties, the
// idempotency argument is taken out of the schema agents see (Latch sets it),
// and the schema's "default" keywords become the contract's defaults. The
// error says what about the schema keeps the tool from being exposed.
func (t *Tool) BindUpstreamSchema(schema json.RawMessage) (*Tool, error) {
	if t.Upstream == "" {
		return nil, fmt.Errorf("tools: %s is not an upstream tool", t.Name)
	}
	if len(schema) == 0 {
		schema = json.RawMessage(defaultInputSchema)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("the upstream's input schema is not a JSON Schema: %v", err)
	}
	var issues []string
	issues = append(issues, schemaIssues(&s)...)
	if s.Type != "object" {
		issues = append(issues, "the root must have type: object")
	}
	if _, ok := s.Properties[RepeatOfArgument]; ok {
		issues = append(issues, fmt.Sprintf("property %q is reserved: Latch adds it to side-effecting tools", RepeatOfArgument))
	}
	for _, name := range append(slices.Clone(t.Fingerprint.Ignore), t.Fingerprint.Secret...) {
		if _, ok := s.Properties[name]; !ok {
			issues = append(issues, fmt.Sprintf("fingerprint names %q, which is not a property of the upstream's schema", name))
		}
	}
	if a := t.IdempotencyArgument; a != "" {
		ps, ok := s.Properties[a]
		switch {
		case !ok:
			issues = append(issues, fmt.Sprintf("idempotency_argument %q is not a property of the upstream's schema", a))
		case ps != nil && ps.Type != "" && ps.Type != "string":
			issues = append(issues, fmt.Sprintf("idempotency_argument %q has type %s; Latch sends the execution ID, a string", a, ps.Type))
		default:
			props := maps.Clone(s.Properties)
			delete(props, a)
			s.Properties = props
			s.Required = slices.DeleteFunc(slices.Clone(s.Required), func(r string) bool { return r == a })
		}
	}
	if len(issues) > 0 {
		slices.Sort(issues)
		return nil, fmt.Errorf("the upstream's input schema cannot be used: %s", strings.Join(slices.Compact(issues), "; "))
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, fmt.Errorf("the upstream's input schema does not resolve: %s", cleanValidation(err))
	}
	raw, err := json.Marshal(&s)
	if err != nil {
		return nil, fmt.Errorf("the upstream's input schema does not encode: %v", err)
	}
	out := *t
	out.InputSchema = raw
	out.Defaults = nil
	for _, name := range sortedKeys(s.Properties) {
		ps := s.Properties[name]
		if ps == nil || len(ps.Default) == 0 {
			continue
		}
		v, err := decodeJSON(ps.Default)
		if err != nil {
			continue
		}
		if out.Defaults == nil {
			out.Defaults = map[string]any{}
		}
		out.Defaults[name] = v
	}
	return &out, nil
}
