package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/tools/examples"
)

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	files = append(files, "testdata/good.yaml", "testdata/good_upstreams.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(examples.Catalog)
	f.Add([]byte("a: &x [*x, *x]\ntools: *x\n"))
	f.Add([]byte("tools: &t {a: *t}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cat, err := Parse("fuzz.yaml", data)
		if err != nil {
			var le *LoadError
			if cat != nil || !errors.As(err, &le) || !errors.Is(err, ErrInvalid) || len(le.Problems) == 0 {
				t.Fatalf("Parse = %v, %v (%T); want nil and a non-empty *LoadError", cat, err, err)
			}
			for _, p := range le.Problems {
				if p.File != "fuzz.yaml" || p.Msg == "" || p.Line < 0 {
					t.Fatalf("bad problem %+v", p)
				}
			}
			return
		}
		if cat == nil || len(cat.Tools) == 0 {
			t.Fatalf("Parse returned %v with no error", cat)
		}
		for _, tool := range cat.Tools {
			if tg := cat.Targets[tool.Target]; tg == nil {
				t.Fatalf("tool %s names missing target %q", tool.Name, tool.Target)
			}
			var schema map[string]any
			if err := json.Unmarshal(tool.MCPInputSchema(), &schema); err != nil {
				t.Fatalf("tool %s: MCPInputSchema is not JSON: %v", tool.Name, err)
			}
			args, err := tool.PrepareArguments(json.RawMessage(`{}`))
			if err != nil {
				continue
			}
			if tool.Request != nil {
				_, _, _, _, _, _ = tool.RenderRequest(args)
			} else {
				_, _, _, _ = tool.RenderCommand(args)
			}
		}
	})
}

const fuzzRenderCatalog = `
targets:
  api: {channel: http, base_url: "http://api.internal.test:7412/base"}
  here: {channel: local, hostagent_socket: /run/latch.sock}
tools:
  http:
    input_schema:
      type: object
      required: [a, b]
      properties: {a: {type: string}, b: {}}
    target: api
    request:
      method: POST
      path: "/v1/{{a}}/x/{{b}}-{{a}}"
      query: {q: "{{a}}"}
      body: {a: "{{a}}", b: "{{b}}", s: "<{{a}}|{{b}}>"}
    replay: review
  cmd:
    input_schema:
      type: object
      required: [a, b]
      properties: {a: {type: string}, b: {}}
    target: here
    command: [/bin/echo, "--b={{b}}", "{{a}}"]
    positional_after_double_dash: [a]
    cwd: "/srv/x/{{a}}"
    replay: review
`

func FuzzRender(f *testing.F) {
	cat := mustParse(f, fuzzRenderCatalog)
	for _, seed := range [][2]string{
		{"x", `"y"`}, {"../../admin", `1`}, {"a/b?x=y#z", `{"k":[1,2]}`}, {"..", `null`},
		{"", `true`}, {"%2e%2e", `"{{a}}"`}, {"//evil:80@h", `"\u0000"`}, {"a\r\nb", `1e300`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, bJSON string) {
		b, err := decodeJSON([]byte(bJSON))
		if err != nil {
			return
		}
		args := map[string]any{"a": a, "b": b}
		http := cat.Tools["http"]
		_, path, query, _, body, err := http.RenderRequest(args)
		if err == nil {
			u, err := cat.Targets["api"].URL(path, query)
			if err != nil {
				t.Fatalf("URL(%q): %v", path, err)
			}
			if u.Host != "api.internal.test:7412" || u.Scheme != "http" || u.Fragment != "" {
				t.Fatalf("argument changed the URL: %s", u)
			}
			if got := strings.Count(u.EscapedPath(), "/"); got != 5 {
				t.Fatalf("path %q has %d elements, want 5", u.EscapedPath(), got)
			}
			elems := strings.Split(u.EscapedPath(), "/")
			if v, err := url.PathUnescape(elems[3]); err != nil || v != a {
				t.Fatalf("path element %q unescapes to %q, want %q", elems[3], v, a)
			}
			if u.Query().Get("q") != a {
				t.Fatalf("query q = %q, want %q", u.Query().Get("q"), a)
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %q is not JSON: %v", body, err)
			}
			if got["a"] != a && strings.ToValidUTF8(a, "\uFFFD") == a {
				t.Fatalf("body a = %q, want %q", got["a"], a)
			}
		} else if !errors.Is(err, ErrInvalidArguments) {
			t.Fatalf("RenderRequest error %v does not wrap ErrInvalidArguments", err)
		}
		argv, err := cat.Tools["cmd"].RenderArgv(args)
		if err == nil {
			if len(argv) != 4 || argv[2] != "--" || argv[3] != a {
				t.Fatalf("argv = %q: an argument changed the argv shape", argv)
			}
		} else if !errors.Is(err, ErrInvalidArguments) {
			t.Fatalf("RenderArgv error %v does not wrap ErrInvalidArguments", err)
		}
		if _, cwd, _, err := cat.Tools["cmd"].RenderCommand(args); err == nil {
			if cwd != "/srv/x/"+a || filepath.Clean(cwd) != cwd || strings.Count(cwd, "/") != 3 {
				t.Fatalf("cwd = %q for a = %q: an argument left /srv/x or added elements", cwd, a)
			}
		} else if !errors.Is(err, ErrInvalidArguments) {
			t.Fatalf("RenderCommand error %v does not wrap ErrInvalidArguments", err)
		}
		// A hand-built tool skips the load rule; the render rule still holds.
		bare := &Tool{Name: "bare", CommandAction: CommandAction{Command: []string{"/bin/echo", "{{a}}", "x{{a}}"}}}
		argv, err = bare.RenderArgv(args)
		switch {
		case err == nil && (len(argv) != 3 || argv[1] != a || strings.HasPrefix(argv[1], "-")):
			t.Fatalf("bare argv = %q for a = %q: a value became an option or changed the shape", argv, a)
		case err != nil && !strings.HasPrefix(a, "-") && !strings.Contains(a, "\x00"):
			t.Fatalf("bare RenderArgv(a = %q) = %v, want accepted", a, err)
		}
	})
}

