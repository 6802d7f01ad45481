package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Templates are plain substitution: "{{name}}" (spaces allowed inside the
// braces) is replaced by the argument called name. There are no expressions,
// filters, conditionals or escapes; a "{{" that does not open a well-formed
// reference is a catalog error. Arguments never choose the host: base_url is
// never templated, and path elements are URL-path-escaped.

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// segment is a literal run of text or one argument reference.
type segment struct {
	lit string
	arg string // non-empty for a reference
}

// parseTemplate splits s into literal and reference segments.
func parseTemplate(s string) ([]segment, error) {
	var segs []segment
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			if s != "" {
				segs = append(segs, segment{lit: s})
			}
			return segs, nil
		}
		if i > 0 {
			segs = append(segs, segment{lit: s[:i]})
		}
		rest := s[i+2:]
		j := strings.Index(rest, "}}")
		if j < 0 {
			return nil, errors.New(`unclosed "{{": templates are {{argument}}`)
		}
		name := strings.Trim(rest[:j], " ")
		if !identRE.MatchString(name) {
			return nil, fmt.Errorf("template %q is not a plain {{argument}} reference (no expressions, filters or literal \"{{\")", "{{"+rest[:j]+"}}")
		}
		segs = append(segs, segment{arg: name})
		s = rest[j+2:]
	}
}

// templateArgs returns the argument names referenced by s.
func templateArgs(s string) ([]string, error) {
	segs, err := parseTemplate(s)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, sg := range segs {
		if sg.arg != "" {
			names = append(names, sg.arg)
		}
	}
	return names, nil
}

// exactArg returns the argument name when s is exactly one reference.
func exactArg(s string) (string, bool) {
	segs, err := parseTemplate(s)
	if err != nil || len(segs) != 1 || segs[0].arg == "" {
		return "", false
	}
	return segs[0].arg, true
}

