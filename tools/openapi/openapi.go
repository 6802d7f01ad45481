package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/latchhq/latch/tools"
)

var (
	// ErrInvalidSpec: the description is not a valid OpenAPI 3.0 or 3.1
	// document (bad YAML or JSON, an unresolvable $ref, a schema error).
	ErrInvalidSpec = errors.New("openapi: invalid OpenAPI description")
	// ErrUnsupportedVersion: the document is Swagger 2.0 or an OpenAPI
	// version other than 3.0 and 3.1.
	ErrUnsupportedVersion = errors.New("openapi: unsupported OpenAPI version")
	// ErrBadOptions: a target name, base URL, header or status path is wrong.
	ErrBadOptions = errors.New("openapi: bad import options")
	// ErrNoOperations: nothing in the description can become a tool.
	ErrNoOperations = errors.New("openapi: no operation can become a tool")
	// ErrTooLarge: the description or the generated catalog is past its bound.
	ErrTooLarge = errors.New("openapi: too large")
)

// Class is what Import proposed for an operation: a replay class, or
// Skipped.
type Class string

const (
	ReadOnly       Class = Class(tools.ReplayReadOnly)
	IdempotencyKey Class = Class(tools.ReplayIdempotencyKey)
	StatusQuery    Class = Class(tools.ReplayStatusQuery)
	Review         Class = Class(tools.ReplayReview)
	// Skipped operations become no tool (Operation.Why says why).
	Skipped Class = "skipped"
)

// Classes lists every Class in the order counts are printed.
var Classes = []Class{ReadOnly, IdempotencyKey, StatusQuery, Review, Skipped}

const (
	// DefaultIdempotencyHeader is the header looked for when Options names none.
	DefaultIdempotencyHeader = "Idempotency-Key"
	// DefaultMaxDepth bounds schema nesting in a generated input_schema.
	DefaultMaxDepth = 8
	// DefaultMaxSchemaNodes bounds the schemas converted for one tool.
	DefaultMaxSchemaNodes = 300
	// MaxSpecSize is the largest description Import reads.
	MaxSpecSize = 64 << 20
	// maxDescription bounds a tool's description (runes).
	maxDescription = 1000
	// maxSchemaDescription bounds a schema's description (runes).
	maxSchemaDescription = 300
	// maxListedSkips bounds the skipped operations named in the header comment.
	maxListedSkips = 40
)

// Options configure Import.
type Options struct {
	// Target names the http target the tools are for. Required.
	Target string
	// BaseURL overrides the description's first server URL.
	BaseURL string
	// IdempotencyHeader is the header that carries an idempotency key
	// (default DefaultIdempotencyHeader), compared case-insensitively.
	IdempotencyHeader string
	// StatusPath is a lookup by key the user names ("/v1/orders/by-key/{execution_id}"):
	// every operation taking the idempotency header is proposed as
	// status_query against it, whatever the links say.
	StatusPath string
	// MaxDepth and MaxSchemaNodes bound input_schema (defaults
	// DefaultMaxDepth, DefaultMaxSchemaNodes).
	MaxDepth       int
	MaxSchemaNodes int
	// Source names the description in the generated header comment.
	Source string
	// Registry validates the output (nil: the built-in kinds, tools.Parse).
	Registry *tools.Registry
}

// Operation is what became of one operation of the description.
type Operation struct {
	Method, Path, OperationID string
	// Tool is the generated tool's name ("" when Skipped).
	Tool  string
	Class Class
	// Why explains the class (for Skipped: why no tool was made).
	Why string
}

// Result is an import's catalog and what it proposed.
type Result struct {
	// YAML is the catalog; it passed the loader's validation.
	YAML []byte
	// Catalog is YAML as the loader read it.
	Catalog *tools.Catalog
	// Operations are in the order of the catalog (path, then method).
	Operations []Operation
	// Cuts counts schemas cut at a bound.
	Cuts int
	// StatusPath is the target's proposed status path ("" if none).
	StatusPath string
	// IdempotencyHeader is the target's idempotency_header ("" if none).
	IdempotencyHeader string
}

// Count returns how many operations got class c.
func (r *Result) Count(c Class) int {
	n := 0
	for _, o := range r.Operations {
		if o.Class == c {
			n++
		}
	}
	return n
}

