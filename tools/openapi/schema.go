package openapi

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"
)

// jsonTypes are the type names the catalog's JSON Schema accepts.
var jsonTypes = []string{"null", "boolean", "object", "array", "number", "string", "integer"}

// maxCutNotes bounds the cuts a tool's comment lists one by one.
const maxCutNotes = 5

// converter turns OpenAPI schemas (refs already resolved by the loader into
// a pointer graph, which may be cyclic) into JSON Schema for input_schema.
// It keeps only the validation keywords the catalog knows (examples,
// discriminators, xml, readOnly properties and defaults are dropped: a
// default would be sent by Latch, not by the caller) and bounds the result:
// a schema deeper than maxDepth, past budget nodes, or a $ref already being
// expanded on the way down is cut to its type alone, with a comment.
type converter struct {
	maxDepth, budget int
	nodes            int
	cutNotes         []string
	cuts             int
}

// param is a parameter's schema, with its description.
func (c *converter) param(p *openapi3.Parameter) *yaml.Node {
	var s *yaml.Node
	switch {
	case p.Schema != nil:
		s = c.schema(p.Schema, 1, nil)
	case len(p.Content) > 0:
		for _, n := range mediaNames(p.Content) {
			if mt := p.Content[n]; mt != nil && mt.Schema != nil {
				s = c.schema(mt.Schema, 1, nil)
				break
			}
		}
	}
	if s == nil {
		s = &yaml.Node{Kind: yaml.MappingNode}
		s.Content = append(s.Content, strNode("type"), strNode("string"))
	}
	if p.Description != "" {
		setDesc(s, p.Description)
	}
	return s
}

func (c *converter) cut(s *openapi3.Schema, why string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	if s != nil {
		if ty := types(s); ty != nil {
			n.Content = append(n.Content, strNode("type"), ty)
		}
	}
	n.Style = yaml.FlowStyle
	n.LineComment = "cut: " + why
	c.cuts++
	c.note(why)
	return n
}

// note records a cut or a dropped keyword for the tool's comment.
func (c *converter) note(why string) {
	if len(c.cutNotes) < maxCutNotes {
		c.cutNotes = append(c.cutNotes, why)
	} else if len(c.cutNotes) == maxCutNotes {
		c.cutNotes = append(c.cutNotes, "and more (see the cut: comments in input_schema)")
	}
}