// plainString is the string form of an argument value inside a string:
// strings as they are, everything else (numbers, bools, null, arrays,
// objects) as compact JSON.
func plainString(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// render substitutes args into s; esc, when set, transforms each
// substituted value (never the literal text).
func render(s string, args map[string]any, esc func(string) string) (string, error) {
	segs, err := parseTemplate(s)
	if err != nil {
		return "", argError("%v", err)
	}
	var b strings.Builder
	for _, sg := range segs {
		if sg.arg == "" {
			b.WriteString(sg.lit)
			continue
		}
		v, ok := args[sg.arg]
		if !ok {
			return "", argError("argument %q is needed to render %q but was not given", sg.arg, s)
		}
		str, err := plainString(v)
		if err != nil {
			return "", argError("argument %q: %v", sg.arg, err)
		}
		if esc != nil {
			str = esc(str)
		}
		b.WriteString(str)
	}
	return b.String(), nil
}

// RenderString substitutes the arguments into s. A reference to an absent
// argument is an error wrapping ErrInvalidArguments.
func (t *Tool) RenderString(s string, args map[string]any) (string, error) {
	return render(s, args, nil)
}

// RenderArgv renders the command template, one argv element per element.
// The result is an argv for exec, never a shell string: an argument value is
// always exactly one element (or part of one), whatever it contains. With
// PositionalAfterDoubleDash, "--" is inserted before the first element that
// begins with one of those arguments. An argument value that would make an
// element start with "-" (an option) is refused unless a "--" precedes it
// (options.go).
func (t *Tool) RenderArgv(args map[string]any) ([]string, error) {
	if len(t.Command) == 0 {
		return nil, fmt.Errorf("%w: tool %s has no command", ErrWrongChannel, t.Name)
	}
	ins := t.doubleDashAt()
	argv := make([]string, 0, len(t.Command)+1)
	dashed := false
	for i, el := range t.Command {
		if i == ins {
			argv = append(argv, "--")
			dashed = true
		}
		s, err := render(el, args, nil)
		if err != nil {
			return nil, err
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, argError("command element %d contains a NUL byte", i)
		}
		if i > 0 {
			if err := t.checkOptionValue(i, el, s, dashed); err != nil {
				return nil, err
			}
			dashed = dashed || el == "--"
		}
		argv = append(argv, s)
	}
	return argv, nil
}

// RenderCommand renders argv, cwd and env of an SSH or local tool. An env
// entry whose template is exactly "{{arg}}" is left out when arg is absent.
func (t *Tool) RenderCommand(args map[string]any) (argv []string, cwd string, env map[string]string, err error) {
	argv, err = t.RenderArgv(args)
	if err != nil {
		return nil, "", nil, err
	}
	if t.Cwd != "" {
		cwd, err = renderCwd(t.Cwd, args)
		if err != nil {
			return nil, "", nil, err
		}
	}
	if len(t.Env) > 0 {
		env = make(map[string]string, len(t.Env))
		for _, k := range slices.Sorted(maps.Keys(t.Env)) {
			v, ok, err := renderOptional(t.Env[k], args, nil)
			if err != nil {
				return nil, "", nil, err
			}
			if !ok {
				continue
			}
			if strings.IndexByte(v, 0) >= 0 {
				return nil, "", nil, argError("env %s contains a NUL byte", k)
			}
			env[k] = v
		}
	}
	return argv, cwd, env, nil
}

// SecretEnv returns, sorted, the names of the tool's env entries whose
// templates reference a secret argument (fingerprint.secret): the values
// the host agent must redact from the output it keeps.
func (t *Tool) SecretEnv() []string {
	var out []string
	for k, tmpl := range t.Env {
		names, _ := templateArgs(tmpl)
		for _, n := range names {
			if slices.Contains(t.Fingerprint.Secret, n) {
				out = append(out, k)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// SecretValues returns, sorted and distinct, the bare values of the secret
// arguments (fingerprint.secret) the tool's env templates reference, in
// the forms they can take inside the rendered env: strings as they are and
// JSON-escaped (as an object's leaf is), numbers in their decimal and JSON
// forms, and the leaves of objects and arrays. A caller sends the host
// agent those that occur in the rendered env values. The
// host agent redacts them from the output it keeps besides the whole env
// values (SecretEnv), so a secret put inside a longer value ("Bearer
// {{token}}") is replaced when the command prints it alone too. Absent
// arguments are skipped (their optional entries are left out).
func (t *Tool) SecretValues(args map[string]any) []string {
	var out []string
	for _, tmpl := range t.Env {
		names, _ := templateArgs(tmpl)
		for _, n := range names {
			if v, ok := args[n]; ok && slices.Contains(t.Fingerprint.Secret, n) {
				out = appendLeaves(out, v)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// appendLeaves appends the string forms of v's leaves (see SecretValues).
func appendLeaves(out []string, v any) []string {
	switch tv := v.(type) {
	case string:
		// Inside an object or array the env holds the JSON-escaped text.
		out = append(out, tv)
		if s, err := plainString([]any{tv}); err == nil {
			out = append(out, s[2:len(s)-2])
		}
		return out
	case float64:
		out = append(out, strconv.FormatFloat(tv, 'f', -1, 64))
		if s, err := plainString(tv); err == nil {
			out = append(out, s)
		}
		return out
	case map[string]any:
		for _, e := range tv {
			out = appendLeaves(out, e)
		}
	case []any:
		for _, e := range tv {
			out = appendLeaves(out, e)
		}
	}
	return out
}

// renderCwd renders a cwd template. Arguments may name a directory under
// the template's literal prefix, never leave it: like a URL path element, a
// substituted value may not contain "/" (nor NUL), and an element holding a
// reference may not render to "", "." or "..". The result is cleaned
// (path.Clean) and must still lie under the literal prefix: the template's
// text before its first reference, up to the last "/" in it. The cleaned
// path is returned, so the path checked is the path used.
func renderCwd(tmpl string, args map[string]any) (string, error) {
	names, err := templateArgs(tmpl)
	if err != nil {
		return "", argError("cwd: %v", err)
	}
	for _, name := range names {
		v, ok := args[name]
		if !ok {
			continue // render reports it
		}
		str, err := plainString(v)
		if err != nil {
			return "", argError("argument %q: %v", name, err)
		}
		if strings.ContainsAny(str, "/\x00") {
			return "", argError("argument %q is used in cwd %q and must name one directory: its value may not contain \"/\" or a NUL byte", name, tmpl)
		}
	}
	out, err := render(tmpl, args, nil)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(out, "/") || strings.IndexByte(out, 0) >= 0 {
		return "", argError("cwd %q does not render to an absolute path", tmpl)
	}
	// Values hold no "/", so template and result have the same elements.
	telems, relems := strings.Split(tmpl, "/"), strings.Split(out, "/")
	if len(telems) != len(relems) {
		return "", argError("cwd %q: an argument changed the number of path elements", tmpl)
	}
	for i, el := range telems {
		if strings.Contains(el, "{{") && (relems[i] == "" || relems[i] == "." || relems[i] == "..") {
			return "", argError("cwd element %q renders to %q, which would leave the directory cwd %q names; pass a directory name", el, relems[i], tmpl)
		}
	}
	cleaned := path.Clean(out)
	if len(names) > 0 {
		lit := tmpl[:strings.Index(tmpl, "{{")]
		prefix := path.Clean(lit[:strings.LastIndex(lit, "/")+1])
		if cleaned != prefix && !strings.HasPrefix(cleaned, strings.TrimSuffix(prefix, "/")+"/") {
			return "", argError("cwd %q renders to %s, which is not under %s", tmpl, cleaned, prefix)
		}
	}
	return cleaned, nil
}

// renderOptional renders s; when s is exactly "{{arg}}" and arg is absent it
// reports ok=false instead of an error.
func renderOptional(s string, args map[string]any, esc func(string) string) (string, bool, error) {
	if name, exact := exactArg(s); exact {
		if _, ok := args[name]; !ok {
			return "", false, nil
		}
	}
	out, err := render(s, args, esc)
	return out, err == nil, err
}

// RenderBody renders the request body template. A string that is exactly
// "{{x}}" becomes x's JSON value with its type (an absent x leaves the key out
// of its object, or null in an array); other strings get substitution with
// the values' plain string form.
func (t *Tool) RenderBody(args map[string]any) (any, error) {
	if t.Request == nil {
		return nil, fmt.Errorf("%w: tool %s has no request", ErrWrongChannel, t.Name)
	}
	v, _, err := renderValue(t.Request.Body, args, 0)
	return v, err
}

// maxBodyDepth bounds template tree recursion; Load never builds deeper trees.
const maxBodyDepth = 64

func renderValue(tmpl any, args map[string]any, depth int) (any, bool, error) {
	if depth > maxBodyDepth {
		return nil, false, argError("body template nested deeper than %d", maxBodyDepth)
	}
	switch tv := tmpl.(type) {
	case string:
		if name, exact := exactArg(tv); exact {
			v, ok := args[name]
			if !ok {
				return nil, false, nil
			}
			return v, true, nil
		}
		s, err := render(tv, args, nil)
		return s, true, err
	case map[string]any:
		out := make(map[string]any, len(tv))
		for k, e := range tv {
			v, ok, err := renderValue(e, args, depth+1)
			if err != nil {
				return nil, false, err
			}
			if ok {
				out[k] = v
			}
		}
		return out, true, nil
	case []any:
		out := make([]any, len(tv))
		for i, e := range tv {
			v, _, err := renderValue(e, args, depth+1)
			if err != nil {
				return nil, false, err
			}
			out[i] = v
		}
		return out, true, nil
	default:
		return tv, true, nil
	}
}

// RenderRequest renders an HTTP tool's request. path is in escaped form
// (each substituted value passed through url.PathEscape, so "/", "?", "#"
// and "%" inside an argument stay inside its path element), ready to append
// to the target's base_url (see Target.URL); an argument that renders a
// whole path element to "", "." or ".." is refused. query and headers hold
// rendered values (entries whose template is exactly "{{x}}" with x absent
// are left out); encode query with url.Values (Target.URL does). body is the
// JSON-encoded RenderBody, nil when the request has no body template.
func (t *Tool) RenderRequest(args map[string]any) (method, path string, query, headers map[string]string, body []byte, err error) {
	r := t.Request
	if r == nil {
		return "", "", nil, nil, nil, fmt.Errorf("%w: tool %s has no request", ErrWrongChannel, t.Name)
	}
	path, err = renderPath(r.Path, args)
	if err != nil {
		return "", "", nil, nil, nil, err
	}
	if len(r.Query) > 0 {
		query = make(map[string]string, len(r.Query))
		for _, k := range slices.Sorted(maps.Keys(r.Query)) {
			v, ok, err := renderOptional(r.Query[k], args, nil)
			if err != nil {
				return "", "", nil, nil, nil, err
			}
			if ok {
				query[k] = v
			}
		}
	}
	if len(r.Headers) > 0 {
		headers = make(map[string]string, len(r.Headers))
		for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
			v, ok, err := renderOptional(r.Headers[k], args, nil)
			if err != nil {
				return "", "", nil, nil, nil, err
			}
			if !ok {
				continue
			}
			if strings.ContainsAny(v, "\r\n\x00") {
				return "", "", nil, nil, nil, argError("header %s: value contains a line break or NUL", k)
			}
			headers[k] = v
		}
	}
	if r.Body != nil {
		b, present, err := renderValue(r.Body, args, 0)
		if err != nil {
			return "", "", nil, nil, nil, err
		}
		if !present {
			// The whole body is "{{x}}" and x is absent: send no body.
			return r.Method, path, query, headers, nil, nil
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(b); err != nil {
			return "", "", nil, nil, nil, argError("body: %v", err)
		}
		body = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	return r.Method, path, query, headers, body, nil
}

// renderPath renders a path template element by element, escaping values.
func renderPath(tmpl string, args map[string]any) (string, error) {
	elems := strings.Split(tmpl, "/")
	for i, el := range elems {
		if !strings.Contains(el, "{{") {
			continue
		}
		out, err := render(el, args, url.PathEscape)
		if err != nil {
			return "", err
		}
		if out == "" || out == "." || out == ".." {
			return "", argError("path element %q renders to %q, which would change the path's structure", el, out)
		}
		elems[i] = out
	}
	return strings.Join(elems, "/"), nil
}

// URL joins the target's base_url with an escaped path (as RenderRequest
// returns it) and encodes query. The scheme and host always come from
// base_url.
func (tg *Target) URL(escapedPath string, query map[string]string) (*url.URL, error) {
	base, err := url.Parse(tg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("tools: target %s: base_url: %w", tg.Name, err)
	}
	if !strings.HasPrefix(escapedPath, "/") {
		return nil, fmt.Errorf("tools: target %s: path %q does not start with /", tg.Name, escapedPath)
	}
	raw := strings.TrimSuffix(base.EscapedPath(), "/") + escapedPath
	p, err := url.PathUnescape(raw)
	if err != nil {
		return nil, fmt.Errorf("tools: target %s: path %q: %w", tg.Name, escapedPath, err)
	}
	u := &url.URL{Scheme: base.Scheme, Host: base.Host, Path: p, RawPath: raw}
	if u.EscapedPath() != raw {
		return nil, fmt.Errorf("tools: target %s: path %q is not a valid escaped path", tg.Name, escapedPath)
	}
	if len(query) > 0 {
		q := url.Values{}
		for k, v := range query {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	return u, nil
}
