package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mustParse parses a catalog given inline and fails the test if refused.
func mustParse(tb testing.TB, src string) *Catalog {
	tb.Helper()
	cat, err := Parse("inline.yaml", []byte(src))
	if err != nil {
		tb.Fatalf("Parse: %v", err)
	}
	return cat
}

const renderCatalog = `
targets:
  api: {channel: http, base_url: "http://api.internal.test:7412/prefix", idempotency_header: Idempotency-Key, status: {path: "/s/{execution_id}"}}
  here: {channel: local, hostagent_socket: /run/latch.sock}
tools:
  get_item:
    input_schema:
      type: object
      required: [service]
      properties:
        service: {type: string}
        q: {type: string}
        n: {type: number}
        trace: {type: string}
    target: api
    request:
      method: GET
      path: "/v1/releases/{{service}}/x-{{ service }}"
      query: {q: "{{q}}", n: "{{n}}"}
      headers: {X-Trace: "{{trace}}"}
    replay: read_only
  post_item:
    input_schema:
      type: object
      required: [name]
      properties:
        name: {type: string}
        count: {type: integer}
        flag: {type: boolean}
        tags: {type: array, items: {type: string}}
        meta: {type: object}
        opt: {type: string}
    defaults: {count: 1}
    target: api
    request:
      method: POST
      path: /v1/items
      body:
        name: "{{name}}"
        count: "{{count}}"
        flag: "{{flag}}"
        tags: "{{tags}}"
        meta: "{{meta}}"
        opt: "{{opt}}"
        label: "n={{count}} f={{name}}"
        list: ["{{opt}}", "{{name}}", 7]
        fixed: {nested: true}
    replay: idempotency_key
  migrate:
    input_schema:
      type: object
      required: [version, dir]
      properties: {version: {type: string}, dir: {type: string}, level: {type: string}}
    target: here
    command: [/opt/migrate, "--to={{version}}", "{{version}}"]
    positional_after_double_dash: [version]
    cwd: "/srv/{{dir}}"
    env: {LEVEL: "{{level}}", FIXED: "v-{{version}}"}
    replay: status_query
`

func TestRenderRequestPath(t *testing.T) {
	tool := mustParse(t, renderCatalog).Tools["get_item"]
	tests := []struct {
		name     string
		service  any
		wantPath string
		wantErr  bool
	}{
		{name: "plain", service: "checkout", wantPath: "/v1/releases/checkout/x-checkout"},
		{name: "traversal", service: "../../admin", wantPath: "/v1/releases/..%2F..%2Fadmin/x-..%2F..%2Fadmin"},
		{name: "query and fragment", service: "a/b?x=y#z", wantPath: "/v1/releases/a%2Fb%3Fx=y%23z/x-a%2Fb%3Fx=y%23z"},
		{name: "percent", service: "%2e%2e", wantPath: "/v1/releases/%252e%252e/x-%252e%252e"},
		{name: "host injection", service: "//evil.example", wantPath: "/v1/releases/%2F%2Fevil.example/x-%2F%2Fevil.example"},
		{name: "space and unicode", service: "a b é", wantPath: "/v1/releases/a%20b%20%C3%A9/x-a%20b%20%C3%A9"},
		{name: "dot dot element", service: "..", wantErr: true},
		{name: "dot element", service: ".", wantErr: true},
		{name: "empty element", service: "", wantErr: true},
		{name: "number", service: float64(12), wantPath: "/v1/releases/12/x-12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, _, _, _, err := tool.RenderRequest(map[string]any{"service": tt.service})
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidArguments) {
					t.Fatalf("RenderRequest(service=%q) error = %v, want ErrInvalidArguments", tt.service, err)
				}
				return
			}
			if err != nil || path != tt.wantPath {
				t.Fatalf("RenderRequest(service=%q) path = %q, %v; want %q", tt.service, path, err, tt.wantPath)
			}
			u, err := (&Target{Name: "api", HTTPTarget: HTTPTarget{BaseURL: "http://api.internal.test:7412/prefix"}}).URL(path, nil)
			if err != nil {
				t.Fatalf("URL(%q): %v", path, err)
			}
			if u.Host != "api.internal.test:7412" || u.RawQuery != "" || u.Fragment != "" {
				t.Errorf("URL(%q) = %s: an argument changed host, query or fragment", path, u)
			}
			if want := "http://api.internal.test:7412/prefix" + tt.wantPath; u.String() != want {
				t.Errorf("URL(%q) = %s, want %s", path, u, want)
			}
		})
	}
}