// schema converts sr at nesting depth; stack holds the $refs being expanded.
func (c *converter) schema(sr *openapi3.SchemaRef, depth int, stack []string) *yaml.Node {
	if sr == nil || sr.Value == nil {
		return &yaml.Node{Kind: yaml.MappingNode}
	}
	s := sr.Value
	if sr.Ref != "" {
		if slices.Contains(stack, sr.Ref) {
			return c.cut(s, fmt.Sprintf("cyclic $ref %s (it contains itself)", sr.Ref))
		}
		stack = append(slices.Clip(stack), sr.Ref)
	}
	if depth > c.maxDepth {
		return c.cut(s, fmt.Sprintf("nested deeper than %d levels", c.maxDepth))
	}
	if c.nodes >= c.budget {
		return c.cut(s, fmt.Sprintf("the tool's schemas are larger than %d nodes", c.budget))
	}
	c.nodes++
	n := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v *yaml.Node) { n.Content = append(n.Content, strNode(k), v) }
	if s.Always != nil {
		if !*s.Always {
			add("not", &yaml.Node{Kind: yaml.MappingNode})
		}
		return n
	}
	if ty := types(s); ty != nil {
		add("type", ty)
	}
	if s.Title != "" {
		add("title", strNode(truncate(s.Title, 120)))
	}
	if s.Description != "" {
		add("description", strNode(truncate(s.Description, maxSchemaDescription)))
	}
	if s.Format != "" {
		add("format", strNode(s.Format))
	}
	if len(s.Enum) > 0 {
		vals := s.Enum
		if s.Nullable && !slices.Contains(vals, nil) {
			vals = append(slices.Clip(vals), nil)
		}
		if v := valueNode(vals); v != nil {
			add("enum", v)
		}
	}
	if s.Const != nil {
		if v := valueNode(s.Const); v != nil {
			add("const", v)
		}
	}
	// Numbers; a 3.0 boolean exclusive bound becomes 2020-12's number.
	if s.ExclusiveMin.Value != nil {
		add("exclusiveMinimum", numNode(*s.ExclusiveMin.Value))
	}
	if s.ExclusiveMax.Value != nil {
		add("exclusiveMaximum", numNode(*s.ExclusiveMax.Value))
	}
	if s.Min != nil {
		if s.ExclusiveMin.IsTrue() {
			add("exclusiveMinimum", numNode(*s.Min))
		} else {
			add("minimum", numNode(*s.Min))
		}
	}
	if s.Max != nil {
		if s.ExclusiveMax.IsTrue() {
			add("exclusiveMaximum", numNode(*s.Max))
		} else {
			add("maximum", numNode(*s.Max))
		}
	}
	if s.MultipleOf != nil && *s.MultipleOf > 0 {
		add("multipleOf", numNode(*s.MultipleOf))
	}
	// Strings.
	if s.MinLength > 0 {
		add("minLength", uintNode(s.MinLength))
	}
	if s.MaxLength != nil {
		add("maxLength", uintNode(*s.MaxLength))
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err == nil {
			add("pattern", strNode(s.Pattern))
		} else {
			c.note(fmt.Sprintf("pattern %q dropped: not a Go (RE2) regular expression", truncate(s.Pattern, 60)))
		}
	}
	// Arrays.
	if s.Items != nil {
		add("items", c.schema(s.Items, depth+1, stack))
	}
	if len(s.PrefixItems) > 0 {
		add("prefixItems", c.list(s.PrefixItems, depth, stack))
	}
	if s.MinItems > 0 {
		add("minItems", uintNode(s.MinItems))
	}
	if s.MaxItems != nil {
		add("maxItems", uintNode(*s.MaxItems))
	}
	if s.UniqueItems {
		add("uniqueItems", boolNode(true))
	}
	// Objects: readOnly properties are the server's, not the caller's.
	if len(s.Properties) > 0 {
		props := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range sortedKeys(s.Properties) {
			p := s.Properties[k]
			if p != nil && p.Value != nil && p.Value.ReadOnly {
				continue
			}
			props.Content = append(props.Content, strNode(k), c.schema(p, depth+1, stack))
		}
		add("properties", props)
	}
	if len(s.Required) > 0 {
		var req []string
		for _, r := range s.Required {
			if p := s.Properties[r]; p != nil && p.Value != nil && p.Value.ReadOnly {
				continue
			}
			if !slices.Contains(req, r) {
				req = append(req, r)
			}
		}
		if len(req) > 0 {
			add("required", strList(req))
		}
	}
	if len(s.PatternProperties) > 0 {
		pp := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range sortedKeys(s.PatternProperties) {
			if _, err := regexp.Compile(k); err != nil {
				continue
			}
			pp.Content = append(pp.Content, strNode(k), c.schema(s.PatternProperties[k], depth+1, stack))
		}
		if len(pp.Content) > 0 {
			add("patternProperties", pp)
		}
	}
	switch ap := s.AdditionalProperties; {
	case ap.Has != nil:
		add("additionalProperties", boolNode(*ap.Has))
	case ap.Schema != nil:
		add("additionalProperties", c.schema(ap.Schema, depth+1, stack))
	}
	if s.MinProps > 0 {
		add("minProperties", uintNode(s.MinProps))
	}
	if s.MaxProps != nil {
		add("maxProperties", uintNode(*s.MaxProps))
	}
	// Composition.
	if len(s.AllOf) > 0 {
		add("allOf", c.list(s.AllOf, depth, stack))
	}
	if len(s.AnyOf) > 0 {
		add("anyOf", c.list(s.AnyOf, depth, stack))
	}
	if len(s.OneOf) > 0 {
		add("oneOf", c.list(s.OneOf, depth, stack))
	}
	if s.Not != nil {
		add("not", c.schema(s.Not, depth+1, stack))
	}
	return n
}

func (c *converter) list(rs openapi3.SchemaRefs, depth int, stack []string) *yaml.Node {
	l := &yaml.Node{Kind: yaml.SequenceNode}
	for _, r := range rs {
		l.Content = append(l.Content, c.schema(r, depth+1, stack))
	}
	return l
}

// types is s's type as a node (a 3.0 nullable adds "null"), or nil.
func types(s *openapi3.Schema) *yaml.Node {
	var ts []string
	if s.Type != nil {
		for _, t := range *s.Type {
			if slices.Contains(jsonTypes, t) && !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
	}
	if len(ts) == 0 {
		return nil
	}
	if s.Nullable && !slices.Contains(ts, "null") {
		ts = append(ts, "null")
	}
	if len(ts) == 1 {
		return strNode(ts[0])
	}
	return flow(strList(ts))
}

// setDesc sets a schema node's description unless it has one.
func setDesc(n *yaml.Node, d string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "description" {
			return
		}
	}
	n.Content = append(n.Content, strNode("description"), strNode(truncate(d, maxSchemaDescription)))
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func boolNode(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

func uintNode(u uint64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(u, 10)}
}

func numNode(f float64) *yaml.Node {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(f), 10)}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(f, 'g', -1, 64)}
}

func strList(ss []string) *yaml.Node {
	l := &yaml.Node{Kind: yaml.SequenceNode}
	for _, s := range ss {
		l.Content = append(l.Content, strNode(s))
	}
	return l
}

func flow(n *yaml.Node) *yaml.Node {
	n.Style = yaml.FlowStyle
	return n
}

// valueNode encodes a JSON value from the description (nil on failure).
func valueNode(v any) *yaml.Node {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil
	}
	return &n
}