// Counts returns the per-class counts as "read_only 12, idempotency_key 0, ...".
func (r *Result) Counts() string {
	parts := make([]string, 0, len(Classes))
	for _, c := range Classes {
		name := string(c)
		if c == StatusQuery {
			name = "status_query (proposed)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, r.Count(c)))
	}
	return strings.Join(parts, ", ")
}

// Operation returns the import of METHOD PATH as written in the description.
func (r *Result) Operation(method, path string) (Operation, bool) {
	for _, o := range r.Operations {
		if o.Method == method && o.Path == path {
			return o, true
		}
	}
	return Operation{}, false
}

var (
	targetNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// methods are the methods a catalog request can use, in output order.
	methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
)

// Import reads an OpenAPI 3.0 or 3.1 description (JSON or YAML) and returns
// the catalog it proposes, already checked by the catalog loader.
func Import(ctx context.Context, spec []byte, o Options) (*Result, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if len(spec) > MaxSpecSize {
		return nil, fmt.Errorf("%w: the description is %d bytes, more than %d", ErrTooLarge, len(spec), MaxSpecSize)
	}
	doc, err := load(ctx, spec)
	if err != nil {
		return nil, err
	}
	base, err := o.baseURL(doc)
	if err != nil {
		return nil, err
	}
	im := &importer{o: o, doc: doc, byID: map[string]opRef{}, names: map[string]bool{}}
	im.index()
	im.findStatus()
	var tl []*toolOut
	for _, r := range im.ops {
		t, op := im.operation(r)
		im.res.Operations = append(im.res.Operations, op)
		if t != nil {
			tl = append(tl, t)
		}
	}
	if len(tl) == 0 {
		return nil, fmt.Errorf("%w: %d operation(s), all skipped (see the reasons with a smaller description, or check the paths section)%s", ErrNoOperations, len(im.res.Operations), firstSkip(im.res.Operations))
	}
	out, err := im.emit(base, tl)
	if err != nil {
		return nil, err
	}
	if len(out) > tools.MaxCatalogSize {
		return nil, fmt.Errorf("%w: the catalog would be %d bytes, more than the loader's %d: lower --max-depth or import a smaller description", ErrTooLarge, len(out), tools.MaxCatalogSize)
	}
	name := o.Source
	if name == "" {
		name = "imported catalog"
	}
	parse := tools.Parse
	if o.Registry != nil {
		parse = o.Registry.Parse
	}
	cat, err := parse(name, out)
	if err != nil {
		// A bug of the importer, not of the description: say so.
		return nil, fmt.Errorf("openapi: the generated catalog does not load (an importer bug; please report it with the description): %w", err)
	}
	im.res.YAML, im.res.Catalog = out, cat
	return &im.res, nil
}

func firstSkip(ops []Operation) string {
	for _, o := range ops {
		if o.Class == Skipped {
			return fmt.Sprintf("; first: %s %s: %s", o.Method, o.Path, o.Why)
		}
	}
	return ""
}

func (o *Options) fill() error {
	if !targetNameRE.MatchString(o.Target) {
		return fmt.Errorf("%w: target name %q must match %s", ErrBadOptions, o.Target, targetNameRE)
	}
	if o.IdempotencyHeader == "" {
		o.IdempotencyHeader = DefaultIdempotencyHeader
	}
	if !headerNameRE.MatchString(o.IdempotencyHeader) || tools.ReservedHeader(o.IdempotencyHeader) {
		return fmt.Errorf("%w: idempotency header %q is not a header name a catalog can use", ErrBadOptions, o.IdempotencyHeader)
	}
	if o.StatusPath != "" {
		if !strings.HasPrefix(o.StatusPath, "/") || !strings.Contains(o.StatusPath, "{execution_id}") || strings.ContainsAny(o.StatusPath, "?#") || strings.Contains(o.StatusPath, "{{") {
			return fmt.Errorf("%w: status path %q must start with /, contain {execution_id} and have no query: e.g. /v1/orders/by-key/{execution_id}", ErrBadOptions, o.StatusPath)
		}
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxSchemaNodes <= 0 {
		o.MaxSchemaNodes = DefaultMaxSchemaNodes
	}
	return nil
}

// load parses and validates the description. References outside the
// document are refused: the importer reads one file and fetches nothing.
func load(ctx context.Context, spec []byte) (*openapi3.T, error) {
	var head struct {
		Swagger any `yaml:"swagger" json:"swagger"`
		OpenAPI any `yaml:"openapi" json:"openapi"`
	}
	unmarshal := yaml.Unmarshal
	if t := bytes.TrimSpace(spec); len(t) > 0 && t[0] == '{' {
		unmarshal = json.Unmarshal // JSON is YAML, but a JSON decoder reads it faster
	}
	if err := unmarshal(spec, &head); err != nil {
		return nil, fmt.Errorf("%w: not JSON or YAML: %w", ErrInvalidSpec, err)
	}
	ver := fmt.Sprint(head.OpenAPI)
	switch {
	case head.Swagger != nil:
		return nil, fmt.Errorf("%w: this is Swagger %v; convert it to OpenAPI 3 first (e.g. with swagger2openapi)", ErrUnsupportedVersion, head.Swagger)
	case head.OpenAPI == nil:
		return nil, fmt.Errorf("%w: no \"openapi\" version field: is this an OpenAPI description?", ErrInvalidSpec)
	case !strings.HasPrefix(ver, "3.0") && !strings.HasPrefix(ver, "3.1"):
		return nil, fmt.Errorf("%w: openapi %q; this importer reads 3.0.x and 3.1.x", ErrUnsupportedVersion, ver)
	}
	l := openapi3.NewLoader()
	l.IsExternalRefsAllowed = false
	l.Context = ctx
	doc, err := l.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	// Examples, defaults and patterns are not checked: real descriptions
	// get them wrong often, and none reaches the catalog (patterns are
	// checked again as Go regular expressions when converted).
	// The loader has resolved every $ref and refused what it cannot read.
	// The full OpenAPI rule check (doc.Validate) is not run: published
	// descriptions break its rules (GitHub's has paths it calls
	// conflicting), it costs more than the import itself, and every
	// generated tool is checked by the catalog loader anyway.
	if doc.Paths == nil || doc.Paths.Len() == 0 {
		return nil, fmt.Errorf("%w: the description has no paths", ErrNoOperations)
	}
	return doc, nil
}

// baseURL is Options.BaseURL or the first server's URL with its variables'
// defaults.
func (o *Options) baseURL(doc *openapi3.T) (string, error) {
	raw, from := o.BaseURL, "--base-url"
	if raw == "" {
		if len(doc.Servers) == 0 || doc.Servers[0] == nil {
			return "", fmt.Errorf("%w: the description names no server: pass --base-url https://api.example.com", ErrBadOptions)
		}
		s := doc.Servers[0]
		raw, from = s.URL, "the description's first server"
		for name, v := range s.Variables {
			if v != nil {
				raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
			}
		}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: %s %q: %w", ErrBadOptions, from, raw, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return "", fmt.Errorf("%w: %s %q is not an absolute http(s) URL: pass --base-url https://api.example.com", ErrBadOptions, from, raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, "{}"):
		return "", fmt.Errorf("%w: %s %q must be scheme, host and path only (no credentials, query, fragment or variables)", ErrBadOptions, from, raw)
	}
	return strings.TrimSuffix(raw, "/"), nil
}

// privateHost reports whether base's host is an address literal the
// loader refuses without allow_private.
func privateHost(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(u.Hostname())
	return err == nil && (a.IsLoopback() || a.IsPrivate())
}

// opRef is one operation of the description.
type opRef struct {
	path, method string
	item         *openapi3.PathItem
	op           *openapi3.Operation
}

type importer struct {
	o     Options
	doc   *openapi3.T
	ops   []opRef
	byID  map[string]opRef
	names map[string]bool
	// status is the target's status path; statusFrom says where it came from.
	status, statusFrom string
	// statusOps are the operations whose documented lookup is status.
	statusOps map[*openapi3.Operation]string
	res       Result
}

func (im *importer) index() {
	paths := im.doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, p := range keys {
		item := paths[p]
		if item == nil {
			continue
		}
		ops := item.Operations()
		mk := make([]string, 0, len(ops))
		for m := range ops {
			mk = append(mk, strings.ToUpper(m))
		}
		slices.SortFunc(mk, func(a, b string) int { return methodRank(a) - methodRank(b) })
		for _, m := range mk {
			op := item.GetOperation(m)
			if op == nil {
				continue
			}
			r := opRef{path: p, method: m, item: item, op: op}
			im.ops = append(im.ops, r)
			if op.OperationID != "" {
				im.byID[op.OperationID] = r
			}
		}
	}
}

func methodRank(m string) int {
	if i := slices.Index(methods, m); i >= 0 {
		return i
	}
	return len(methods)
}

// findStatus decides the target's status path: Options.StatusPath, else
// the first lookup documented by a link from an operation taking the
// idempotency header.
func (im *importer) findStatus() {
	im.statusOps = map[*openapi3.Operation]string{}
	if im.o.StatusPath != "" {
		im.status, im.statusFrom = im.o.StatusPath, "--status-path"
		return
	}
	for _, r := range im.ops {
		if r.method == "GET" || r.method == "HEAD" || im.keyParam(r) == nil {
			continue
		}
		if p, from := im.linkedLookup(r); p != "" {
			im.statusOps[r.op] = p
			if im.status == "" {
				im.status, im.statusFrom = p, from
			}
		}
	}
}

// linkedLookup finds, among r's response links, one that passes the
// request's idempotency header to a GET whose only path parameter it fills:
// that GET is a lookup by key, returned as a status path.
func (im *importer) linkedLookup(r opRef) (path, from string) {
	if r.op.Responses == nil {
		return "", ""
	}
	want := strings.ToLower("$request.header." + im.o.IdempotencyHeader)
	codes := r.op.Responses.Map()
	ck := make([]string, 0, len(codes))
	for c := range codes {
		ck = append(ck, c)
	}
	sort.Strings(ck)
	for _, c := range ck {
		resp := codes[c]
		if resp == nil || resp.Value == nil {
			continue
		}
		lk := make([]string, 0, len(resp.Value.Links))
		for n := range resp.Value.Links {
			lk = append(lk, n)
		}
		sort.Strings(lk)
		for _, n := range lk {
			l := resp.Value.Links[n]
			if l == nil || l.Value == nil {
				continue
			}
			for pname, expr := range l.Value.Parameters {
				s, ok := expr.(string)
				if !ok || strings.ToLower(s) != want {
					continue
				}
				t, ok := im.linkTarget(l.Value)
				if !ok || t.method != "GET" {
					continue
				}
				pname = strings.TrimPrefix(pname, "path.")
				if sp := lookupPath(t.path, pname); sp != "" {
					return sp, fmt.Sprintf("link %q of %s %s (response %s)", n, r.method, r.path, c)
				}
			}
		}
	}
	return "", ""
}

func (im *importer) linkTarget(l *openapi3.Link) (opRef, bool) {
	if l.OperationID != "" {
		r, ok := im.byID[l.OperationID]
		return r, ok
	}
	ref, ok := strings.CutPrefix(l.OperationRef, "#/paths/")
	if !ok {
		return opRef{}, false
	}
	i := strings.LastIndex(ref, "/")
	if i < 0 {
		return opRef{}, false
	}
	p := strings.NewReplacer("~1", "/", "~0", "~").Replace(ref[:i])
	m := strings.ToUpper(ref[i+1:])
	for _, r := range im.ops {
		if r.path == p && r.method == m {
			return r, true
		}
	}
	return opRef{}, false
}

// lookupPath turns "/orders/by-key/{key}" into "/orders/by-key/{execution_id}"
// when {param} is its only template.
func lookupPath(path, param string) string {
	if strings.Count(path, "{") != 1 || !strings.Contains(path, "{"+param+"}") {
		return ""
	}
	sp := strings.Replace(path, "{"+param+"}", "{execution_id}", 1)
	if strings.ContainsAny(sp, "?#") {
		return ""
	}
	return sp
}

// keyParam is r's idempotency header parameter, if it takes one.
func (im *importer) keyParam(r opRef) *openapi3.Parameter {
	for _, p := range params(r) {
		if p.In == openapi3.ParameterInHeader && strings.EqualFold(p.Name, im.o.IdempotencyHeader) {
			return p
		}
	}
	return nil
}

// params are r's parameters, the operation's overriding its path item's.
func params(r opRef) []*openapi3.Parameter {
	var out []*openapi3.Parameter
	seen := map[string]int{}
	add := func(ps openapi3.Parameters) {
		for _, pr := range ps {
			if pr == nil || pr.Value == nil {
				continue
			}
			k := pr.Value.In + "\x00" + pr.Value.Name
			if i, ok := seen[k]; ok {
				out[i] = pr.Value
				continue
			}
			seen[k] = len(out)
			out = append(out, pr.Value)
		}
	}
	add(r.item.Parameters)
	add(r.op.Parameters)
	return out
}

// emitBuffer encodes n as YAML with two-space indentation.
func encode(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