func TestRenderRequestQueryHeaders(t *testing.T) {
	tool := mustParse(t, renderCatalog).Tools["get_item"]
	method, _, query, headers, body, err := tool.RenderRequest(map[string]any{"service": "s", "q": "a&b=c", "n": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	if method != "GET" || body != nil {
		t.Errorf("method %q body %q, want GET and no body", method, body)
	}
	if diff := cmp.Diff(map[string]string{"q": "a&b=c", "n": "1.5"}, query); diff != "" {
		t.Errorf("query (-want +got):\n%s", diff)
	}
	if len(headers) != 0 {
		t.Errorf("headers = %v, want none (trace absent)", headers)
	}
	u, err := (&Target{Name: "api", HTTPTarget: HTTPTarget{BaseURL: "http://api.internal.test:7412"}}).URL("/x", query)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Query().Get("q"); got != "a&b=c" || len(u.Query()) != 2 {
		t.Errorf("URL query = %q, want q=a&b=c kept as one value", u.RawQuery)
	}
	_, _, _, _, _, err = tool.RenderRequest(map[string]any{"service": "s", "trace": "x\r\nEvil: 1"})
	if !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("header with CRLF: error = %v, want ErrInvalidArguments", err)
	}
}

func TestRenderBody(t *testing.T) {
	tool := mustParse(t, renderCatalog).Tools["post_item"]
	args, err := tool.PrepareArguments(json.RawMessage(`{"name":"w\"x","flag":false,"tags":["a","b"],"meta":{"k":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tool.RenderBody(args)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"name": `w"x`, "count": float64(1), "flag": false, "tags": []any{"a", "b"}, "meta": map[string]any{"k": float64(1)},
		"label": `n=1 f=w"x`, "list": []any{nil, `w"x`, int64(7)}, "fixed": map[string]any{"nested": true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RenderBody (-want +got):\n%s", diff)
	}
	_, _, _, _, body, err := tool.RenderRequest(args)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string]any
	if err := json.Unmarshal(body, &decoded); err != nil {
		t.Fatalf("body %s is not JSON: %v", body, err)
	}
	if decoded["name"] != `w"x` || decoded["label"] != `n=1 f=w"x` {
		t.Errorf("body %s: a quote in an argument broke out of its string", body)
	}
	// The template is not modified by rendering.
	if tool.Request.Body.(map[string]any)["name"] != "{{name}}" {
		t.Error("RenderBody modified the template")
	}
}

func TestRenderCommand(t *testing.T) {
	tool := mustParse(t, renderCatalog).Tools["migrate"]
	argv, cwd, env, err := tool.RenderCommand(map[string]any{"version": "1; rm -rf / $(id)", "dir": "app"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/opt/migrate", "--to=1; rm -rf / $(id)", "--", "1; rm -rf / $(id)"}, argv); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	if cwd != "/srv/app" {
		t.Errorf("cwd = %q, want /srv/app", cwd)
	}
	if diff := cmp.Diff(map[string]string{"FIXED": "v-1; rm -rf / $(id)"}, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	for _, args := range []map[string]any{
		{"version": "a\x00b", "dir": "x"},
		{"dir": "x"},
	} {
		if _, _, _, err := tool.RenderCommand(args); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("RenderCommand(%q) error = %v, want ErrInvalidArguments", args, err)
		}
	}
	if _, _, _, _, _, err := tool.RenderRequest(nil); !errors.Is(err, ErrWrongChannel) {
		t.Errorf("RenderRequest on a command tool: %v, want ErrWrongChannel", err)
	}
	if _, err := mustParse(t, renderCatalog).Tools["get_item"].RenderArgv(nil); !errors.Is(err, ErrWrongChannel) {
		t.Errorf("RenderArgv on an HTTP tool: %v, want ErrWrongChannel", err)
	}
}

func TestRenderString(t *testing.T) {
	var tool Tool
	tests := []struct {
		tmpl    string
		args    map[string]any
		want    string
		wantErr bool
	}{
		{tmpl: "plain", want: "plain"},
		{tmpl: "{{a}}", args: map[string]any{"a": "x"}, want: "x"},
		{tmpl: "{{ a }}-{{b}}", args: map[string]any{"a": 1.0, "b": true}, want: "1-true"},
		{tmpl: "{{a}}", args: map[string]any{"a": 1e21}, want: "1e+21"},
		{tmpl: "{{a}}", args: map[string]any{"a": nil}, want: "null"},
		{tmpl: "{{a}}", args: map[string]any{"a": []any{"<&>"}}, want: `["<&>"]`},
		{tmpl: "{{a}}", args: map[string]any{"a": "{{b}}", "b": "no"}, want: "{{b}}"},
		{tmpl: "{a} }} {x}", want: "{a} }} {x}"},
		{tmpl: "{{a}}", wantErr: true},
		{tmpl: "{{a.b}}", args: map[string]any{"a": "x"}, wantErr: true},
		{tmpl: "{{a", args: map[string]any{"a": "x"}, wantErr: true},
		{tmpl: "{{}}", wantErr: true},
	}
	for _, tt := range tests {
		got, err := tool.RenderString(tt.tmpl, tt.args)
		if tt.wantErr {
			if !errors.Is(err, ErrInvalidArguments) {
				t.Errorf("RenderString(%q, %v) = %q, %v; want ErrInvalidArguments", tt.tmpl, tt.args, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("RenderString(%q, %v) = %q, %v; want %q", tt.tmpl, tt.args, got, err, tt.want)
		}
	}
}

func TestTargetURL(t *testing.T) {
	tests := []struct {
		base, path string
		query      map[string]string
		want       string
		wantErr    bool
	}{
		{base: "http://h:1", path: "/a/b", want: "http://h:1/a/b"},
		{base: "http://h:1/", path: "/a", want: "http://h:1/a"},
		{base: "https://h/api/v2/", path: "/x%2Fy", want: "https://h/api/v2/x%2Fy"},
		{base: "http://h", path: "/a", query: map[string]string{"b": "2", "a": "x y&z"}, want: "http://h/a?a=x+y%26z&b=2"},
		{base: "http://h", path: "a", wantErr: true},
		{base: "http://h", path: "/%zz", wantErr: true},
	}
	for _, tt := range tests {
		u, err := (&Target{Name: "t", HTTPTarget: HTTPTarget{BaseURL: tt.base}}).URL(tt.path, tt.query)
		if tt.wantErr {
			if err == nil {
				t.Errorf("URL(%q, %q) = %s, want an error", tt.base, tt.path, u)
			}
			continue
		}
		if err != nil || u.String() != tt.want {
			t.Errorf("URL(%q, %q) = %v, %v; want %s", tt.base, tt.path, u, err, tt.want)
		}
	}
}

func TestRenderRequestWholeBodyAbsent(t *testing.T) {
	cat := mustParse(t, `
targets:
  api: {channel: http, base_url: "http://api.internal.test"}
tools:
  put:
    input_schema: {type: object, properties: {doc: {type: object}}}
    target: api
    request: {method: PUT, path: /doc, body: "{{doc}}"}
    replay: review
`)
	tool := cat.Tools["put"]
	if _, _, _, _, body, err := tool.RenderRequest(map[string]any{}); err != nil || body != nil {
		t.Errorf("RenderRequest without doc: body %q, %v; want no body", body, err)
	}
	if _, _, _, _, body, err := tool.RenderRequest(map[string]any{"doc": map[string]any{"a": "<b>"}}); err != nil || string(body) != `{"a":"<b>"}` {
		t.Errorf("RenderRequest with doc: body %s, %v; want {\"a\":\"<b>\"}", body, err)
	}
	if got := cat.ToolNames(); !cmp.Equal(got, []string{"put"}) {
		t.Errorf("ToolNames() = %v", got)
	}
	if tg := cat.TargetOf(tool); tg == nil || tg.Name != "api" {
		t.Errorf("TargetOf(put) = %v, want api", tg)
	}
}

const cwdCatalog = `
targets:
  here: {channel: local, hostagent_socket: /run/latch.sock}
tools:
  build:
    input_schema:
      type: object
      required: [app, env]
      properties: {app: {type: string}, env: {type: string}}
    target: here
    command: [/usr/bin/make]
    cwd: "/srv/apps/{{app}}/env-{{env}}"
    replay: status_query
  two:
    input_schema:
      type: object
      required: [a, b]
      properties: {a: {type: string}, b: {}}
    target: here
    command: [/usr/bin/make]
    cwd: "/srv/x{{a}}/{{a}}{{b}}"
    replay: status_query
`

// TestRenderCwdStaysUnderPrefix: arguments choose a directory under the
// cwd's literal prefix, never a way out of it.
func TestRenderCwdStaysUnderPrefix(t *testing.T) {
	cat := mustParse(t, cwdCatalog)
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		want    string
		wantErr string
	}{
		{name: "plain", tool: "build", args: map[string]any{"app": "shop", "env": "prod"}, want: "/srv/apps/shop/env-prod"},
		{name: "dots inside a name", tool: "build", args: map[string]any{"app": "v1.2..3", "env": "a.b"}, want: "/srv/apps/v1.2..3/env-a.b"},
		{name: "dotdot", tool: "build", args: map[string]any{"app": "..", "env": "prod"}, wantErr: `renders to ".."`},
		{name: "dot", tool: "build", args: map[string]any{"app": ".", "env": "prod"}, wantErr: `renders to "."`},
		{name: "empty", tool: "build", args: map[string]any{"app": "", "env": "prod"}, wantErr: `renders to ""`},
		{name: "slash", tool: "build", args: map[string]any{"app": "../../etc", "env": "prod"}, wantErr: `argument "app" is used in cwd`},
		{name: "absolute", tool: "build", args: map[string]any{"app": "/etc", "env": "prod"}, wantErr: `may not contain "/"`},
		{name: "NUL", tool: "build", args: map[string]any{"app": "a\x00b", "env": "prod"}, wantErr: `NUL`},
		{name: "dot then dot makes dotdot", tool: "two", args: map[string]any{"a": ".", "b": "."}, wantErr: `renders to ".."`},
		{name: "non-string value", tool: "two", args: map[string]any{"a": "q", "b": []any{"/", "x"}}, wantErr: `argument "b"`},
		{name: "number", tool: "two", args: map[string]any{"a": "q", "b": 1.5}, want: "/srv/xq/q1.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cwd, _, err := cat.Tools[tt.tool].RenderCommand(tt.args)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RenderCommand(%q) = %q, %v; want ErrInvalidArguments containing %q", tt.args, cwd, err, tt.wantErr)
				}
				return
			}
			if err != nil || cwd != tt.want {
				t.Fatalf("RenderCommand(%q) cwd = %q, %v; want %q", tt.args, cwd, err, tt.want)
			}
		})
	}
}

