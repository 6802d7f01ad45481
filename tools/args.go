package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxArgumentsSize is the largest arguments object PrepareArguments accepts.
const MaxArgumentsSize = 64 << 10

// maxRepeatOfLen bounds repeat_of; execution IDs are "act_" + a 26-char ULID.
const maxRepeatOfLen = 128

// repeatOfDescription is the description of the repeat_of property.
const repeatOfDescription = "execution ID of an earlier call of this tool whose outcome you have seen and deliberately want to repeat"

// decodeJSON decodes one JSON value. Numbers become float64 (the number
// model of JSON Schema validation and of RFC 8785 canonical JSON); an
// integer literal that float64 cannot hold exactly (beyond ±2^53) is
// refused rather than silently rounded.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return numbersToFloat(v, "")
}

var intLiteralRE = regexp.MustCompile(`^-?[0-9]+$`)

func numbersToFloat(v any, at string) (any, error) {
	switch tv := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(tv.String(), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%snumber %s is out of range", atPrefix(at), tv)
		}
		if intLiteralRE.MatchString(tv.String()) && strconv.FormatFloat(f, 'f', -1, 64) != tv.String() {
			return nil, fmt.Errorf("%sinteger %s is too large to be exact (beyond 2^53); pass it as a string", atPrefix(at), tv)
		}
		return f, nil
	case map[string]any:
		for k, e := range tv {
			c, err := numbersToFloat(e, joinAt(at, k))
			if err != nil {
				return nil, err
			}
			tv[k] = c
		}
		return tv, nil
	case []any:
		for i, e := range tv {
			c, err := numbersToFloat(e, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			tv[i] = c
		}
		return tv, nil
	default:
		return v, nil
	}
}

