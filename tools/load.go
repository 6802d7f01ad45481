package tools

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/latchhq/latch/internal/yamlpos"
	"go.yaml.in/yaml/v3"
)

// Defaults applied by the loader.
const (
	// DefaultAttachWindow is the attach window of a side-effecting tool that
	// does not set attach_window.
	DefaultAttachWindow = 10 * time.Minute
	// DefaultHTTPTimeout bounds one HTTP exchange when the target sets none.
	DefaultHTTPTimeout = 30 * time.Second
	// MaxCatalogSize is the largest catalog file Load reads.
	MaxCatalogSize = 8 << 20
)

var (
	nameRE       = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

var (
	topKeys    = []string{"targets", "upstreams", "tools"}
	statusKeys = []string{"method", "path", "absent", "in_progress"}
	// toolKeysBefore and toolKeysAfter are the keys every tool takes; a
	// kind's action keys go between them (the order of "known:" lists).
	toolKeysBefore  = []string{"description", "input_schema", "defaults", "target"}
	toolKeysAfter   = []string{"timeout", "mode", "replay", "attach_window", "approval", "task", "events", "fingerprint"}
	requestKeys     = []string{"method", "path", "query", "headers", "body"}
	fingerprintKeys = []string{"ignore", "secret"}
	httpMethods     = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
	replays         = []string{string(ReplayReadOnly), string(ReplayIdempotencyKey), string(ReplayStatusQuery), string(ReplayReview)}
	approvals       = []string{string(ApprovalNone), string(ApprovalSession), string(ApprovalEveryCall)}
	modes           = []string{string(ModeEnforce), string(ModeObserve)}
)

// Known reports whether c is a built-in channel kind; code that needs a
// bounded set of channel names (metric labels) asks here rather than
// spelling them again.
func (c Channel) Known() bool { return builtIn.Known(c) }

// Load reads and validates the catalog at path with the built-in channel
// kinds (Registry.Load).
func Load(path string) (*Catalog, error) { return builtIn.Load(path) }

// Parse validates a catalog held in memory with the built-in channel kinds
// (Registry.Parse); filename is used in messages.
func Parse(filename string, data []byte) (*Catalog, error) { return builtIn.Parse(filename, data) }

func (p *parser) parse(data []byte) *Catalog {
	p.Data = data
	if len(data) > MaxCatalogSize {
		p.Problems = append(p.Problems, Problem{File: p.File, Msg: fmt.Sprintf("catalog is larger than %d bytes", MaxCatalogSize)})
		return nil
	}
	root := p.Document("a catalog")
	if root == nil {
		return nil
	}
	if yamlpos.Empty(root) {
		p.Problems = append(p.Problems, Problem{File: p.File, Line: 1, Msg: "catalog is empty: define at least one tool under tools:"})
		return nil
	}
	top := p.fields(root, "catalog", topKeys)
	if top == nil {
		return nil
	}
	cat := &Catalog{Targets: map[string]*Target{}, Tools: map[string]*Tool{}}
	if e, ok := top["targets"]; ok && !isNull(e.val) && p.isMapping(e.val, "targets") {
		for _, te := range p.pairs(e.val, "targets") {
			if t := p.target(te); t != nil {
				cat.Targets[t.Name] = t
			}
		}
	}
	if e, ok := top["upstreams"]; ok && !isNull(e.val) && p.isMapping(e.val, "upstreams") {
		p.upstreams(e, cat)
	}
	var toolsNode *yaml.Node
	if e, ok := top["tools"]; ok && !isNull(e.val) && p.isMapping(e.val, "tools") {
		toolsNode = e.val
		entries := p.pairs(e.val, "tools")
		for _, te := range entries {
			if isUpstreamTool(te) {
				if t := p.upstreamTool(te, cat); t != nil {
					cat.Tools[t.Name] = t
				}
				continue
			}
			if t := p.tool(te, cat.Targets); t != nil {
				cat.Tools[t.Name] = t
			}
		}
		if len(entries) == 0 {
			toolsNode = nil
		}
	}
	if toolsNode == nil {
		at := root
		if e, ok := top["tools"]; ok {
			at = e.keyNode
		}
		p.addf(at, "catalog defines no tools: add at least one under tools:")
	}
	return cat
}

func isNull(n *yaml.Node) bool { return yamlpos.IsNull(n) }

// checkName reports names that do not match nameRE.
func (p *parser) checkName(e kv, kind string) bool {
	if !nameRE.MatchString(e.key) {
		p.addf(e.keyNode, "%s name %q: must match ^[a-z][a-z0-9_-]{0,63}$", kind, e.key)
		return false
	}
	return true
}

func (p *parser) target(e kv) *Target {
	p.checkName(e, "target")
	what := "target " + e.key
	f := p.fields(e.val, what, p.kinds.allTargetKeys())
	if f == nil {
		return nil
	}
	t := &Target{Name: e.key}
	channels := p.kinds.targetChannels()
	ce, ok := f["channel"]
	if !ok {
		p.addf(e.keyNode, "%s: channel is required (%s)", what, strings.Join(channels, ", "))
		return t
	}
	ch, ok := p.str(ce, what+": channel")
	if !ok {
		return t
	}
	if !slices.Contains(channels, ch) {
		p.addf(ce.keyNode, "%s: unknown channel %q (want %s)", what, ch, strings.Join(channels, ", "))
		return t
	}
	t.Channel = Channel(ch)
	t.kind = p.kinds.Kind(t.Channel)
	keys := t.kind.TargetKeys()
	for _, k := range sortedKeys(f) {
		if !slices.Contains(keys, k) && k != "mode" {
			p.addf(f[k].keyNode, "%s: %s does not apply to %s targets", what, k, ch)
		}
	}
	if e, ok := f["credential"]; ok {
		t.Credential, _ = p.str(e, what+": credential")
	}
	if e, ok := f["timeout"]; ok {
		t.Timeout, _ = p.duration(e, what+": timeout")
	}
	t.Mode = p.mode(f, what, "")
	t.Settle = DefaultSettle
	if e, ok := f["settle"]; ok {
		if d, ok := p.settle(e, what); ok {
			t.Settle = d
		}
	}
	t.kind.ParseTarget(&TargetSpec{Fields: Fields{p: p, f: f, at: e.keyNode, what: what}, Target: t, entry: e})
	return t
}

// checkHostAddr refuses a host (of setting field) that is an address
// literal Latch never reaches: link-local (cloud metadata), unspecified or
// multicast always, loopback and private ones unless allowPrivate. verb is
// what Latch would do there ("sends", "connects"). A host name passes.
func (p *parser) checkHostAddr(e kv, field, host string, allowPrivate bool, what, verb string) {
	addr := host
	if strings.EqualFold(host, "localhost") {
		addr = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	ip = ip.Unmap()
	switch {
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast():
		p.addf(e.keyNode, "%s: %s host %s is a link-local, unspecified or multicast address; Latch never %s there", what, field, host, verb)
	case (ip.IsLoopback() || ip.IsPrivate()) && !allowPrivate:
		p.addf(e.keyNode, "%s: %s host %s is a loopback or private address; set allow_private: true if that is intended", what, field, host)
	}
}

// refCheck says how a template's references must be satisfied.
type refCheck int

const (
	// refAlways: the string is always rendered, so each argument must be
	// required or have a default.
	refAlways refCheck = iota
	// refOptional: a string that is exactly "{{x}}" is dropped when x is
	// absent; any other reference must be refAlways.
	refOptional
)

// checkTemplate reports malformed templates and references to arguments the
// input schema lacks (or that may be absent where they must be present).
func (p *parser) checkTemplate(n *yaml.Node, s, what string, info *schemaInfo, mode refCheck) {
	names, err := templateArgs(s)
	if err != nil {
		p.addf(n, "%s: %v", what, err)
		return
	}
	if info == nil {
		return
	}
	_, exact := exactArg(s)
	for _, name := range names {
		switch {
		case !info.props[name]:
			p.addf(n, "%s: {{%s}} names no property of input_schema", what, name)
		case mode == refOptional && exact:
		case !info.required[name] && !info.hasDefault[name]:
			p.addf(n, "%s: {{%s}} must always have a value: make it required or give it a default", what, name)
		}
	}
}

func (p *parser) tool(e kv, targets map[string]*Target) *Tool {
	p.checkName(e, "tool")
	if strings.HasPrefix(e.key, "latch_") {
		p.addf(e.keyNode, "tool name %q: names beginning latch_ are reserved for built-in tools", e.key)
	}
	what := "tool " + e.key
	actionKeys := p.kinds.actionKeys()
	f := p.fields(e.val, what, slices.Concat(toolKeysBefore, actionKeys, toolKeysAfter))
	if f == nil {
		return nil
	}
	t := &Tool{Name: e.key, Approval: ApprovalNone}
	if d, ok := f["description"]; ok {
		t.Description, _ = p.str(d, what+": description")
	}

	// Target and channel.
	var tg *Target
	if te, ok := f["target"]; !ok {
		p.addf(e.keyNode, "%s: target is required", what)
	} else if name, ok := p.str(te, what+": target"); ok {
		t.Target = name
		if tg = targets[name]; tg == nil {
			p.addf(te.keyNode, "%s: unknown target %q", what, name)
		} else if tg.Channel == "" {
			tg = nil // its own problem is already reported
		}
	}
	t.Mode = p.toolMode(f, what, tg)

	// Replay, approval, windows.
	replayOK := false
	if re, ok := f["replay"]; !ok {
		if !t.Observed() {
			p.addf(e.keyNode, "%s: replay is required (%s)%s", what, strings.Join(replays, ", "), observeHint)
		}
	} else if s, ok := p.str(re, what+": replay"); ok {
		if !slices.Contains(replays, s) {
			p.addf(re.keyNode, "%s: unknown replay class %q (want %s)", what, s, strings.Join(replays, ", "))
		} else {
			t.Replay, replayOK = Replay(s), true
		}
	}
	p.approvalAndWindow(t, f, what, replayOK)
	p.events(t, f, what)
	if te, ok := f["timeout"]; ok {
		t.Timeout, _ = p.duration(te, what+": timeout")
	}
	p.parseTask(t, f, what)

	// Arguments.
	var se *kv
	if s, ok := f["input_schema"]; ok {
		se = &s
	}
	raw, info := p.inputSchema(se, what+": input_schema")
	t.InputSchema = raw
	if info != nil {
		info.hasDefault = map[string]bool{}
		p.defaults(f, t, info, what)
	}
	p.fingerprint(f, t, info, what)

	// The action, by the target's kind.
	if tg != nil {
		k := tg.Kind()
		s := &ToolSpec{Fields: Fields{p: p, f: f, at: e.keyNode, what: what}, Tool: t, Target: tg, ReplayOK: replayOK, info: info}
		for _, key := range actionKeys {
			if _, has := f[key]; has && !slices.Contains(k.ToolKeys(), key) {
				s.foreign = append(s.foreign, key)
			}
		}
		k.ParseTool(s)
	}
	p.checkSecretUse(f, t, what)
	return t
}

// checkSecretUse refuses secret arguments where their values would be seen:
// URLs (path and query end up in access logs and traces), argv (visible
// to every user of the host through /proc) and cwd (in the host agent's
// marker). Bodies, headers and env are fine.
func (p *parser) checkSecretUse(f map[string]kv, t *Tool, what string) {
	uses := func(s string) []string {
		names, _ := templateArgs(s)
		var out []string
		for _, n := range names {
			if slices.Contains(t.Fingerprint.Secret, n) && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	if r := t.Request; r != nil {
		for _, n := range uses(r.Path) {
			p.addf(f["request"].keyNode, "%s: secret argument %s must not appear in request.path (URLs are logged); send it in the body or a header", what, n)
		}
		for _, k := range sortedKeys(r.Query) {
			for _, n := range uses(r.Query[k]) {
				p.addf(f["request"].keyNode, "%s: secret argument %s must not appear in request.query (URLs are logged); send it in the body or a header", what, n)
			}
		}
	}
	for _, el := range t.Command {
		for _, n := range uses(el) {
			p.addf(f["command"].keyNode, "%s: secret argument %s must not appear in command (argv is visible to every user of the host); pass it in env", what, n)
		}
	}
	for _, n := range uses(t.Cwd) {
		p.addf(f["cwd"].keyNode, "%s: secret argument %s must not appear in cwd (the host agent records the directory in its marker, and it is visible in /proc); pass it in env", what, n)
	}
}

func (p *parser) defaults(f map[string]kv, t *Tool, info *schemaInfo, what string) {
	de, ok := f["defaults"]
	if ok && !isNull(de.val) && p.isMapping(de.val, what+": defaults") {
		for _, d := range p.pairs(de.val, what+": defaults") {
			if !info.props[d.key] {
				p.addf(d.keyNode, "%s: defaults: %q is not a property of input_schema", what, d.key)
				continue
			}
			v, ok := p.value(d.val, what+": defaults."+d.key)
			if !ok {
				continue
			}
			v, err := jsonRoundTrip(v)
			if err != nil {
				p.addf(d.keyNode, "%s: defaults.%s: %v", what, d.key, err)
				continue
			}
			if err := checkDefault(info, d.key, v); err != nil {
				p.addf(d.keyNode, "%s: defaults.%s violates input_schema: %v", what, d.key, err)
				continue
			}
			if t.Defaults == nil {
				t.Defaults = map[string]any{}
			}
			t.Defaults[d.key] = v
			info.hasDefault[d.key] = true
		}
	}
	// A "default" written in the schema is a default of the contract too.
	for _, name := range sortedKeys(info.schema.Properties) {
		ps := info.schema.Properties[name]
		if ps == nil || len(ps.Default) == 0 || info.hasDefault[name] {
			continue
		}
		v, err := decodeJSON(ps.Default)
		if err != nil {
			continue // Resolve with ValidateDefaults already vetted it
		}
		if t.Defaults == nil {
			t.Defaults = map[string]any{}
		}
		t.Defaults[name] = v
		info.hasDefault[name] = true
	}
}

// jsonRoundTrip gives a YAML-built value the exact shape PrepareArguments
// produces for the same JSON (float64 numbers).
func jsonRoundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(b)
}

func (p *parser) fingerprint(f map[string]kv, t *Tool, info *schemaInfo, what string) {
	fe, ok := f["fingerprint"]
	if !ok || isNull(fe.val) {
		return
	}
	ff := p.fields(fe.val, what+": fingerprint", fingerprintKeys)
	if ff == nil {
		return
	}
	lists := map[string][]string{}
	for _, k := range fingerprintKeys {
		le, ok := ff[k]
		if !ok {
			continue
		}
		names, nodes, _ := p.strList(le, what+": fingerprint."+k)
		seen := map[string]bool{}
		for i, name := range names {
			switch {
			case seen[name]:
				p.addf(nodes[i], "%s: fingerprint.%s lists %q twice", what, k, name)
			case info != nil && !info.props[name]:
				p.addf(nodes[i], "%s: fingerprint.%s: %q is not a property of input_schema", what, k, name)
			default:
				lists[k] = append(lists[k], name)
			}
			seen[name] = true
		}
	}
	for _, name := range lists["secret"] {
		if slices.Contains(lists["ignore"], name) {
			p.addf(ff["secret"].keyNode, "%s: fingerprint: %q is both ignored and secret; choose one", what, name)
		}
	}
	t.Fingerprint = Fingerprint{Ignore: lists["ignore"], Secret: lists["secret"]}
}

// approvalAndWindow parses a tool's approval and attach_window (catalog
// and upstream tools alike); a side-effecting tool whose replay parsed (or
// an observed one without replay) gets DefaultAttachWindow when it sets
// none.
func (p *parser) approvalAndWindow(t *Tool, f map[string]kv, what string, replayOK bool) {
	if ae, ok := f["approval"]; ok {
		if s, ok := p.str(ae, what+": approval"); ok {
			if !slices.Contains(approvals, s) {
				p.addf(ae.keyNode, "%s: unknown approval %q (want %s)", what, s, strings.Join(approvals, ", "))
			} else {
				t.Approval = Approval(s)
			}
		}
	}
	if we, ok := f["attach_window"]; ok {
		n := deref(we.val)
		if n != nil && n.Kind == yaml.ScalarNode && n.Value == "until_resolved" {
			t.UntilResolved = true
		} else if n == nil || n.Kind != yaml.ScalarNode {
			p.addf(we.keyNode, "%s: attach_window must be a duration like 30m or 2h, or until_resolved", what)
		} else if d, err := time.ParseDuration(n.Value); err != nil || d <= 0 {
			p.addf(we.keyNode, "%s: attach_window %q must be a positive duration like 30m or 2h, or until_resolved", what, n.Value)
		} else {
			t.AttachWindow = d
		}
	} else if (replayOK || t.Replay == "" && t.Observed()) && t.SideEffecting() {
		// An observed tool whose replay is undecided is matched like a
		// side-effecting one, so its duplicates are found.
		t.AttachWindow = DefaultAttachWindow
	}
}

// observeHint ends the "replay is required" problem: observe mode is how a
// tool runs before its replay class is decided.
const observeHint = "; or set mode: observe to forward its calls unenforced until the contract is decided"

// mode parses the mode key of a tool, target or upstream: the mode it
// sets, else inherited ("" when neither says).
func (p *parser) mode(f map[string]kv, what string, inherited Mode) Mode {
	if me, ok := f["mode"]; ok {
		if s, ok := p.str(me, what+": mode"); ok {
			if slices.Contains(modes, s) {
				return Mode(s)
			}
			p.addf(me.keyNode, "%s: unknown mode %q (want %s)", what, s, strings.Join(modes, ", "))
		}
	}
	return inherited
}

// toolMode is a tool's mode in force: its own, else its target's, else
// ModeEnforce.
func (p *parser) toolMode(f map[string]kv, what string, tg *Target) Mode {
	var inherited Mode
	if tg != nil {
		inherited = tg.Mode
	}
	if m := p.mode(f, what, inherited); m != "" {
		return m
	}
	return ModeEnforce
}

// events parses a tool's event opt-ins: `events: [completed]` sends an
// event to the operator's sinks when an execution of the tool completes
// (the other kinds are sent for every tool; controlplane/events).
func (p *parser) events(t *Tool, f map[string]kv, what string) {
	e, ok := f["events"]
	if !ok {
		return
	}
	names, nodes, ok := p.strList(e, what+": events")
	if !ok {
		return
	}
	for i, n := range names {
		if n != "completed" {
			p.addf(nodes[i], "%s: events: %q cannot be opted in per tool (only completed; the other kinds go to every sink that takes them)", what, n)
			continue
		}
		t.NotifyCompleted = true
	}
}