// TestRenderCwdLiteralEscape: a catalog whose literal text walks out of its
// own prefix is caught at render time too.
func TestRenderCwdLiteralEscape(t *testing.T) {
	tool := &Tool{Name: "t", CommandAction: CommandAction{Command: []string{"/bin/true"}, Cwd: "/srv/{{a}}/../../etc"}}
	if _, cwd, _, err := tool.RenderCommand(map[string]any{"a": "x"}); !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "not under /srv") {
		t.Fatalf("RenderCommand = %q, %v; want refused as not under /srv", cwd, err)
	}
}

func TestSecretValues(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args map[string]any
		want []string
	}{
		{name: "inside a longer value", env: map[string]string{"AUTH": "Bearer {{token}}"}, args: map[string]any{"token": "s3cr3t-value"}, want: []string{"s3cr3t-value"}},
		{name: "alone and inside, once", env: map[string]string{"AUTH": "Bearer {{token}}", "TOKEN": "{{ token }}"}, args: map[string]any{"token": "s3cr3t-value"}, want: []string{"s3cr3t-value"}},
		{name: "not a secret", env: map[string]string{"HELLO": "hi {{greeting}}"}, args: map[string]any{"greeting": "hello there"}},
		{name: "two secrets in one value", env: map[string]string{"DSN": "u={{user}} p={{token}} u2={{user}}"}, args: map[string]any{"user": "admin-user", "token": "pw-123456"}, want: []string{"admin-user", "pw-123456"}},
		{name: "number: decimal and JSON forms", env: map[string]string{"PIN": "pin={{token}}"}, args: map[string]any{"token": 1e21}, want: []string{"1000000000000000000000", "1e+21"}},
		{name: "object: its leaves", env: map[string]string{"CRED": "{{token}}"}, args: map[string]any{"token": map[string]any{"key": "key-abcdef", "n": []any{"leaf-12345"}}}, want: []string{"key-abcdef", "leaf-12345"}},
		{name: "a string JSON escapes: both forms", env: map[string]string{"CRED": "{{token}}"}, args: map[string]any{"token": map[string]any{"pw": "pa\"ss\\word\n"}}, want: []string{"pa\"ss\\word\n", `pa\"ss\\word\n`}},
		{name: "absent optional argument", env: map[string]string{"TOKEN": "{{token}}"}, args: map[string]any{}},
		{name: "no env", args: map[string]any{"token": "s3cr3t-value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := &Tool{CommandAction: CommandAction{Env: tt.env}, Fingerprint: Fingerprint{Secret: []string{"token", "user"}}}
			if diff := cmp.Diff(tt.want, tool.SecretValues(tt.args)); diff != "" {
				t.Errorf("SecretValues (-want +got):\n%s", diff)
			}
		})
	}
}
