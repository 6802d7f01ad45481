package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPatternNoLeadingDash(t *testing.T) {
	tests := []struct {
		pattern string
		want    bool
	}{
		{`^[0-9]{1,14}$`, true},
		{`^[A-Za-z0-9][A-Za-z0-9._-]*$`, true},
		{`^v[0-9]+`, true},
		{`\A[a-z]`, true},
		{`^(?:main|release/[0-9.]+)$`, true},
		{`^([a-z]+)-[0-9]$`, true},
		{`^[a-z]+|^[0-9]+`, true},
		{`^\w`, true},
		{`^(?i)abc`, true},
		{`[a-z]+`, false},        // unanchored: matches "-x"
		{`(?m)^[a-z]`, false},    // ^ is a line start: matches "-x\na"
		{`^[a-z]?`, false},       // may match nothing first
		{`^[a-z]*`, false},       // may match ""
		{`^.`, false},            // any character, "-" included
		{`^[^a-z]`, false},       // negated class holds "-"
		{`^[+-]?[0-9]+$`, false}, // optional sign
		{`^-`, false},            // starts with "-"
		{`^[a\-z]`, false},       // "-" in the class
		{`^[,-.]`, false},        // "-" inside a range
		{`^[a-z]+|[0-9]`, false}, // one alternative unanchored
		{`^$`, false},            // only ""
		{`^(?:)a`, true},         // empty group then a: Simplify drops it
		{`^(a|b?)`, false},       // one branch may be empty
		{`^\s`, true},            // whitespace is not "-"
		{`^[`, false},            // not a pattern
		{`^\p{L}`, true},         // letters
		{`^\PL`, false},          // non-letters include "-"
	}
	for _, tt := range tests {
		if got := patternNoLeadingDash(tt.pattern); got != tt.want {
			t.Errorf("patternNoLeadingDash(%q) = %v, want %v", tt.pattern, got, tt.want)
		}
	}
}

const optionCatalogHead = `
targets:
  here: {channel: local, hostagent_socket: /run/latch.sock}
tools:
  t:
    input_schema:
      type: object
      required: [file, ver, mode, n, neg, pos, mixed]
      properties:
        file: {type: string}
        ver: {type: string, pattern: "^[0-9]+$"}
        loose: {type: [string, number], pattern: "^[0-9]+$"}
        mode: {enum: [fast, safe]}
        signed: {enum: [up, -down]}
        n: {type: integer, minimum: 0}
        neg: {type: integer, minimum: -1}
        pos: {type: number, exclusiveMinimum: 0}
        mixed: {type: [integer, string], minimum: 0}
    target: here
    replay: status_query
`

