package openapi

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/latchhq/latch/tools"
)

// toolOut is one generated tool before it is written.
type toolOut struct {
	name, description string
	method, path      string // path is the catalog template
	query, headers    [][2]string
	body              string // argument carrying the JSON body ("" for none)
	schema            *yaml.Node
	replay            Class
	comment           []string // head comment lines
}

var (
	identRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	nonIdentRE = regexp.MustCompile(`[^A-Za-z0-9_]+`)
	pathVarRE  = regexp.MustCompile(`\{([^{}]*)\}`)
)

// reservedArgs are input names the catalog keeps for Latch.
var reservedArgs = []string{"execution_id", "repeat_of"}

// operation converts one operation; a nil tool means Skipped.
func (im *importer) operation(r opRef) (*toolOut, Operation) {
	res := Operation{Method: r.method, Path: r.path, OperationID: r.op.OperationID}
	skip := func(format string, args ...any) (*toolOut, Operation) {
		res.Class, res.Why = Skipped, fmt.Sprintf(format, args...)
		return nil, res
	}
	if methodRank(r.method) == len(methods) {
		return skip("method %s cannot be a catalog request (%s)", r.method, strings.Join(methods, ", "))
	}
	if r.op.Servers != nil && len(*r.op.Servers) > 0 {
		return skip("the operation names servers of its own; import it with --base-url set to its server")
	}
	t := &toolOut{method: r.method, replay: Review}
	c := &converter{maxDepth: im.o.MaxDepth, budget: im.o.MaxSchemaNodes}
	props := &yaml.Node{Kind: yaml.MappingNode}
	var required []string
	args := map[string]bool{}
	newArg := func(name string) string {
		a := argName(name)
		for i := 2; args[a]; i++ {
			a = fmt.Sprintf("%s_%d", argName(name), i)
		}
		args[a] = true
		return a
	}
	var notes []string
	// Path parameters first: the path template needs their names.
	pathArgs := map[string]string{}
	keyParam := im.keyParam(r)
	var ps []*openapi3.Parameter
	for _, p := range params(r) {
		if p.In == openapi3.ParameterInPath {
			ps = append(ps, p)
		}
	}
	for _, p := range params(r) {
		if p.In != openapi3.ParameterInPath {
			ps = append(ps, p)
		}
	}
	args["body"] = r.op.RequestBody != nil // keep "body" for the body
	for _, p := range ps {
		switch p.In {
		case openapi3.ParameterInCookie:
			if p.Required {
				return skip("it needs cookie %q, and a catalog request sends no cookies", p.Name)
			}
			notes = append(notes, fmt.Sprintf("optional cookie %q left out: a catalog request sends no cookies", p.Name))
			continue
		case openapi3.ParameterInHeader:
			switch {
			case p == keyParam:
				continue // Latch sends it: idempotency_header
			case strings.EqualFold(p.Name, "Authorization"):
				notes = append(notes, "header Authorization left out: give the target a credential: instead")
				continue
			case !headerNameRE.MatchString(p.Name) || tools.ReservedHeader(p.Name) || strings.EqualFold(p.Name, "Content-Type") || strings.EqualFold(p.Name, im.o.IdempotencyHeader):
				if p.Required {
					return skip("it needs header %q, which a catalog request cannot set", p.Name)
				}
				notes = append(notes, fmt.Sprintf("header %q left out: a catalog request cannot set it", p.Name))
				continue
			}
		case openapi3.ParameterInPath, openapi3.ParameterInQuery:
		default:
			return skip("parameter %q is in %q, which OpenAPI does not define", p.Name, p.In)
		}
		a := newArg(p.Name)
		s := c.param(p)
		props.Content = append(props.Content, strNode(a), s)
		if p.Required || p.In == openapi3.ParameterInPath {
			required = append(required, a)
		}
		switch p.In {
		case openapi3.ParameterInPath:
			pathArgs[p.Name] = a
		case openapi3.ParameterInQuery:
			t.query = append(t.query, [2]string{p.Name, "{{" + a + "}}"})
		case openapi3.ParameterInHeader:
			t.headers = append(t.headers, [2]string{p.Name, "{{" + a + "}}"})
		}
	}
	// The path template.
	var bad string
	path := pathVarRE.ReplaceAllStringFunc(r.path, func(m string) string {
		name := m[1 : len(m)-1]
		a, ok := pathArgs[name]
		if !ok {
			bad = name
			return m
		}
		return "{{" + a + "}}"
	})
	if bad != "" {
		return skip("path parameter {%s} is not declared", bad)
	}
	if why := checkPath(path); why != "" {
		return skip("path %s: %s", r.path, why)
	}
	t.path = path
	// The body.
	delete(args, "body")
	if rb := r.op.RequestBody; rb != nil && rb.Value != nil {
		media, mt := jsonMedia(rb.Value.Content)
		switch {
		case r.method == "GET" || r.method == "HEAD":
			notes = append(notes, fmt.Sprintf("the request body of this %s is left out: a %s request carries none", r.method, r.method))
		case mt == nil && rb.Value.Required:
			return skip("its request body is %s only, and Latch sends JSON bodies", strings.Join(mediaNames(rb.Value.Content), ", "))
		case mt == nil:
			notes = append(notes, fmt.Sprintf("the optional %s request body is left out: Latch sends JSON bodies", strings.Join(mediaNames(rb.Value.Content), ", ")))
		default:
			a := newArg("body")
			var s *yaml.Node
			if mt.Schema != nil {
				s = c.schema(mt.Schema, 1, nil)
			} else {
				s = &yaml.Node{Kind: yaml.MappingNode}
			}
			if rb.Value.Description != "" {
				setDesc(s, rb.Value.Description)
			}
			props.Content = append(props.Content, strNode(a), s)
			if rb.Value.Required {
				required = append(required, a)
			}
			t.body = a
			if media != "application/json" {
				t.headers = append(t.headers, [2]string{"Content-Type", media})
			}
		}
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	root.Content = append(root.Content, strNode("type"), strNode("object"))
	if len(required) > 0 {
		root.Content = append(root.Content, strNode("required"), strList(required))
	}
	root.Content = append(root.Content, strNode("additionalProperties"), boolNode(false))
	root.Content = append(root.Content, strNode("properties"), props)
	t.schema = root
	t.name = im.uniqueName(toolName(r.op.OperationID, r.method, r.path))
	t.description = describe(r)

	// The replay class.
	switch {
	case r.method == "GET" || r.method == "HEAD":
		t.replay = ReadOnly
		res.Why = r.method + " has no effect by HTTP's rules: check that this API keeps to them"
	case keyParam != nil && im.status != "" && (im.statusFrom == "--status-path" || im.statusOps[r.op] == im.status):
		t.replay = StatusQuery
		res.Why = fmt.Sprintf("proposed: it takes %s and %s documents a lookup by that key (target status %s); check that the lookup answers 404 for a key it never saw and returns the stored answer for one it did", keyParam.Name, im.statusFrom, im.status)
	case keyParam != nil:
		t.replay = IdempotencyKey
		res.Why = fmt.Sprintf("it takes %s: the target gets idempotency_header %s; check that a re-send with the same key returns the first answer", keyParam.Name, im.o.IdempotencyHeader)
		if p, ok := im.statusOps[r.op]; ok {
			res.Why += fmt.Sprintf(" (its documented lookup %s is not the target's status path %s: a target has one)", p, im.status)
		}
	default:
		res.Why = fmt.Sprintf("it documents no %s header and no lookup by key, so a re-send could act twice: after an unknown outcome an operator decides", im.o.IdempotencyHeader)
		if r.method == "PUT" || r.method == "DELETE" {
			res.Why += fmt.Sprintf(" (%s is idempotent by HTTP's rules: if this API keeps to them, a contract decision can relax this)", r.method)
		}
	}
	res.Class, res.Tool = t.replay, t.name
	id := r.op.OperationID
	if id == "" {
		id = "none; the name is derived from the method and path"
	}
	t.comment = append(t.comment,
		fmt.Sprintf("REVIEW: generated from %s %s (operationId %s); check the description, input_schema and replay before use.", r.method, r.path, id),
		fmt.Sprintf("replay %s: %s.", t.replay, res.Why))
	for _, n := range notes {
		t.comment = append(t.comment, "note: "+n+".")
	}
	for _, cut := range c.cutNotes {
		t.comment = append(t.comment, "cut: "+cut+".")
	}
	im.res.Cuts += c.cuts
	return t, res
}

// checkPath says what is wrong with a path template ("" for nothing).
func checkPath(path string) string {
	if !strings.HasPrefix(path, "/") {
		return "does not start with /"
	}
	if strings.ContainsAny(path, "?#") {
		return "holds ? or #"
	}
	elems := strings.Split(path, "/")[1:]
	for i, el := range elems {
		if (el == "" && i < len(elems)-1) || el == "." || el == ".." {
			return "has an empty, . or .. element"
		}
	}
	lit := regexp.MustCompile(`\{\{[A-Za-z0-9_]+\}\}`).ReplaceAllString(path, "x")
	if strings.ContainsAny(lit, "{}") {
		return "has a template that is not a whole {parameter}"
	}
	u, err := url.Parse("http://h" + lit)
	if err != nil || u.EscapedPath() != lit {
		return "is not a valid escaped URL path"
	}
	return ""
}

// jsonMedia picks the JSON media type of a body: application/json, else
// another */*+json type.
func jsonMedia(c openapi3.Content) (string, *openapi3.MediaType) {
	if mt := c.Get("application/json"); mt != nil {
		return "application/json", mt
	}
	names := mediaNames(c)
	for _, n := range names {
		base, _, _ := strings.Cut(n, ";")
		if strings.HasSuffix(strings.TrimSpace(base), "+json") || strings.HasPrefix(base, "application/json") {
			return n, c[n]
		}
	}
	return "", nil
}

func mediaNames(c openapi3.Content) []string {
	out := make([]string, 0, len(c))
	for n := range c {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// argName turns a parameter name into an argument name templates can use.
func argName(name string) string {
	a := strings.Trim(nonIdentRE.ReplaceAllString(name, "_"), "_")
	if a == "" {
		a = "arg"
	}
	if !identRE.MatchString(a) {
		a = "p_" + a
	}
	for _, r := range reservedArgs {
		if a == r {
			a += "_param"
		}
	}
	return a
}

// describe is a tool's description: the summary, else the description's
// first paragraph, bounded.
func describe(r opRef) string {
	d := strings.TrimSpace(r.op.Summary)
	long := strings.TrimSpace(r.op.Description)
	if d == "" {
		d, _, _ = strings.Cut(long, "\n\n")
	} else if long != "" {
		if first, _, _ := strings.Cut(long, "\n\n"); first != d {
			d += "\n\n" + first
		}
	}
	if d == "" {
		d = r.method + " " + r.path
	}
	if r.op.Deprecated {
		d = "Deprecated. " + d
	}
	return truncate(d, maxDescription)
}

func truncate(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return strings.TrimSpace(string(rs[:n-1])) + "…"
}
