package mcpchannel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// everythingServer is the official MCP reference server, installed by
// .ci/run (npm ci in testdata/everything). Outside CI the test skips when
// it is absent; in CI it fails.
func everythingServer(t *testing.T) (node, script string) {
	t.Helper()
	script, _ = filepath.Abs("testdata/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	node, err := exec.LookPath("node")
	_, serr := os.Stat(script)
	if err != nil || serr != nil {
		msg := "@modelcontextprotocol/server-everything is not installed (cd controlplane/mcpchannel/testdata/everything && npm ci)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, script
}

// TestServerEverythingOverStdio runs the official reference server as a
// stdio upstream: only contracted tools are listed; echo and structured
// content come back as stored results; the process gets the catalog's env
// and not the control plane's.
func TestServerEverythingOverStdio(t *testing.T) {
	node, script := everythingServer(t)
	catalog := writeCatalog(t, fmt.Sprintf(`
upstreams:
  everything:
    transport: stdio
    command: [%q, %q, stdio]
    env: {LATCH_UPSTREAM_TEST: from-the-catalog}
    timeout: 30s
tools:
  everything.echo:
    upstream: everything
    tool: echo
    replay: read_only
  everything.get-structured-content:
    upstream: everything
    tool: get-structured-content
    replay: read_only
  everything.get-env:
    upstream: everything
    tool: get-env
    replay: read_only
  everything.get-sum:
    upstream: everything
    tool: get-sum
    replay: review
    approval: none
`, node, script))
	data := t.TempDir()
	t.Setenv("LATCH_CONTROL_PLANE_ONLY", "must-not-reach-upstreams")
	startLatch(t, data, catalog)
	c := client(t, data)

	names := listedTools(t, c, "everything.")
	if want := "everything.echo everything.get-env everything.get-structured-content everything.get-sum"; strings.Join(names, " ") != want {
		t.Errorf("listed upstream tools = %v, want %s (only those with a contract)", names, want)
	}

	r := submit(t, c, "everything.echo", `{"message":"hello upstream"}`)
	got := waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	if !strings.Contains(string(got.GetResult().GetBody()), "hello upstream") || got.GetExecution().GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("echo: %v result %s", got.GetExecution().GetOutcome(), got.GetResult().GetBody())
	}

	r = submit(t, c, "everything.get-structured-content", `{"location":"Chicago"}`)
	got = waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	var res struct {
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal(got.GetResult().GetBody(), &res); err != nil || len(res.StructuredContent) == 0 {
		t.Errorf("get-structured-content result = %s (%v), want structured content kept", got.GetResult().GetBody(), err)
	}

	r = submit(t, c, "everything.get-sum", `{"a":2,"b":3}`)
	got = waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	if !strings.Contains(string(got.GetResult().GetBody()), "5") {
		t.Errorf("get-sum result = %s, want 5", got.GetResult().GetBody())
	}

	r = submit(t, c, "everything.get-env", `{}`)
	got = waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	body := string(got.GetResult().GetBody())
	if !strings.Contains(body, "from-the-catalog") || strings.Contains(body, "must-not-reach-upstreams") {
		t.Errorf("get-env result = %.600s; want the catalog's env and none of the control plane's", body)
	}
}

// TestServerEverythingTask calls the reference server's task tool
// (simulate-research-query, execution.taskSupport required) as a status_query
// tool: Latch calls it task-augmented (2025-11-25), records the task ID,
// polls tasks/get through its stages and stores the tasks/result answer.
func TestServerEverythingTask(t *testing.T) {
	node, script := everythingServer(t)
	catalog := writeCatalog(t, fmt.Sprintf(`
upstreams:
  everything:
    transport: stdio
    command: [%q, %q, stdio]
    timeout: 30s
tools:
  everything.simulate-research-query:
    upstream: everything
    tool: simulate-research-query
    replay: status_query
  everything.echo:
    upstream: everything
    tool: echo
    replay: status_query
`, node, script))
	data := t.TempDir()
	startLatch(t, data, catalog)
	c := client(t, data)
	names := listedTools(t, c, "everything.")
	// echo takes no task (no execution.taskSupport): status_query holds it.
	if want := "everything.simulate-research-query"; strings.Join(names, " ") != want {
		t.Errorf("listed upstream tools = %v, want %s", names, want)
	}
	r := submit(t, c, "everything.simulate-research-query", `{"topic":"execution identity"}`)
	got := waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NEEDS_REVIEW, recordv1.State_STATE_NOT_EXECUTED)
	x := got.GetExecution()
	if x.GetState() != recordv1.State_STATE_COMPLETED || x.GetTargetTaskId() == "" || !strings.Contains(string(got.GetResult().GetBody()), "Research Report: execution identity") {
		t.Errorf("execution %v (%s) task %q result %.300s; want completed through its task with the report", x.GetState(), x.GetReason(), x.GetTargetTaskId(), got.GetResult().GetBody())
	}
}

// listedTools is the names of the tools the control plane lists that start
// with prefix, in its order.
func listedTools(t *testing.T, c controlplanev1.ControlPlaneClient, prefix string) []string {
	t.Helper()
	lt, err := c.ListTools(context.Background(), &controlplanev1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.GetTools() {
		if strings.HasPrefix(tl.GetName(), prefix) {
			names = append(names, tl.GetName())
		}
	}
	return names
}
