package tools

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/latchhq/latch/internal/yamlpos"
	"go.yaml.in/yaml/v3"
)

// Limits on free-form YAML values (input_schema, defaults, request bodies),
// so that a hostile or mistaken file (deep nesting, alias bombs) is refused
// with a message instead of exhausting memory.
const (
	maxValueDepth = 64
	maxValueNodes = 100_000
)

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node { return yamlpos.Deref(n) }

// valueBuilder converts YAML nodes to JSON-shaped Go values: map[string]any,
// []any, string, bool, nil, int64 or float64. It stops at the first limit
// it hits (one problem, not one per node).
type valueBuilder struct {
	p       *parser
	root    string
	nodes   int
	stopped bool
	active  map[*yaml.Node]bool // alias targets on the current path
}

func (p *parser) value(n *yaml.Node, what string) (any, bool) {
	vb := &valueBuilder{p: p, root: what, active: map[*yaml.Node]bool{}}
	v, ok := vb.build(n, what, 0)
	return v, ok && !vb.stopped
}

func (vb *valueBuilder) stop(n *yaml.Node, format string, args ...any) {
	if !vb.stopped {
		vb.stopped = true
		vb.p.addf(n, "%s: %s", vb.root, fmt.Sprintf(format, args...))
	}
}

func (vb *valueBuilder) build(n *yaml.Node, what string, depth int) (any, bool) {
	if vb.stopped {
		return nil, false
	}
	if n != nil && n.Kind == yaml.AliasNode {
		target := deref(n)
		if target == nil {
			vb.stop(n, "alias %s names nothing", n.Value)
			return nil, false
		}
		if vb.active[target] {
			vb.stop(n, "alias *%s refers to a value that contains it", n.Value)
			return nil, false
		}
		vb.active[target] = true
		defer delete(vb.active, target)
		n = target
	}
	if n == nil {
		vb.stop(nil, "empty value")
		return nil, false
	}
	vb.nodes++
	if vb.nodes > maxValueNodes {
		vb.stop(n, "more than %d values", maxValueNodes)
		return nil, false
	}
	if depth > maxValueDepth {
		vb.stop(n, "nested deeper than %d levels", maxValueDepth)
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		ok := true
		for _, kv := range vb.p.pairs(n, what) {
			v, vok := vb.build(kv.val, what+"."+kv.key, depth+1)
			ok = ok && vok
			out[kv.key] = v
		}
		return out, ok
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, vok := vb.build(c, fmt.Sprintf("%s[%d]", what, i), depth+1)
			ok = ok && vok
			out = append(out, v)
		}
		return out, ok
	case yaml.ScalarNode:
		return vb.p.scalar(n, what)
	default:
		vb.stop(n, "unsupported YAML node")
		return nil, false
	}
}

// scalar converts one scalar by its resolved tag.
func (p *parser) scalar(n *yaml.Node, what string) (any, bool) {
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			p.addf(n, "%s: %v", what, cleanYAMLErr(err))
			return nil, false
		}
		return b, true
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return i, true
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || math.IsInf(f, 0) {
			p.addf(n, "%s: integer %s is out of range", what, n.Value)
			return nil, false
		}
		return f, true
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			p.addf(n, "%s: %v", what, cleanYAMLErr(err))
			return nil, false
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			p.addf(n, "%s: %s is not a JSON number", what, n.Value)
			return nil, false
		}
		return f, true
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, true
	default:
		p.addf(n, "%s: unsupported YAML tag %s", what, n.Tag)
		return nil, false
	}
}

// cleanYAMLErr drops the "yaml: " prefix of go-yaml errors.
func cleanYAMLErr(err error) string { return yamlpos.CleanErr(err) }
