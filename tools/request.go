package tools

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// request parses and checks an HTTP tool's request template.
func (p *parser) request(e kv, tg *Target, info *schemaInfo, what string) *Request {
	what += ": request"
	info = requestInfo(info) // {{execution_id}} is always there
	f := p.fields(e.val, what, requestKeys)
	if f == nil {
		return nil
	}
	r := &Request{}
	if me, ok := f["method"]; !ok {
		p.addf(e.keyNode, "%s: method is required (%s)", what, strings.Join(httpMethods, ", "))
	} else if m, ok := p.str(me, what+".method"); ok {
		if !slices.Contains(httpMethods, m) {
			p.addf(me.keyNode, "%s: method %q is not one of %s", what, m, strings.Join(httpMethods, ", "))
		} else {
			r.Method = m
		}
	}
	if pe, ok := f["path"]; !ok {
		p.addf(e.keyNode, "%s: path is required", what)
	} else if path, ok := p.str(pe, what+".path"); ok {
		if p.checkPath(pe.keyNode, path, what+".path", info) {
			r.Path = path
		}
	}
	if qe, ok := f["query"]; ok && !isNull(qe.val) {
		r.Query = p.stringMap(qe, what+".query", info, func(n *yaml.Node, k string) bool {
			if k == "" || strings.Contains(k, "{{") {
				p.addf(n, "%s.query: parameter name %q must be a plain non-empty name", what, k)
				return false
			}
			return true
		})
	}
	if he, ok := f["headers"]; ok && !isNull(he.val) {
		r.Headers = p.stringMap(he, what+".headers", info, func(n *yaml.Node, k string) bool {
			switch {
			case !headerNameRE.MatchString(k):
				p.addf(n, "%s.headers: %q is not a valid header name", what, k)
			case ReservedHeader(k):
				p.addf(n, "%s.headers: %s is set by the HTTP client, not the catalog", what, k)
			case tg.IdempotencyHeader != "" && strings.EqualFold(k, tg.IdempotencyHeader):
				p.addf(n, "%s.headers: %s is set by Latch to the execution ID", what, k)
			case tg.Credential != "" && strings.EqualFold(k, "Authorization"):
				p.addf(n, "%s.headers: Authorization is injected from credential %s of target %s", what, tg.Credential, tg.Name)
			default:
				return true
			}
			return false
		})
		for k, v := range r.Headers {
			if strings.ContainsAny(v, "\r\n\x00") {
				p.addf(he.keyNode, "%s.headers: %s: value contains a line break or NUL", what, k)
			}
		}
	}
	if be, ok := f["body"]; ok && !isNull(be.val) {
		if r.Method == "GET" || r.Method == "HEAD" {
			p.addf(be.keyNode, "%s: a %s request carries no body", what, r.Method)
		}
		if v, ok := p.value(be.val, what+".body"); ok {
			r.Body = v
			p.walkStrings(be.val, 0, func(n *yaml.Node) {
				p.checkTemplate(n, n.Value, what+".body", info, refOptional)
			})
		}
	}
	return r
}

// checkPath checks a request path template.
func (p *parser) checkPath(n *yaml.Node, path, what string, info *schemaInfo) bool {
	if !strings.HasPrefix(path, "/") {
		p.addf(n, "%s: must start with /", what)
		return false
	}
	if strings.ContainsAny(path, "?#") {
		p.addf(n, "%s: must not contain ? or #; put parameters under query:", what)
		return false
	}
	elems := strings.Split(path, "/")[1:]
	for i, el := range elems {
		if (el == "" && i < len(elems)-1) || el == "." || el == ".." {
			p.addf(n, "%s: empty, . and .. path elements are not allowed", what)
			return false
		}
	}
	p.checkTemplate(n, path, what, info, refAlways)
	// The literal text must already be a valid escaped path.
	segs, err := parseTemplate(path)
	if err != nil {
		return false
	}
	var lit strings.Builder
	for _, sg := range segs {
		if sg.arg != "" {
			lit.WriteString("x")
		} else {
			lit.WriteString(sg.lit)
		}
	}
	u, err := url.Parse("http://h" + lit.String())
	if err != nil || u.EscapedPath() != lit.String() {
		p.addf(n, "%s: %q is not a valid URL path (escape special characters)", what, path)
		return false
	}
	return true
}

// stringMap parses a mapping of names to string templates.
func (p *parser) stringMap(e kv, what string, info *schemaInfo, keyOK func(*yaml.Node, string) bool) map[string]string {
	if !p.isMapping(e.val, what) {
		return nil
	}
	out := map[string]string{}
	for _, kv := range p.pairs(e.val, what) {
		if !keyOK(kv.keyNode, kv.key) {
			continue
		}
		n := deref(kv.val)
		if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
			p.addf(kv.keyNode, "%s.%s: must be a string", what, kv.key)
			continue
		}
		p.checkTemplate(kv.keyNode, n.Value, what+"."+kv.key, info, refOptional)
		out[kv.key] = n.Value
	}
	return out
}

// walkStrings calls fn for every string scalar under n.
func (p *parser) walkStrings(n *yaml.Node, depth int, fn func(*yaml.Node)) {
	n = deref(n)
	if n == nil || depth > maxValueDepth {
		return
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			fn(n)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			p.walkStrings(n.Content[i], depth+1, fn)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			p.walkStrings(c, depth+1, fn)
		}
	}
}

// command parses an argv template.
func (p *parser) command(e kv, info *schemaInfo, what string) []string {
	n := deref(e.val)
	if n == nil || n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.addf(e.keyNode, "%s: command must be a non-empty list (argv), never a shell string", what)
		return nil
	}
	var argv []string
	ok := true
	for i, c := range n.Content {
		c = deref(c)
		if c == nil || c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null" {
			p.addf(c, "%s: command[%d] must be a string", what, i)
			ok = false
			continue
		}
		el := c.Value
		if i == 0 {
			if strings.Contains(el, "{{") {
				p.addf(c, "%s: command[0] cannot be templated: arguments never choose the program", what)
				ok = false
				continue
			}
			if !strings.HasPrefix(el, "/") {
				p.addf(c, "%s: command[0] must be an absolute path, got %q", what, el)
				ok = false
				continue
			}
		}
		p.checkTemplate(c, el, fmt.Sprintf("%s: command[%d]", what, i), info, refAlways)
		argv = append(argv, el)
	}
	if !ok {
		return nil
	}
	return argv
}

// cwdEnv parses cwd and env of a command tool.
func (p *parser) cwdEnv(f map[string]kv, t *Tool, info *schemaInfo, what string) {
	if ce, ok := f["cwd"]; ok {
		if s, ok := p.str(ce, what+": cwd"); ok {
			if !strings.HasPrefix(s, "/") {
				p.addf(ce.keyNode, "%s: cwd must be an absolute path", what)
			} else {
				p.checkTemplate(ce.keyNode, s, what+": cwd", info, refAlways)
				t.Cwd = s
			}
		}
	}
	if ee, ok := f["env"]; ok && !isNull(ee.val) {
		t.Env = p.stringMap(ee, what+": env", info, func(n *yaml.Node, k string) bool {
			switch {
			case !envNameRE.MatchString(k):
				p.addf(n, "%s: env: %q is not a valid variable name", what, k)
			case strings.HasPrefix(k, "LATCH_"):
				p.addf(n, "%s: env: %s: names beginning LATCH_ are set by the hostagent", what, k)
			default:
				return true
			}
			return false
		})
	}
}