// FuzzCheckRawArguments compares the raw-argument check with the
// fingerprint's strict RFC 8785 parser, written independently: both must
// agree on every input, except where they are meant to differ (numbers out
// of double range are the decoder's business here; the nesting bounds count
// alike). Whatever the check accepts, encoding/json decodes to a value that
// re-encodes to an accepted text with the same canonical form.
func FuzzCheckRawArguments(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`,
		"{\"a\":\"\xff\"}", `{"a":[{"b":1,"b":2}]}`, `{"a":1e400}`, `[1,2,3]`, `"x"`, `{"a":-0.0e-0}`,
		`{"a":"\u0000\"\\\/\b\f\n\r\t"}`, ` {"a" : [ ] , "b" : { } } `, `{"a":01}`, `{"a":1.}`, `{"a":tru}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckRawArguments(data)
		_, ferr := fingerprint.Canonicalize(data)
		if err != nil && !errors.Is(err, ErrInvalidArguments) {
			t.Fatalf("CheckRawArguments(%q) = %v, not an ErrInvalidArguments", data, err)
		}
		if err != nil && ferr == nil {
			t.Fatalf("CheckRawArguments(%q) = %v, but the JCS parser accepts it", data, err)
		}
		if err == nil && ferr != nil && !errors.Is(ferr, fingerprint.ErrNumberRange) {
			t.Fatalf("CheckRawArguments(%q) accepted it, but the JCS parser refuses: %v", data, ferr)
		}
		if err != nil || ferr != nil {
			return
		}
		v, derr := decodeJSON(data)
		if derr != nil {
			// Only numbers encoding/json cannot hold exactly may fail here.
			if !strings.Contains(derr.Error(), "number") && !strings.Contains(derr.Error(), "integer") {
				t.Fatalf("decodeJSON(%q) = %v after the check accepted it", data, derr)
			}
			return
		}
		again, merr := json.Marshal(v)
		if merr != nil {
			t.Fatalf("json.Marshal(decoded %q) = %v", data, merr)
		}
		if err := CheckRawArguments(again); err != nil {
			t.Fatalf("re-encoded %q (from %q) is refused: %v", again, data, err)
		}
		c1, _ := fingerprint.Canonicalize(data)
		c2, err := fingerprint.Canonicalize(again)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("decoding changed the value: %q canonicalises to %q, its decoded form to %q (%v)", data, c1, c2, err)
		}
	})
}

// FuzzPatternNoLeadingDash checks the proof is sound: a pattern it accepts
// never matches a string that is empty or starts with "-".
func FuzzPatternNoLeadingDash(f *testing.F) {
	for _, s := range [][2]string{
		{`^[0-9]+$`, "-1"}, {`^[a-z]`, "-a"}, {`^(?:a|b)`, "-"}, {`^\w+`, "-x"}, {`(?m)^a`, "-\na"},
		{`^[a-z]+|^[0-9]+`, "-9"}, {`^(?:)x`, ""}, {`^\p{L}`, "-é"}, {`^a{1,3}`, "-aaa"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if !patternNoLeadingDash(pattern) {
			return
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			t.Fatalf("patternNoLeadingDash(%q) = true for a pattern Go cannot compile: %v", pattern, err)
		}
		for _, v := range []string{s, "-" + s, "-"} {
			if re.MatchString(v) && (v == "" || v[0] == '-') {
				t.Fatalf("patternNoLeadingDash(%q) = true, but it matches %q", pattern, v)
			}
		}
	})
}
