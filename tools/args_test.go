package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const argsCatalog = `
targets:
  api: {channel: http, base_url: "http://api.internal.test:7412", idempotency_header: Idempotency-Key}
tools:
  deploy:
    input_schema:
      type: object
      required: [service, version]
      additionalProperties: false
      properties:
        service: {type: string, pattern: "^[a-z]+$"}
        version: {type: string}
        region: {type: string, enum: [us-east-1, eu-west-1]}
        replicas: {type: integer, minimum: 1, default: 2}
        labels: {type: array, items: {type: string}}
    defaults: {region: us-east-1, labels: [web]}
    target: api
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}"}}
    replay: idempotency_key
  status:
    input_schema:
      type: object
      properties: {service: {type: string}}
    target: api
    request: {method: GET, path: /v1/status}
    replay: read_only
`

func TestPrepareArguments(t *testing.T) {
	cat := mustParse(t, argsCatalog)
	tests := []struct {
		name    string
		tool    string
		raw     string
		want    map[string]any
		wantErr string // substring of the message; "" means success
	}{
		{name: "defaults materialised", tool: "deploy", raw: `{"service":"api","version":"1.0"}`,
			want: map[string]any{"service": "api", "version": "1.0", "region": "us-east-1", "replicas": 2.0, "labels": []any{"web"}}},
		{name: "given values win", tool: "deploy", raw: `{"service":"api","version":"1.0","region":"eu-west-1","replicas":5,"labels":[]}`,
			want: map[string]any{"service": "api", "version": "1.0", "region": "eu-west-1", "replicas": 5.0, "labels": []any{}}},
		{name: "repeat_of kept", tool: "deploy", raw: `{"service":"api","version":"1","repeat_of":"act_01J"}`,
			want: map[string]any{"service": "api", "version": "1", "region": "us-east-1", "replicas": 2.0, "labels": []any{"web"}, "repeat_of": "act_01J"}},
		{name: "empty input", tool: "status", raw: ``, want: map[string]any{}},
		{name: "null input", tool: "status", raw: ` null `, want: map[string]any{}},
		{name: "missing required", tool: "deploy", raw: `{"service":"api"}`, wantErr: `missing required argument "version" (string)`},
		{name: "wrong type", tool: "deploy", raw: `{"service":"api","version":1}`, wantErr: `argument version must be a string, not an integer`},
		{name: "pattern", tool: "deploy", raw: `{"service":"API","version":"1"}`, wantErr: `argument service must match the pattern "^[a-z]+$"`},
		{name: "enum", tool: "deploy", raw: `{"service":"api","version":"1","region":"mars"}`, wantErr: `argument region must be one of: us-east-1 eu-west-1`},
		{name: "minimum", tool: "deploy", raw: `{"service":"api","version":"1","replicas":0}`, wantErr: `argument replicas: minimum`},
		{name: "not integer", tool: "deploy", raw: `{"service":"api","version":"1","replicas":1.5}`, wantErr: `argument replicas must be an integer, not a number`},
		{name: "unknown argument", tool: "deploy", raw: `{"service":"api","version":"1","force":true}`, wantErr: `unknown argument "force"; deploy takes labels, region, replicas, service, version, repeat_of`},
		{name: "array", tool: "deploy", raw: `[1,2]`, wantErr: `must be a JSON object, got an array`},
		{name: "string", tool: "deploy", raw: `"x"`, wantErr: `must be a JSON object, got a string`},
		{name: "bad json", tool: "deploy", raw: `{"service":`, wantErr: `not valid JSON`},
		{name: "trailing data", tool: "deploy", raw: `{"service":"api","version":"1"} {}`, wantErr: `unexpected data after`},
		{name: "huge integer", tool: "deploy", raw: `{"service":"api","version":"1","replicas":9007199254740993}`, wantErr: `argument replicas: integer 9007199254740993 is too large`},
		{name: "out of range", tool: "deploy", raw: `{"service":"api","version":"1","replicas":1e400}`, wantErr: `out of range`},
		{name: "repeat_of on read_only", tool: "status", raw: `{"repeat_of":"act_01J"}`, wantErr: `argument "repeat_of": tool status is read-only`},
		{name: "repeat_of not a string", tool: "deploy", raw: `{"service":"api","version":"1","repeat_of":7}`, wantErr: `argument "repeat_of": must be the execution ID`},
		{name: "repeat_of empty", tool: "deploy", raw: `{"service":"api","version":"1","repeat_of":""}`, wantErr: `argument "repeat_of"`},
		{name: "oversized", tool: "status", raw: `{"service":"` + strings.Repeat("a", MaxArgumentsSize) + `"}`, wantErr: `the limit is 65536`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cat.Tools[tt.tool].PrepareArguments(json.RawMessage(tt.raw))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PrepareArguments(%.80s) error = %v, want ErrInvalidArguments containing %q", tt.raw, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("PrepareArguments(%s): %v", tt.raw, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PrepareArguments(%s) (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

func TestPrepareArgumentsDefaultsNotShared(t *testing.T) {
	tool := mustParse(t, argsCatalog).Tools["deploy"]
	a, err := tool.PrepareArguments(json.RawMessage(`{"service":"a","version":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	a["labels"].([]any)[0] = "mutated"
	b, err := tool.PrepareArguments(json.RawMessage(`{"service":"a","version":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := b["labels"].([]any)[0]; got != "web" {
		t.Errorf("second call's default labels[0] = %v, want web (defaults must be copied)", got)
	}
}

func TestSplitRepeatOf(t *testing.T) {
	var tool Tool
	args := map[string]any{"a": 1.0, RepeatOfArgument: "act_X"}
	id, rest := tool.SplitRepeatOf(args)
	if id != "act_X" || !cmp.Equal(rest, map[string]any{"a": 1.0}) {
		t.Errorf("SplitRepeatOf = %q, %v; want act_X, map[a:1]", id, rest)
	}
	if _, ok := args[RepeatOfArgument]; !ok {
		t.Error("SplitRepeatOf modified its input")
	}
	if id, _ := tool.SplitRepeatOf(map[string]any{"a": 1.0}); id != "" {
		t.Errorf("SplitRepeatOf without repeat_of = %q, want empty", id)
	}
}

func TestMCPInputSchema(t *testing.T) {
	cat := mustParse(t, argsCatalog)
	var side, ro map[string]any
	if err := json.Unmarshal(cat.Tools["deploy"].MCPInputSchema(), &side); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cat.Tools["status"].MCPInputSchema(), &ro); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "string", "description": repeatOfDescription}
	if diff := cmp.Diff(want, side["properties"].(map[string]any)[RepeatOfArgument]); diff != "" {
		t.Errorf("deploy repeat_of property (-want +got):\n%s", diff)
	}
	if req := side["required"].([]any); len(req) != 2 {
		t.Errorf("deploy required = %v: repeat_of must stay optional", req)
	}
	if _, ok := ro["properties"].(map[string]any)[RepeatOfArgument]; ok {
		t.Error("read_only tool advertises repeat_of")
	}
	// The advertised schema accepts what PrepareArguments accepts.
	if _, ok := side["properties"].(map[string]any)["service"]; !ok {
		t.Error("MCPInputSchema lost the tool's own properties")
	}
	// The tool's own schema is not modified.
	if strings.Contains(string(cat.Tools["deploy"].InputSchema), RepeatOfArgument) {
		t.Error("MCPInputSchema modified InputSchema")
	}
	var none Tool
	none.Replay = ReplayReview
	if err := json.Unmarshal(none.MCPInputSchema(), &side); err != nil || side["properties"].(map[string]any)[RepeatOfArgument] == nil {
		t.Errorf("schema-less side-effecting tool: %v %v", side, err)
	}
}

func BenchmarkPrepareArguments(b *testing.B) {
	tool := mustParse(b, argsCatalog).Tools["deploy"]
	raw := json.RawMessage(`{"service":"api","version":"1.0","region":"eu-west-1","labels":["a","b"]}`)
	for b.Loop() {
		if _, err := tool.PrepareArguments(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderRequest(b *testing.B) {
	tool := mustParse(b, renderCatalog).Tools["post_item"]
	args := map[string]any{"name": "x", "count": 3.0, "tags": []any{"a"}}
	for b.Loop() {
		if _, _, _, _, _, err := tool.RenderRequest(args); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPrepareArgumentsConcurrent shares one tool (and its cached resolved
// schema) between goroutines; run with -race.
func TestPrepareArgumentsConcurrent(t *testing.T) {
	tool := mustParse(t, argsCatalog).Tools["deploy"]
	const workers, calls = 8, 50
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < calls; i++ {
				args, err := tool.PrepareArguments(json.RawMessage(`{"service":"api","version":"1"}`))
				if err != nil {
					errs <- err
					return
				}
				args["labels"].([]any)[0] = "changed"
				if _, _, _, _, _, err := tool.RenderRequest(args); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrepareArgumentsHidesSecretsInErrors: a validation message that
// would quote a secret argument's value does not.
func TestPrepareArgumentsHidesSecretsInErrors(t *testing.T) {
	cat := mustParse(t, `
targets:
  api: {channel: http, base_url: "http://api.internal.test:7412"}
tools:
  login:
    input_schema:
      type: object
      required: [token]
      properties: {token: {type: string, pattern: "^tok_[a-z]+$"}, mode: {enum: [a, b]}}
    target: api
    request: {method: POST, path: /login, body: {t: "{{token}}"}}
    replay: review
    fingerprint: {secret: [token]}
`)
	_, err := cat.Tools["login"].PrepareArguments([]byte(`{"token":"Hunter2-Planted-9"}`))
	if err == nil || strings.Contains(err.Error(), "Hunter2-Planted-9") || !strings.Contains(err.Error(), "argument token") {
		t.Fatalf("PrepareArguments = %v; want an error naming argument token without its value", err)
	}
}

// TestHideSecretsEncodedForms: a validation message quoting a secret
// argument in an encoded form (JSON's `\/`, base64, URL, HTML) hides it too.
func TestHideSecretsEncodedForms(t *testing.T) {
	tool := &Tool{Fingerprint: Fingerprint{Secret: []string{"token"}}}
	args := map[string]any{"token": "a/b-secret-123"}
	for _, form := range []string{`a\/b-secret-123`, "YS9iLXNlY3JldC0xMjM=", "a%2Fb-secret-123", "a&#x2F;b-secret-123", `"a/b-secret-123"`} {
		msg := "argument token: " + form + " does not match"
		if got := tool.hideSecrets(msg, args); got != "argument token: [secret] does not match" {
			t.Errorf("hideSecrets(%q) = %q, want the value hidden", msg, got)
		}
	}
}
