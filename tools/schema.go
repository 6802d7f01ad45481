package tools

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

// jsonTypes are the type names JSON Schema knows.
var jsonTypes = []string{"null", "boolean", "object", "array", "number", "string", "integer"}

// supportedDrafts are the $schema values jsonschema-go validates.
var supportedDrafts = []string{
	"",
	"https://json-schema.org/draft/2020-12/schema",
	"http://json-schema.org/draft-07/schema#",
	"https://json-schema.org/draft-07/schema#",
}

var (
	schemaType      = reflect.TypeFor[*jsonschema.Schema]()
	schemaSliceType = reflect.TypeFor[[]*jsonschema.Schema]()
	schemaMapType   = reflect.TypeFor[map[string]*jsonschema.Schema]()
)

// schemaIssues reports what jsonschema-go's Resolve lets through but an
// operator would want to hear about: unknown type names, unknown keywords
// (a misspelt "required" silently accepts everything; "x-" extensions are
// allowed), negative counts and unsupported drafts.
func schemaIssues(root *jsonschema.Schema) []string {
	var out []string
	if !slices.Contains(supportedDrafts, root.Schema) {
		out = append(out, fmt.Sprintf("$schema %q is not supported (use draft 2020-12 or draft-07)", root.Schema))
	}
	var walk func(s *jsonschema.Schema, at string, depth int)
	walk = func(s *jsonschema.Schema, at string, depth int) {
		if s == nil || depth > maxValueDepth {
			return
		}
		for _, ty := range append([]string{s.Type}, s.Types...) {
			if ty != "" && !slices.Contains(jsonTypes, ty) {
				out = append(out, fmt.Sprintf("%s: unknown type %q (want one of %s)", at, ty, strings.Join(jsonTypes, ", ")))
			}
		}
		for _, k := range sortedKeys(s.Extra) {
			if !strings.HasPrefix(k, "x-") {
				out = append(out, fmt.Sprintf("%s: unknown keyword %q (extensions must start with x-)", at, k))
			}
		}
		for name, p := range map[string]*int{"minLength": s.MinLength, "maxLength": s.MaxLength, "minItems": s.MinItems, "maxItems": s.MaxItems, "minProperties": s.MinProperties, "maxProperties": s.MaxProperties, "minContains": s.MinContains, "maxContains": s.MaxContains} {
			if p != nil && *p < 0 {
				out = append(out, fmt.Sprintf("%s: %s must not be negative", at, name))
			}
		}
		if s.MultipleOf != nil && *s.MultipleOf <= 0 {
			out = append(out, fmt.Sprintf("%s: multipleOf must be positive", at))
		}
		v := reflect.ValueOf(s).Elem()
		for i := 0; i < v.NumField(); i++ {
			f, sf := v.Field(i), v.Type().Field(i)
			name := jsonName(sf)
			switch sf.Type {
			case schemaType:
				walk(f.Interface().(*jsonschema.Schema), at+"/"+name, depth+1)
			case schemaSliceType:
				for j, c := range f.Interface().([]*jsonschema.Schema) {
					walk(c, fmt.Sprintf("%s/%s/%d", at, name, j), depth+1)
				}
			case schemaMapType:
				m := f.Interface().(map[string]*jsonschema.Schema)
				for _, k := range sortedKeys(m) {
					walk(m[k], at+"/"+name+"/"+k, depth+1)
				}
			}
		}
	}
	walk(root, "", 0)
	slices.Sort(out)
	return slices.Compact(out)
}

func jsonName(sf reflect.StructField) string {
	tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	if tag == "" || tag == "-" {
		switch sf.Name {
		case "Items", "ItemsArray":
			return "items"
		case "DependencySchemas":
			return "dependencies"
		}
		return sf.Name
	}
	return tag
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// schemaInfo is what the loader knows about a tool's arguments.
type schemaInfo struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	props    map[string]bool
	required map[string]bool
	// hasDefault is filled by the loader once defaults are known.
	hasDefault map[string]bool
}

// inputSchema converts, checks and resolves a tool's input_schema. A nil
// node means the tool takes no arguments.
func (p *parser) inputSchema(e *kv, what string) (json.RawMessage, *schemaInfo) {
	raw := json.RawMessage(defaultInputSchema)
	var at *yaml.Node
	if e != nil {
		at = e.keyNode
		if !p.isMapping(e.val, what) {
			return nil, nil
		}
		v, ok := p.value(e.val, what)
		if !ok {
			return nil, nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			p.addf(at, "%s: %v", what, err)
			return nil, nil
		}
		raw = b
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		p.addf(at, "%s: not a JSON Schema: %v", what, err)
		return nil, nil
	}
	bad := false
	for _, msg := range schemaIssues(&s) {
		p.addf(at, "%s: %s", what, strings.TrimPrefix(msg, ": "))
		bad = true
	}
	if s.Type != "object" {
		p.addf(at, "%s: the root must have type: object (arguments are a JSON object)", what)
		bad = true
	}
	if _, ok := s.Properties[RepeatOfArgument]; ok {
		p.addf(at, "%s: property %q is reserved: Latch adds it to side-effecting tools to mark a deliberate repeat", what, RepeatOfArgument)
		bad = true
	}
	if _, ok := s.Properties[ExecutionIDVar]; ok {
		p.addf(at, "%s: property %q is reserved: {{%s}} renders the execution ID in requests; name the argument differently", what, ExecutionIDVar, ExecutionIDVar)
		bad = true
	}
	if bad {
		return nil, nil
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		p.addf(at, "%s: %s", what, cleanValidation(err))
		return nil, nil
	}
	if _, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
		p.addf(at, "%s: a default does not satisfy its own schema: %s", what, cleanValidation(err))
		return nil, nil
	}
	info := &schemaInfo{schema: &s, resolved: rs, props: map[string]bool{}, required: map[string]bool{}}
	for k := range s.Properties {
		info.props[k] = true
	}
	for _, k := range s.Required {
		info.required[k] = true
	}
	return raw, info
}

// checkDefault validates one default value against the schema with the
// object-level constraints that a lone default cannot meet removed.
func checkDefault(info *schemaInfo, name string, v any) error {
	relaxed := info.schema.CloneSchemas()
	relaxed.Required = nil
	relaxed.MinProperties = nil
	relaxed.DependentRequired = nil
	relaxed.DependentSchemas = nil
	relaxed.DependencySchemas = nil
	relaxed.DependencyStrings = nil
	rs, err := relaxed.Resolve(nil)
	if err != nil {
		return err
	}
	if err := rs.Validate(map[string]any{name: v}); err != nil {
		return fmt.Errorf("%s", cleanValidation(err))
	}
	return nil
}
