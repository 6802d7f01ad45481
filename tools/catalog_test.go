package tools

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latchhq/latch/tools/examples"
)

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHaM4lj8vv5txa5FFC8XQeTmvRIr4sJWVKCipwZ1n6P0"

// jsonEqual compares JSON documents by value, ignoring key order.
var jsonEqual = cmp.Transformer("json", func(r json.RawMessage) any {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return string(r)
	}
	return v
})

func TestLoadGoodCatalog(t *testing.T) {
	got, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Catalog{
		Source: "testdata/good.yaml",
		Targets: map[string]*Target{
			"api": {Name: "api", Channel: ChannelHTTP, Credential: "api-token", HTTPTarget: HTTPTarget{BaseURL: "https://api.example.test/base",
				IdempotencyHeader: "Idempotency-Key",
				Status:            &StatusQuery{Method: "GET", Path: "/v1/ops/by-key/{execution_id}", Absent: []int{404}, InProgress: []int{202, 409}}},
				Timeout: DefaultHTTPTimeout, Settle: 5 * time.Second},
			"box":   {Name: "box", Channel: ChannelSSH, Credential: "box-key", Timeout: time.Minute, HostTarget: HostTarget{Address: "[::1]:2222", User: "deploy", HostKey: testHostKey, HostagentSocket: "/run/latch-hostagent.sock"}},
			"here":  {Name: "here", Channel: ChannelLocal, HostTarget: HostTarget{HostagentSocket: "/run/latch-hostagent.sock"}, Settle: DefaultSettle},
			"plain": {Name: "plain", Channel: ChannelSSH, HostTarget: HostTarget{Address: "127.0.0.1:22", User: "ops", HostKey: testHostKey}, Settle: DefaultSettle},
		},
		Tools: map[string]*Tool{
			"create_op": {
				Name: "create_op", Description: "Create an operation.",
				InputSchema: json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"size":{"type":"integer","default":2},"tags":{"type":"array","items":{"type":"string"}},"token":{"type":"string"},"trace":{"type":"string"}}}`),
				Defaults:    map[string]any{"tags": []any{"a", "b"}, "size": float64(2)},
				Target:      "api",
				HTTPAction: HTTPAction{
					Request: &Request{Method: "PUT", Path: "/v1/ops/{{ name }}",
						Query: map[string]string{"trace": "{{trace}}"}, Headers: map[string]string{"X-Size": "{{size}}", "X-Op-Key": "{{execution_id}}"},
						Body: map[string]any{"name": "{{name}}", "size": "{{size}}", "tags": "{{tags}}", "label": "op-{{name}}", "fixed": 1.5, "none": nil}},
				},
				Timeout: 45 * time.Second, Mode: ModeEnforce, Replay: ReplayStatusQuery, AttachWindow: DefaultAttachWindow, Approval: ApprovalSession, Task: TaskRequired,
				Fingerprint: Fingerprint{Ignore: []string{"trace"}, Secret: []string{"token"}},
			},
			"list_ops": {Name: "list_ops", InputSchema: json.RawMessage(defaultInputSchema), Target: "api",
				HTTPAction: HTTPAction{Request: &Request{Method: "GET", Path: "/v1/ops"}}, Mode: ModeEnforce, Replay: ReplayReadOnly, Approval: ApprovalNone, Task: TaskForbidden},
			"migrate": {Name: "migrate",
				InputSchema: json.RawMessage(`{"type":"object","required":["version"],"properties":{"version":{"type":"string"}}}`),
				Target:      "box", CommandAction: CommandAction{Command: []string{"/opt/app/bin/migrate", "--to={{version}}", "3"}, Cwd: "/opt/app", Env: map[string]string{"MODE": "fast"}},
				Mode: ModeEnforce, Replay: ReplayIdempotencyKey, UntilResolved: true, Approval: ApprovalNone, Task: TaskOptional},
			"cleanup": {Name: "cleanup", InputSchema: json.RawMessage(defaultInputSchema), Target: "here",
				CommandAction: CommandAction{Command: []string{"/usr/local/bin/cleanup"}}, Mode: ModeEnforce, Replay: ReplayReview, AttachWindow: 90 * time.Minute, Approval: ApprovalEveryCall, Task: TaskOptional},
			"reboot": {Name: "reboot", InputSchema: json.RawMessage(defaultInputSchema), Target: "plain",
				CommandAction: CommandAction{Command: []string{"/usr/sbin/reboot"}}, Mode: ModeEnforce, Replay: ReplayReview, AttachWindow: DefaultAttachWindow, Approval: ApprovalNone, Task: TaskOptional},
		},
	}
	if diff := cmp.Diff(want, got, jsonEqual, cmpopts.IgnoreUnexported(Target{})); diff != "" {
		t.Errorf("Load(testdata/good.yaml) mismatch (-want +got):\n%s", diff)
	}
}

func TestExampleCatalogLoads(t *testing.T) {
	cat, err := Parse("examples/catalog.yaml", examples.Catalog)
	if err != nil {
		t.Fatalf("example catalog refused:\n%v", err)
	}
	want := map[string]Replay{
		"deploy_release":     ReplayIdempotencyKey,
		"create_ticket":      ReplayStatusQuery,
		"rotate_credential":  ReplayReview,
		"run_migration":      ReplayStatusQuery,
		"get_release_status": ReplayReadOnly,
	}
	for name, replay := range want {
		tool, ok := cat.Tools[name]
		if !ok {
			t.Errorf("example catalog lacks tool %s", name)
			continue
		}
		if tool.Replay != replay {
			t.Errorf("tool %s replay = %s, want %s", name, tool.Replay, replay)
		}
	}
	if rc := cat.Tools["rotate_credential"]; rc.Approval != ApprovalEveryCall || !cmp.Equal(rc.Fingerprint.Secret, []string{"new_secret"}) {
		t.Errorf("rotate_credential approval %s, secret %v; want every_call, [new_secret]", rc.Approval, rc.Fingerprint.Secret)
	}
	if tg := cat.Targets[cat.Tools["run_migration"].Target]; tg.Channel != ChannelSSH || tg.HostagentSocket == "" {
		t.Errorf("run_migration target %+v, want ssh with hostagent_socket", tg)
	}
	for _, tool := range cat.Tools {
		if tg := cat.Targets[tool.Target]; tg.Channel == ChannelHTTP && tg.BaseURL != "http://127.0.0.1:7412" {
			t.Errorf("tool %s: base_url %s, want the demo target http://127.0.0.1:7412", tool.Name, tg.BaseURL)
		}
	}
	// The example renders to the demo target's paths.
	args, err := cat.Tools["deploy_release"].PrepareArguments(json.RawMessage(`{"service":"checkout","version":"1.4.2"}`))
	if err != nil {
		t.Fatal(err)
	}
	method, path, _, _, body, err := cat.Tools["deploy_release"].RenderRequest(args)
	if err != nil {
		t.Fatal(err)
	}
	if method != "POST" || path != "/v1/releases" || string(body) != `{"region":"us-east-1","service":"checkout","version":"1.4.2"}` {
		t.Errorf("deploy_release renders %s %s %s", method, path, body)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestLoadErrorFormat(t *testing.T) {
	err := &LoadError{Problems: []Problem{{File: "a.yaml", Line: 3, Msg: "x is wrong"}, {File: "a.yaml", Msg: "no line"}}}
	if got, want := err.Error(), "a.yaml:3: x is wrong\na.yaml: no line"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Error("errors.Is(*LoadError, ErrInvalid) = false")
	}
}
