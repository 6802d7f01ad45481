package tools

import (
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/latchhq/latch/internal/yamlpos"
)

// parser collects problems while walking a catalog's YAML nodes
// (internal/yamlpos locates them).
type parser struct {
	yamlpos.Reader
	kinds *Registry
}

// addf records a problem at n's line (line 0 when n is nil).
func (p *parser) addf(n *yaml.Node, format string, args ...any) { p.Addf(n, format, args...) }

// kv is one mapping entry.
type kv struct {
	key     string
	keyNode *yaml.Node
	val     *yaml.Node
}

func kvs(in []yamlpos.KV) []kv {
	out := make([]kv, len(in))
	for i, e := range in {
		out[i] = kv{key: e.Key, keyNode: e.KeyNode, val: e.Val}
	}
	return out
}

// isMapping reports whether n is a mapping; otherwise it records a problem.
func (p *parser) isMapping(n *yaml.Node, what string) bool { return p.IsMapping(n, what) }

// pairs returns the entries of mapping n in file order, reporting duplicate,
// merge and non-string keys.
func (p *parser) pairs(n *yaml.Node, what string) []kv { return kvs(p.Pairs(n, what)) }

// fields returns the entries of mapping n by key, reporting keys not in
// allowed. It returns nil (and records a problem) when n is not a mapping.
func (p *parser) fields(n *yaml.Node, what string, allowed []string) map[string]kv {
	m := p.Fields(n, what, allowed)
	if m == nil {
		return nil
	}
	out := make(map[string]kv, len(m))
	for k, e := range m {
		out[k] = kv{key: e.Key, keyNode: e.KeyNode, val: e.Val}
	}
	return out
}

// str returns a non-empty string scalar.
func (p *parser) str(e kv, what string) (string, bool) {
	n := deref(e.val)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.addf(e.keyNode, "%s: must be a string", what)
		return "", false
	}
	if n.Value == "" {
		p.addf(e.keyNode, "%s: must not be empty", what)
		return "", false
	}
	return n.Value, true
}

// boolean returns a bool scalar.
func (p *parser) boolean(e kv, what string) (bool, bool) {
	n := deref(e.val)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		p.addf(e.keyNode, "%s: must be true or false", what)
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		p.addf(e.keyNode, "%s: must be true or false", what)
		return false, false
	}
	return b, true
}

// duration returns a positive duration written like 30s, 10m or 2h.
func (p *parser) duration(e kv, what string) (time.Duration, bool) {
	n := deref(e.val)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.addf(e.keyNode, "%s: must be a duration like 30s, 10m or 2h", what)
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		p.addf(e.keyNode, "%s: %q is not a duration like 30s, 10m or 2h", what, n.Value)
		return 0, false
	}
	if d <= 0 {
		p.addf(e.keyNode, "%s: must be positive, got %s", what, n.Value)
		return 0, false
	}
	return d, true
}

// strList returns a sequence of strings with its nodes.
func (p *parser) strList(e kv, what string) ([]string, []*yaml.Node, bool) {
	n := deref(e.val)
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil, true
	}
	if n == nil || n.Kind != yaml.SequenceNode {
		p.addf(e.keyNode, "%s: must be a list of strings", what)
		return nil, nil, false
	}
	var out []string
	var nodes []*yaml.Node
	ok := true
	for i, c := range n.Content {
		c = deref(c)
		if c == nil || c.Kind != yaml.ScalarNode || c.ShortTag() != "!!str" || c.Value == "" {
			p.addf(c, "%s[%d]: must be a non-empty string", what, i)
			ok = false
			continue
		}
		out = append(out, c.Value)
		nodes = append(nodes, c)
	}
	return out, nodes, ok
}