func joinAt(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

func atPrefix(at string) string {
	if at == "" {
		return ""
	}
	return "argument " + at + ": "
}

// PrepareArguments turns a call's raw arguments into the map every later
// step (fingerprint, rendering) uses:
//
//   - empty input or JSON null is an empty object; anything but an object,
//     or more than MaxArgumentsSize bytes, is refused;
//   - the raw bytes are checked first (CheckRawArguments): invalid UTF-8,
//     lone surrogate escapes and duplicate keys at any depth are refused,
//     naming the argument, before encoding/json could replace or merge them;
//   - numbers are float64 (see decodeJSON: integers beyond 2^53 are refused);
//   - repeat_of, if present, must be a non-empty string and is accepted only
//     by side-effecting tools; it STAYS in the returned map (it enters the
//     fingerprint, docs/design §5) and is left out of schema validation. Use
//     SplitRepeatOf to take it out;
//   - the contract's defaults are materialised for absent properties;
//   - the result is validated against the input schema;
//   - the request or command is rendered once (checkRender), so arguments
//     the templates refuse are refused here, before anything is stored.
//
// Every failure wraps ErrInvalidArguments and names the argument and rule.
func (t *Tool) PrepareArguments(raw json.RawMessage) (map[string]any, error) {
	if len(raw) > MaxArgumentsSize {
		return nil, argError("arguments are %d bytes; the limit is %d", len(raw), MaxArgumentsSize)
	}
	var args map[string]any
	if trimmed := bytes.TrimSpace(raw); len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		args = map[string]any{}
	} else {
		// Refuse what decoding would silently change (invalid UTF-8, lone
		// surrogates, duplicate keys) while the raw bytes still show it.
		if err := CheckRawArguments(trimmed); err != nil {
			return nil, err
		}
		v, err := decodeJSON(trimmed)
		if err != nil {
			return nil, argError("arguments are not valid JSON: %v", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, argError("arguments must be a JSON object, got %s", jsonTypeName(v))
		}
		args = m
	}
	repeatOf, hasRepeat := args[RepeatOfArgument]
	if hasRepeat {
		if !t.SideEffecting() {
			return nil, argError("argument %q: tool %s is read-only; there is nothing to repeat, call it again without %s", RepeatOfArgument, t.Name, RepeatOfArgument)
		}
		s, ok := repeatOf.(string)
		if !ok || s == "" || len(s) > maxRepeatOfLen {
			return nil, argError("argument %q: must be the execution ID (a string like act_...) of the call being repeated", RepeatOfArgument)
		}
	}
	_, rest := t.SplitRepeatOf(args)
	for k, v := range t.Defaults {
		if _, ok := rest[k]; !ok {
			rest[k] = deepCopy(v)
		}
	}
	rs, err := t.resolvedSchema()
	if err != nil {
		return nil, err
	}
	if err := t.shapeProblem(rs.Schema(), rest); err != nil {
		return nil, err
	}
	if err := rs.Validate(rest); err != nil {
		return nil, argError("%s", t.hideSecrets(cleanValidation(err), rest))
	}
	if err := t.checkRender(rest); err != nil {
		return nil, err
	}
	if hasRepeat {
		rest[RepeatOfArgument] = repeatOf
	}
	return rest, nil
}

// checkRender renders the request or command once, so that arguments the
// templates refuse (a cwd or path element of "..", a value that would become
// an option, a line break in a header) are refused here, before anything is
// stored, rather than when the execution is dispatched.
func (t *Tool) checkRender(args map[string]any) error {
	if _, ok := args[executionIDVar]; !ok {
		// Latch sets the execution ID only at dispatch; templates that use
		// it are checked with a value of the same shape.
		args = maps.Clone(args)
		args[executionIDVar] = "act_00000000000000000000000000"
	}
	switch {
	case t.Request != nil:
		_, _, _, _, _, err := t.RenderRequest(args)
		return err
	case len(t.Command) > 0:
		_, _, _, err := t.RenderCommand(args)
		return err
	}
	return nil
}

// executionIDVar is the template variable the execution ID may be rendered
// as (set by Latch at dispatch, never by the caller).
const executionIDVar = "execution_id"

// hideSecrets replaces the values of secret arguments in a validation
// message (jsonschema-go quotes the offending value) with "[secret]": the
// message goes back to the agent, and from there into transcripts and logs.
func (t *Tool) hideSecrets(msg string, args map[string]any) string {
	for _, name := range t.Fingerprint.Secret {
		v, ok := args[name]
		if !ok {
			continue
		}
		str, err := plainString(v)
		if err != nil || str == "" {
			continue
		}
		for _, form := range []string{fmt.Sprintf("%q", str), fmt.Sprintf("%v", v), str} {
			if form != "" {
				msg = strings.ReplaceAll(msg, form, "[secret]")
			}
		}
	}
	return msg
}

// SplitRepeatOf returns the repeat_of argument ("" when absent) and a
// shallow copy of args without it. args is not modified.
func (t *Tool) SplitRepeatOf(args map[string]any) (string, map[string]any) {
	rest := make(map[string]any, len(args))
	var repeatOf string
	for k, v := range args {
		if k == RepeatOfArgument {
			repeatOf, _ = v.(string)
			continue
		}
		rest[k] = v
	}
	return repeatOf, rest
}

// MCPInputSchema is the input schema advertised to MCP clients: the
// contract's schema, plus an optional string property repeat_of on
// side-effecting tools.
func (t *Tool) MCPInputSchema() json.RawMessage {
	src := t.InputSchema
	if len(src) == 0 {
		src = json.RawMessage(defaultInputSchema)
	}
	if !t.SideEffecting() {
		return slicesClone(src)
	}
	var m map[string]any
	if err := json.Unmarshal(src, &m); err != nil || m == nil {
		return slicesClone(src)
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props = maps.Clone(props)
	props[RepeatOfArgument] = map[string]any{"type": "string", "description": repeatOfDescription}
	m["properties"] = props
	out, err := json.Marshal(m)
	if err != nil {
		return slicesClone(src)
	}
	return out
}

func slicesClone(b []byte) json.RawMessage { return append(json.RawMessage(nil), b...) }

// defaultInputSchema is the schema of a tool that declares none: no arguments.
const defaultInputSchema = `{"type":"object","properties":{},"additionalProperties":false}`

// schemaCache maps schema JSON to its resolved form; entries are immutable
// and shared by every tool with the same schema. It stops growing at
// maxCachedSchemas so that hand-built tools cannot grow it without bound.
var (
	schemaCache  sync.Map // string -> *jsonschema.Resolved
	schemaCached atomic.Int64
)

const maxCachedSchemas = 4096

func (t *Tool) resolvedSchema() (*jsonschema.Resolved, error) {
	src := string(t.InputSchema)
	if src == "" {
		src = defaultInputSchema
	}
	if v, ok := schemaCache.Load(src); ok {
		return v.(*jsonschema.Resolved), nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(src), &s); err != nil {
		return nil, fmt.Errorf("%w: tool %s: %v", ErrInvalid, t.Name, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %s: %v", ErrInvalid, t.Name, err)
	}
	if schemaCached.Load() < maxCachedSchemas {
		if _, loaded := schemaCache.LoadOrStore(src, rs); !loaded {
			schemaCached.Add(1)
		}
	}
	return rs, nil
}

var propPathRE = regexp.MustCompile(`validating /properties/([^:]*): `)

// cleanValidation rewrites jsonschema-go's error chain ("validating root:
// validating /properties/x: type: ...") to "argument x: type: ...".
// typeErrRE is jsonschema-go's type mismatch once the property path is
// rewritten: `argument service: type: 5 has type "integer", want "string"`.
// The value is dropped (it may be a secret); the types are kept.
var typeErrRE = regexp.MustCompile(`argument (\S+): type: .* has type "(\w+)", want "(\w+)"`)

// enumErrRE and patternErrRE are jsonschema-go's enum and pattern failures
// once the property path is rewritten; as for types, the offending value is
// dropped and what is expected kept.
var (
	enumErrRE    = regexp.MustCompile(`argument (\S+): enum: .* does not equal any of: \[(.*)\]`)
	patternErrRE = regexp.MustCompile(`argument (\S+): pattern: .* does not match regular expression (".*")`)
)

// withArticle is a JSON type name as prose: "an integer", "a string".
func withArticle(typ string) string {
	if strings.IndexByte("aeiou", typ[0]) >= 0 {
		return "an " + typ
	}
	return "a " + typ
}

func cleanValidation(err error) string {
	s := err.Error()
	s = strings.ReplaceAll(s, "validating root: ", "")
	s = strings.ReplaceAll(s, "jsonschema.Schema: <anonymous schema>: ", "")
	s = propPathRE.ReplaceAllStringFunc(s, func(m string) string {
		name := propPathRE.FindStringSubmatch(m)[1]
		name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
		return "argument " + name + ": "
	})
	s = typeErrRE.ReplaceAllStringFunc(s, func(m string) string {
		g := typeErrRE.FindStringSubmatch(m)
		return fmt.Sprintf("argument %s must be %s, not %s", g[1], withArticle(g[3]), withArticle(g[2]))
	})
	s = enumErrRE.ReplaceAllString(s, "argument $1 must be one of: $2")
	s = patternErrRE.ReplaceAllString(s, "argument $1 must match the pattern $2")
	s = strings.ReplaceAll(s, "required: missing properties", "missing required arguments")
	s = strings.ReplaceAll(s, "unexpected additional properties", "unknown arguments")
	return s
}

// shapeProblem reports missing required and unknown top-level arguments
// before schema validation, saying what is expected: the type and
// description of each missing argument, the names the tool takes for an
// unknown one. jsonschema-go would say only "missing properties".
func (t *Tool) shapeProblem(s *jsonschema.Schema, args map[string]any) error {
	if s == nil {
		return nil
	}
	var missing []string
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			missing = append(missing, fmt.Sprintf("%q (%s)", name, expected(s.Properties[name])))
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return argError("missing required argument %s", missing[0])
	default:
		return argError("missing required arguments %s", strings.Join(missing, ", "))
	}
	if s.AdditionalProperties == nil || !isFalseSchema(s.AdditionalProperties) {
		return nil
	}
	var unknown []string
	for name := range args {
		if _, ok := s.Properties[name]; !ok {
			unknown = append(unknown, strconv.Quote(name))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	known := sortedKeys(s.Properties)
	if t.SideEffecting() {
		known = append(known, RepeatOfArgument)
	}
	word := "argument"
	if len(unknown) > 1 {
		word = "arguments"
	}
	return argError("unknown %s %s; %s takes %s", word, strings.Join(unknown, ", "), t.Name, strings.Join(known, ", "))
}

// isFalseSchema reports whether s is the schema that accepts nothing
// (additionalProperties: false decodes to {"not": {}}).
func isFalseSchema(s *jsonschema.Schema) bool {
	return s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// expected says what a property schema asks for: its type and description.
func expected(p *jsonschema.Schema) string {
	if p == nil {
		return "any JSON value"
	}
	what := p.Type
	if what == "" && len(p.Types) > 0 {
		what = strings.Join(p.Types, " or ")
	}
	if len(p.Enum) > 0 {
		vals := make([]string, len(p.Enum))
		for i, v := range p.Enum {
			b, _ := json.Marshal(v)
			vals[i] = string(b)
		}
		what = "one of " + strings.Join(vals, ", ")
	}
	if what == "" {
		what = "any JSON value"
	}
	if p.Description != "" {
		what += ": " + strings.TrimSuffix(p.Description, ".")
	}
	return what
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// deepCopy copies JSON-shaped values so callers may modify what they get.
func deepCopy(v any) any {
	switch tv := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(tv))
		for k, e := range tv {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(tv))
		for i, e := range tv {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}