// TestOptionArgumentsAtLoad: a command element that begins with an argument
// is refused unless the value cannot become an option.
func TestOptionArgumentsAtLoad(t *testing.T) {
	tests := []struct {
		name    string
		tool    string // lines appended to tool t
		wantErr string // "" means loaded
	}{
		{name: "joined to its option", tool: `command: [/bin/rm, "--file={{file}}"]`},
		{name: "pattern proves it", tool: `command: [/opt/migrate, "{{ver}}"]`},
		{name: "enum proves it", tool: `command: [/opt/run, "{{mode}}"]`},
		{name: "literal double dash before it", tool: `command: [/bin/rm, -f, "--", "{{file}}"]`},
		{name: "declared positional", tool: "command: [/bin/rm, -f, \"{{file}}\"]\n    positional_after_double_dash: [file]"},
		{name: "suffix after the reference", tool: `command: [/bin/cat, "{{file}}.txt"]`, wantErr: `command[1] "{{file}}.txt": a value of file starting with "-"`},
		{name: "bare string", tool: `command: [/bin/rm, "{{file}}"]`, wantErr: `list file in positional_after_double_dash`},
		{name: "pattern but not only strings", tool: "command: [/bin/x, \"{{loose}}\"]\n    defaults: {loose: \"1\"}", wantErr: `command[1] "{{loose}}"`},
		{name: "enum with a dash value", tool: "command: [/bin/x, \"{{signed}}\"]\n    defaults: {signed: up}", wantErr: `command[1] "{{signed}}"`},
		{name: "integer with a non-negative minimum proves it", tool: `command: [/bin/x, "{{n}}"]`},
		{name: "integer with a negative minimum is not proof", tool: `command: [/bin/x, "{{neg}}"]`, wantErr: `command[1] "{{neg}}"`},
		{name: "integer with a non-negative exclusive minimum proves it", tool: `command: [/bin/x, "{{pos}}"]`},
		{name: "integer or string with a minimum is not proof", tool: `command: [/bin/x, "{{mixed}}"]`, wantErr: `command[1] "{{mixed}}"`},
		{name: "after a literal double dash anything goes", tool: `command: [/bin/x, "--", "{{n}}", "{{file}}"]`},
		{name: "option after the inserted dash", tool: "command: [/bin/rm, \"{{file}}\", -f]\n    positional_after_double_dash: [file]", wantErr: `command[2] "-f" comes after the "--" Latch inserts before command[1]`},
		{name: "both literal and declared", tool: "command: [/bin/rm, \"--\", \"{{file}}\"]\n    positional_after_double_dash: [file]", wantErr: `keep one`},
		{name: "declared but unused", tool: "command: [/bin/rm, \"--file={{file}}\"]\n    positional_after_double_dash: [file]", wantErr: `no command element begins with {{file}}`},
		{name: "declared unknown", tool: "command: [/bin/rm, \"--file={{file}}\"]\n    positional_after_double_dash: [nope]", wantErr: `"nope" is not a property of input_schema`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("inline.yaml", []byte(optionCatalogHead+"    "+tt.tool+"\n"))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Parse = %v, want loaded", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPositionalAfterDoubleDashNotForHTTP(t *testing.T) {
	_, err := Parse("inline.yaml", []byte(`
targets:
  api: {channel: http, base_url: "http://api.internal.test:7412"}
tools:
  t:
    target: api
    request: {method: GET, path: /x}
    positional_after_double_dash: [a]
    replay: read_only
`))
	if err == nil || !strings.Contains(err.Error(), "positional_after_double_dash does not apply to HTTP tools") {
		t.Fatalf("Parse = %v, want positional_after_double_dash refused for an HTTP tool", err)
	}
}

// TestOptionArgumentsAtRender: Latch inserts "--" for declared positional
// arguments, and refuses a value that would become an option wherever no
// "--" precedes it, whatever the catalog says.
func TestOptionArgumentsAtRender(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		pos     []string
		args    map[string]any
		want    []string
		wantErr string
	}{
		{name: "inserted before the first positional", command: []string{"/bin/rm", "-f", "{{a}}", "{{b}}"}, pos: []string{"a"},
			args: map[string]any{"a": "-rf", "b": "--no-preserve-root"}, want: []string{"/bin/rm", "-f", "--", "-rf", "--no-preserve-root"}},
		{name: "inserted even for plain values", command: []string{"/bin/rm", "{{a}}"}, pos: []string{"a"},
			args: map[string]any{"a": "x"}, want: []string{"/bin/rm", "--", "x"}},
		{name: "literal dash", command: []string{"/bin/rm", "--", "{{a}}"},
			args: map[string]any{"a": "-rf"}, want: []string{"/bin/rm", "--", "-rf"}},
		{name: "option joined", command: []string{"/bin/x", "--to={{a}}"},
			args: map[string]any{"a": "-1"}, want: []string{"/bin/x", "--to=-1"}},
		{name: "value becomes an option", command: []string{"/bin/x", "{{a}}"},
			args: map[string]any{"a": "--force"}, wantErr: `argument "a": the value starts with "-"`},
		{name: "number becomes an option", command: []string{"/bin/x", "{{a}}"},
			args: map[string]any{"a": -1.0}, wantErr: `argument "a": the value starts with "-"`},
		{name: "negative zero becomes an option", command: []string{"/bin/x", "{{a}}"},
			args: map[string]any{"a": json.Number("-0")}, wantErr: `argument "a": the value starts with "-"`},
		{name: "empty first then dash", command: []string{"/bin/x", "{{a}}{{b}}"},
			args: map[string]any{"a": "", "b": "-x"}, wantErr: `argument "a", "b"`},
		{name: "dash before the inserted one", command: []string{"/bin/x", "{{b}}", "{{a}}"}, pos: []string{"a"},
			args: map[string]any{"a": "x", "b": "-x"}, wantErr: `argument "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := &Tool{Name: "t", CommandAction: CommandAction{Command: tt.command, PositionalAfterDoubleDash: tt.pos}}
			argv, err := tool.RenderArgv(tt.args)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RenderArgv(%v) = %q, %v; want ErrInvalidArguments containing %q", tt.args, argv, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("RenderArgv(%v): %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, argv); diff != "" {
				t.Errorf("RenderArgv(%v) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// TestPrepareArgumentsRefusesUnrenderable: values the command templates
// refuse are refused by PrepareArguments, the step before anything is
// stored, not only at dispatch.
func TestPrepareArgumentsRefusesUnrenderable(t *testing.T) {
	cat := mustParse(t, `
targets:
  here: {channel: local, hostagent_socket: /run/latch.sock}
tools:
  build:
    input_schema:
      type: object
      required: [app, file]
      properties: {app: {type: string}, file: {type: string}}
    target: here
    command: [/usr/bin/make, -C, "/srv/{{app}}", "{{file}}"]
    positional_after_double_dash: [file]
    cwd: "/srv/apps/{{app}}"
    replay: status_query
`)
	tool := cat.Tools["build"]
	if _, err := tool.PrepareArguments([]byte(`{"app":"shop","file":"-rf"}`)); err != nil {
		t.Fatalf("PrepareArguments(positional -rf) = %v, want accepted (it follows --)", err)
	}
	for _, raw := range []string{`{"app":"..","file":"x"}`, `{"app":"a/../../etc","file":"x"}`} {
		if _, err := tool.PrepareArguments([]byte(raw)); !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "cwd") {
			t.Errorf("PrepareArguments(%s) = %v, want refused naming cwd", raw, err)
		}
	}
}

func TestPlainSSHRefusesSecretEnv(t *testing.T) {
	const head = `
targets:
  plain: {channel: ssh, address: "db.internal:22", user: deploy, host_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"%s}
tools:
  t:
    input_schema: {type: object, required: [token], properties: {token: {type: string}}}
    target: plain
    command: [/opt/run]
    env: {TOKEN: "{{token}}"}
    replay: review
    fingerprint: {secret: [token]}
`
	_, err := Parse("inline.yaml", []byte(fmt.Sprintf(head, "")))
	if err == nil || !strings.Contains(err.Error(), "secret argument token must not appear in env.TOKEN: target plain is plain SSH") {
		t.Fatalf("Parse(plain SSH, secret in env) = %v, want refused", err)
	}
	if _, err := Parse("inline.yaml", []byte(fmt.Sprintf(head, ", hostagent_socket: /run/latch.sock"))); err != nil {
		t.Fatalf("Parse(host agent, secret in env) = %v, want loaded", err)
	}
}
