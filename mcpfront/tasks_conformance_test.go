package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/controlplane/fingerprint"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/tools"
)

// The official conformance suite's tasks scenarios (2026-07-28 extension)
// run against a real stack whose catalog has the suite's fixture tools.
// Install the suite and Node 22 with the command in conformanceInstall (CI
// does); without them the test is skipped.
const (
	conformanceDir     = "testdata/conformance"
	conformanceInstall = "npm ci --prefix mcpfront/testdata/conformance"
)

// conformanceScenarios are the tasks scenarios whose fixtures a Latch
// catalog can provide. Not run: tasks-mrtr-input, tasks-mrtr-composition
// (Latch never asks the agent for input: a person's decision is the
// operator's) and tasks-status-notifications (optional, needs
// subscriptions/listen).
var conformanceScenarios = []string{
	"tasks-lifecycle",
	"tasks-capability-negotiation",
	"tasks-wire-fields",
	"tasks-request-state-removal",
	"tasks-request-headers",
	"tasks-dispatch-and-envelope",
	"tasks-required-task-error",
}

// conformanceCatalog has the fixtures: greet (sync only), slow_compute
// (task, sleeps seconds), failing_job (task, the target fails),
// protocol_error_job (task; Latch has no protocol error to give it).
func conformanceCatalog(base string) *tools.Catalog {
	obj := func(s string) json.RawMessage { return json.RawMessage(s) }
	tool := func(name, path, schema string, task tools.TaskSupport, body map[string]any) *tools.Tool {
		return &tools.Tool{Name: name, Description: "conformance fixture " + name, InputSchema: obj(schema), Target: "fx",
			HTTPAction: tools.HTTPAction{
				Request: &tools.Request{Method: http.MethodPost, Path: path, Body: body},
			},
			Replay: tools.ReplayIdempotencyKey, AttachWindow: time.Hour, Approval: tools.ApprovalNone, Task: task}
	}
	named := `{"type":"object","properties":{"name":{"type":"string","default":"World"}}}`
	timed := `{"type":"object","properties":{"seconds":{"type":"number","default":0},"label":{"type":"string"}}}`
	none := `{"type":"object","properties":{}}`
	return &tools.Catalog{
		Source:  "conformance",
		Targets: map[string]*tools.Target{"fx": {Name: "fx", Channel: tools.ChannelHTTP, HTTPTarget: tools.HTTPTarget{BaseURL: base, IdempotencyHeader: "Idempotency-Key", AllowPrivate: true}}},
		Tools: map[string]*tools.Tool{
			"greet":              tool("greet", "/greet", named, tools.TaskForbidden, map[string]any{"name": "{{name}}"}),
			"slow_compute":       tool("slow_compute", "/slow", timed, tools.TaskOptional, map[string]any{"seconds": "{{seconds}}"}),
			"failing_job":        tool("failing_job", "/fail", none, tools.TaskRequired, map[string]any{}),
			"protocol_error_job": tool("protocol_error_job", "/fail", none, tools.TaskOptional, map[string]any{}),
			"confirm_delete":     tool("confirm_delete", "/greet", named, tools.TaskOptional, map[string]any{"name": "{{name}}"}),
		},
	}
}

// conformanceFront starts a control plane with conformanceCatalog behind a
// front and returns the front's MCP URL; it skips (or fails under CI) when
// the suite is not installed.
func conformanceFront(t *testing.T) string {
	t.Helper()
	node := filepath.Join(conformanceDir, "node_modules", ".bin", "node")
	suite := filepath.Join(conformanceDir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, p := range []string{node, suite} {
		if _, err := os.Stat(p); err != nil {
			nodeMissing(t, "the MCP conformance suite is not installed; run from the repository root: "+conformanceInstall)
		}
	}
	fx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Name    string  `json:"name"`
			Seconds float64 `json:"seconds"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		switch r.URL.Path {
		case "/slow":
			select { // bounded: the suite asks for at most 60 s
			case <-time.After(time.Duration(min(in.Seconds, 5) * float64(time.Second))):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "done after %g seconds", in.Seconds)
		case "/fail":
			http.Error(w, "the job failed", http.StatusInternalServerError)
		default:
			fmt.Fprintf(w, "Hello, %s!", in.Name)
		}
	}))
	t.Cleanup(fx.Close)
	key, _ := fingerprint.GenerateKey()
	cp := &restartableCP{t: t, dir: t.TempDir(), cat: conformanceCatalog(fx.URL), key: key}
	cp.start()
	t.Cleanup(func() { cp.stop() })
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return cp.lis.Load().DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	front, err := New(Config{Logger: testLogger(t), ControlPlane: controlplanev1.NewControlPlaneClient(conn)})
	if err != nil {
		t.Fatal(err)
	}
	if err := front.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(front.HTTPHandler())
	t.Cleanup(func() { hs.Close(); _ = front.Close() })
	return hs.URL + "/mcp"
}

func TestConformanceTasks(t *testing.T) {
	url := conformanceFront(t)
	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			args := []string{"node_modules/@modelcontextprotocol/conformance/dist/index.js", "server", "--url", url, "--scenario", sc, "--timeout", "60000",
				"--expected-failures", "expected-failures.yaml"}
			cmd := exec.CommandContext(ctx, "node_modules/.bin/node", args...)
			cmd.Dir = conformanceDir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			t.Logf("conformance %s:\n%s", sc, out.String())
			if err != nil {
				t.Errorf("conformance scenario %s failed beyond its expected failures (testdata/conformance/expected-failures.yaml): %v", sc, err)
			}
		})
	}
}
