package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// latchBin and mcpBin are the real binaries, built once for the process
// tests; countupBin is mcpchannel's counting stdio MCP server.
var latchBin, mcpBin, countupBin string

func TestMain(m *testing.M) {
	testbin.Main(m, []string{"github.com/latchhq/latch/controlplane/cmd/latch", "github.com/latchhq/latch/mcpfront/cmd/latch-mcp",
		"github.com/latchhq/latch/controlplane/mcpchannel/internal/countup"}, []*string{&latchBin, &mcpBin, &countupBin})
}

const e2eCatalog = `
targets:
  releases:
    channel: http
    base_url: %s
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/v1/releases/by-key/{execution_id}"}
    timeout: 20s
  tickets:
    channel: http
    base_url: %s
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/v1/tickets/by-key/{execution_id}"}
tools:
  deploy_release:
    description: Deploy.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}, region: {type: string}}}
    defaults: {region: us-east-1}
    target: releases
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}", region: "{{region}}"}}
    replay: idempotency_key
    attach_window: 1h
  create_ticket:
    description: Ticket.
    input_schema: {type: object, required: [title], properties: {title: {type: string}}}
    target: tickets
    request: {method: POST, path: /v1/tickets, body: {title: "{{title}}"}}
    replay: status_query
`

type proc struct {
	cmd *exec.Cmd
}

// startServe runs `latch serve` as a real process and waits for its socket.
func startServe(t *testing.T, data, catalog string, extra ...string) *proc {
	t.Helper()
	cmd := exec.Command(latchBin, append([]string{"serve", "--data", data, "--catalog", catalog, "--log-level", "debug", "--vault-key-file", filepath.Join(data, "vault.key"), "--trusted-actor", "alice"}, extra...)...)
	stderr := &testbin.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("latch serve log:\n%s", stderr.String())
		}
	})
	// On failure the cleanup above logs what latch serve wrote. A
	// replica on PostgreSQL opens its socket as a standby: wait until it
	// serves the API.
	testbin.Eventually(t, "latch serve to serve its API on its socket", func() bool { return serving(data) })
	return p
}

func client(t *testing.T, data string) controlplanev1.ControlPlaneClient {
	t.Helper()
	conn, err := dialSocket(datadir.Socket(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return controlplanev1.NewControlPlaneClient(conn)
}

// waitFor polls the execution until it is in state want (bounded).
func waitFor(t *testing.T, c controlplanev1.ControlPlaneClient, id string, want recordv1.State) *recordv1.Execution {
	t.Helper()
	var last *recordv1.Execution
	for i := 0; i < 600; i++ {
		r, err := c.Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: id})
		if err == nil {
			last = r.GetExecution()
			if last.GetState() == want {
				return last
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("execution %s is %v, want %v", id, last.GetState(), want)
	return nil
}

func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
	return out.String() + errb.String(), code
}

func newTarget(t *testing.T) (*demotarget.Server, string) {
	demo := demotarget.New(demotarget.Config{Logger: hclog.NewNullLogger()})
	ts := httptest.NewServer(demo)
	t.Cleanup(ts.Close)
	return demo, ts.URL
}

func writeCatalog(t *testing.T, url string) string {
	p := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(e2eCatalog, url, url)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKilledMidRequestRecoversWithoutSecondEffect: the control plane is
// SIGKILLed after the request reached the target and before the answer; on
// restart it recovers the outcome and the target has seen one effect.
func TestKilledMidRequestRecoversWithoutSecondEffect(t *testing.T) {
	for _, tool := range []string{"deploy_release", "create_ticket"} {
		t.Run(tool, func(t *testing.T) {
			demo, url := newTarget(t)
			catalog := writeCatalog(t, url)
			data := t.TempDir()
			p := startServe(t, data, catalog)
			c := client(t, data)
			demo.Hold() // the answer waits until the control plane is killed
			args := `{"service":"api","version":"7.1.0"}`
			kind := "release"
			if tool == "create_ticket" {
				args, kind = `{"title":"disk full"}`, "ticket"
			}
			r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: tool, Arguments: []byte(args)})
			if err != nil {
				t.Fatal(err)
			}
			id := r.GetExecution().GetId()
			waitFor(t, c, id, recordv1.State_STATE_DISPATCHED)
			testbin.Eventually(t, "the request to reach the target", func() bool { return demo.InFlight() > 0 })
			p.cmd.Process.Signal(syscall.SIGKILL)
			p.cmd.Wait()
			demo.Release()

			startServe(t, data, catalog)
			c = client(t, data)
			x := waitFor(t, c, id, recordv1.State_STATE_COMPLETED)
			if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
				t.Errorf("outcome = %v, want succeeded", x.GetOutcome())
			}
			if got := demo.Effects(kind); got != 1 {
				t.Errorf("target effects = %d, want exactly 1", got)
			}
			// A retry of the same intent attaches and returns the stored result.
			again, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: tool, Arguments: []byte(args)})
			if err != nil || again.GetExecution().GetId() != id || again.GetDisposition() != recordv1.Disposition_DISPOSITION_ATTACHED {
				t.Errorf("retry after recovery: %v %v, want attached to %s", again, err, id)
			}
			if got := demo.Effects(kind); got != 1 {
				t.Errorf("target effects after retry = %d, want 1", got)
			}
			hist, err := c.History(context.Background(), &controlplanev1.HistoryRequest{ExecutionId: id})
			if err != nil {
				t.Fatal(err)
			}
			var states []string
			for _, e := range hist.GetEntries() {
				states = append(states, lifecycle.EntryKindNameOf(e)+":"+strings.ToLower(strings.TrimPrefix(e.GetTo().String(), "STATE_")))
			}
			joined := strings.Join(states, " ")
			for _, want := range []string{"transition:dispatched", "transition:outcome_unknown", "recovery:completed", "attach:completed"} {
				if !strings.Contains(joined, want) {
					t.Errorf("journal of %s lacks %q: %s", id, want, joined)
				}
			}
		})
	}
}

// TestAdminCommandsAndOfflineAudit drives the CLI against a running control
// plane, then verifies the journal offline, tampers with it and verifies again.
func TestAdminCommandsAndOfflineAudit(t *testing.T) {
	demo, url := newTarget(t)
	catalog := writeCatalog(t, url)
	data := t.TempDir()
	p := startServe(t, data, catalog)
	c := client(t, data)
	var ids []string
	for i := range 5 {
		r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(fmt.Sprintf(`{"service":"api","version":"1.%d"}`, i)),
			Evidence: &recordv1.Evidence{McpSessionId: "s-1", JsonrpcId: fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.GetExecution().GetId())
		waitFor(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	}
	if demo.Effects("release") != 5 {
		t.Fatalf("effects = %d, want 5", demo.Effects("release"))
	}
	out, code := runCLI(t, "exec", "list", "--data", data)
	if code != 0 || strings.Count(out, "deploy_release") != 5 {
		t.Errorf("exec list: exit %d\n%s", code, out)
	}
	// The connection flags work before the subcommand too.
	if out, code := runCLI(t, "exec", "--data", data, "list"); code != 0 || strings.Count(out, "deploy_release") != 5 {
		t.Errorf("exec --data DATA list: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "approvals", "--data="+data, "list"); code != 0 {
		t.Errorf("approvals --data=DATA list: exit %d\n%s", code, out)
	}
	out, code = runCLI(t, "exec", "list", "--json", "--data", data)
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &line); code != 0 || err != nil {
		t.Fatalf("exec list --json: exit %d, %v:\n%s", code, err, out)
	}
	if args, ok := line["arguments"].(map[string]any); line["state"] != "completed" || line["outcome"] != "succeeded" || !ok || args["service"] != "api" {
		t.Errorf("exec list --json line = %v; want state completed, outcome succeeded and arguments as a JSON object", line)
	}
	if _, ok := line["canonical_intent"].(map[string]any); !ok || line["accepted_at"] == nil || line["intent_scope"] == nil {
		t.Errorf("exec list --json line = %v; want snake_case fields and canonical_intent as a JSON object", line)
	}
	out, code = runCLI(t, "exec", "show", ids[0], "--json", "--data", data)
	var shown struct {
		Execution map[string]any   `json:"execution"`
		Result    map[string]any   `json:"result"`
		Journal   []map[string]any `json:"journal"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || shown.Execution["id"] != ids[0] || len(shown.Journal) == 0 || shown.Journal[0]["to"] != "accepted" || shown.Journal[0]["kind"] != "transition" {
		t.Errorf("exec show --json: exit %d, %v, %+v", code, err, shown)
	}
	out, code = runCLI(t, "exec", "show", ids[0], "--data", data)
	for _, want := range []string{"accepted_at", "dispatched_at", "completed_at", "hmac-sha256:", "succeeded", "journal:", "jsonrpc_id=0"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exec show lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	out, code = runCLI(t, "exec", "explain", ids[0], "--data", data)
	if code != 0 || !strings.Contains(out, "5. Did the second call attach") {
		t.Errorf("exec explain (exit %d):\n%s", code, out)
	}
	out, code = runCLI(t, "exec", "explain", ids[0], "--json", "--data", data)
	var rep struct {
		ExecutionID string `json:"execution_id"`
		Answers     []struct {
			Question string   `json:"question"`
			Lines    []string `json:"lines"`
		} `json:"answers"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.ExecutionID != ids[0] || len(rep.Answers) != 5 {
		t.Errorf("exec explain --json (exit %d, %v) is not the report as JSON:\n%s", code, err, out)
	}
	if out, code := runCLI(t, "exec", "show", "act_nope", "--data", data); code != 1 || !strings.Contains(out, "not found") {
		t.Errorf("exec show of an unknown id: exit %d: %s", code, out)
	}
	if out, code := runCLI(t, "exec", "resolve", ids[0], "--data", data); code != 2 {
		t.Errorf("resolve without a decision: exit %d, want 2: %s", code, out)
	}
	if out, code := runCLI(t, "audit", "verify", data); code != 1 || !strings.Contains(out, "stop it first") {
		t.Errorf("audit verify on a running data dir: exit %d, want 1 with advice: %s", code, out)
	}

	// Clean shutdown writes a final checkpoint.
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("latch serve exited with %v after SIGTERM", err)
	}
	if out, code := runCLI(t, "exec", "list", "--data", data); code != 1 || !strings.Contains(out, "no control plane") {
		t.Errorf("exec list with nothing running: exit %d: %s", code, out)
	}
	out, code = runCLI(t, "audit", "verify", data)
	if code != 0 {
		t.Fatalf("audit verify of an untouched journal: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "audit", "prove", data, ids[2]); code != 0 || !strings.Contains(out, "proved against the checkpoint") {
		t.Errorf("audit prove: exit %d\n%s", code, out)
	}
	export := filepath.Join(t.TempDir(), "journal.jsonl")
	if out, code := runCLI(t, "audit", "export", data, "-o", export); code != 0 {
		t.Fatalf("audit export: exit %d: %s", code, out)
	}
	if out, code := runCLI(t, "audit", "verify", "--export", export, "--key", datadir.Verifier(data)); code != 0 {
		t.Fatalf("audit verify --export: exit %d: %s", code, out)
	}

	// Tamper: rewrite the first journal record that names alice in place
	// (as an attacker with the files would), then verify again.
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var key, v []byte
	n := -1
	for i := 0; n < 0; i++ {
		key = []byte(fmt.Sprintf("j/%016x", i))
		if v, err = kv.Get(key); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(v, []byte("alice")) {
			n = i
		}
	}
	v = bytes.Replace(v, []byte("alice"), []byte("mallo"), 1)
	if err := kv.Commit([]store.Write{{Key: key, Value: v}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()
	out, code = runCLI(t, "audit", "verify", data)
	if code != 1 || !strings.Contains(out, "modified") || !strings.Contains(out, strconv.Itoa(n)) {
		t.Errorf("audit verify after modifying record %d: exit %d, want 1 naming record %d modified:\n%s", n, code, n, out)
	}
	// The export taken before the tampering still verifies: it is a copy.
	if _, code := runCLI(t, "audit", "verify", "--export", export, "--key", datadir.Verifier(data)); code != 0 {
		t.Errorf("the earlier export no longer verifies")
	}
}

// TestDevAndDemo runs `latch dev` and `latch demo` as real processes: the
// demo's dropped connection and re-issued call make exactly one deployment,
// a clean stop leaves a verifiable journal, and a restart resumes the data.
func TestDevAndDemo(t *testing.T) {
	data := filepath.Join(t.TempDir(), "dev")
	dev := startDev(t, data)
	demo := exec.Command(latchBin, "demo", "--data", data)
	out, err := demo.CombinedOutput()
	if err != nil {
		t.Fatalf("latch demo: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "performed 1 deployment") || !strings.Contains(string(out), "attached") {
		t.Errorf("latch demo output lacks the story's end:\n%s", out)
	}
	// Step 6 is told after the delivery record of step 3's answer landed:
	// delivered, to the retry, never "failed" nor "not recorded".
	_, story, _ := strings.Cut(string(out), "\n6. ")
	if !strings.Contains(story, "recorded the answer of step 3 as delivered") || !strings.Contains(story, "Yes, to a retry") ||
		strings.Contains(story, "not recorded") || strings.Contains(strings.ToLower(story), "fail") {
		t.Errorf("latch demo step 6 does not tell the delivery to the retry:\n%s", story)
	}
	raw, err := os.ReadFile(datadir.DevInfo(data))
	if err != nil {
		t.Fatal(err)
	}
	var info devInfo
	json.Unmarshal(raw, &info)
	effects, err := demoEffects(context.Background(), info.DemoURL)
	if err != nil || effects["release"] != 1 {
		t.Errorf("demo target effects = %v (%v), want exactly 1 release", effects, err)
	}
	// Every HTTP tool of the embedded example catalog works against the
	// demo target.
	c := client(t, data)
	for _, call := range []struct{ tool, args string }{
		{"create_ticket", `{"title":"disk almost full"}`},
		{"get_release_status", `{"service":"checkout"}`},
		{"rotate_credential", `{"service":"checkout","new_secret":"0123456789abcdef0123"}`},
	} {
		r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "dev", Tool: call.tool, Arguments: []byte(call.args)})
		if err != nil {
			t.Fatalf("%s: %v", call.tool, err)
		}
		id := r.GetExecution().GetId()
		if r.GetExecution().GetState() == recordv1.State_STATE_AWAITING_APPROVAL {
			if out, code := runCLI(t, "approvals", "approve", id, "--data", data); code != 0 {
				t.Fatalf("approve %s: %s", call.tool, out)
			}
		}
		if x := waitFor(t, c, id, recordv1.State_STATE_COMPLETED); x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
			t.Errorf("%s: outcome %v (status %d), want succeeded", call.tool, x.GetOutcome(), x.GetTargetStatus())
		}
	}
	dev.cmd.Process.Signal(syscall.SIGINT)
	if err := dev.cmd.Wait(); err != nil {
		t.Fatalf("latch dev exited with %v after Ctrl-C", err)
	}
	if out, code := runCLI(t, "audit", "verify", data); code != 0 {
		t.Fatalf("audit verify after a clean stop: exit %d\n%s", code, out)
	}
	startDev(t, data)
	out2, code := runCLI(t, "exec", "list", "--data", data)
	if code != 0 || !strings.Contains(out2, "deploy_release") {
		t.Errorf("after restart, exec list does not show the earlier execution (exit %d):\n%s", code, out2)
	}
}

// TestDevRunsCommandsOnceThroughTheLocalHostAgent: `latch dev --catalog`
// with a local target runs a command through the embedded host agent once;
// a retry attaches and the command does not run again.
func TestDevRunsCommandsOnceThroughTheLocalHostAgent(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d")
	script := filepath.Join(dir, "append.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"ran $LATCH_EXECUTION_ID\" >> \"${1#--file=}\"\n"), 0o755)
	catalog := filepath.Join(dir, "catalog.yaml")
	os.WriteFile(catalog, []byte(fmt.Sprintf(`
targets:
  this-host: {channel: local, hostagent_socket: %q}
tools:
  append_line:
    description: Append a line.
    input_schema: {type: object, required: [file], properties: {file: {type: string}}}
    target: this-host
    command: [%q, "--file={{file}}"]
    replay: status_query
`, filepath.Join(data, "hostagent.sock"), script)), 0o600)
	startDev(t, data, "--catalog", catalog)
	c := client(t, data)
	if out, code := runCLI(t, "demo", "--data", data); code != 1 || !strings.Contains(out, "needs latch dev's example catalog") || !strings.Contains(out, catalog) {
		t.Errorf("latch demo against latch dev --catalog = exit %d:\n%s\nwant exit 1 saying it needs the example catalog", code, out)
	}
	target := filepath.Join(dir, "out.txt")
	args := []byte(fmt.Sprintf(`{"file":%q}`, target))
	r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "dev", Tool: "append_line", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	x := waitFor(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED || x.GetTargetStatus() != 0 {
		t.Errorf("outcome %v exit %d, want succeeded with exit 0", x.GetOutcome(), x.GetTargetStatus())
	}
	again, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "dev", Tool: "append_line", Arguments: args})
	if err != nil || again.GetExecution().GetId() != x.GetId() {
		t.Fatalf("retry: %v %v, want attached to %s", again, err, x.GetId())
	}
	got, _ := os.ReadFile(target)
	if want := "ran " + x.GetId() + "\n"; string(got) != want {
		t.Errorf("the command's file holds %q, want exactly one run %q", got, want)
	}
}

// startDev runs `latch dev` on data with free ports and waits until it has
// written its dev.json (all parts are up by then).
func startDev(t *testing.T, data string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(latchBin, append([]string{"dev", "--data", data, "--listen", "127.0.0.1:0", "--demo-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "LATCH_DEV_TOKEN=latch_dev_test_token")
	out := &testbin.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("latch dev output:\n%s", out.String())
		}
	})
	// On failure the cleanup above logs what latch dev wrote.
	testbin.Eventually(t, "latch dev to start (its info file)", func() bool {
		_, err := os.Stat(datadir.DevInfo(data))
		return err == nil
	})
	return &proc{cmd: cmd}
}

const approvalCatalog = `
targets:
  api: {channel: http, base_url: "%s", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  rotate_credential:
    description: Rotate.
    input_schema: {type: object, required: [service], properties: {service: {type: string}}}
    target: api
    request: {method: POST, path: /v1/credentials/rotate, body: {service: "{{service}}", secret: "s"}}
    replay: review
    approval: every_call
`

// TestVaultLockVoidsApprovalsAndRejects: locking the vault voids a pending
// approval and rejects new calls (reason vault_locked); after unlocking, the
// same call asks for a fresh approval, and the operator's approval sends it.
func TestVaultLockVoidsApprovalsAndRejects(t *testing.T) {
	demo, url := newTarget(t)
	catalog := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(catalog, []byte(fmt.Sprintf(approvalCatalog, url)), 0o600)
	data := t.TempDir()
	startServe(t, data, catalog)
	c := client(t, data)
	submit := func() *recordv1.Execution {
		r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "rotate_credential", Arguments: []byte(`{"service":"db"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetExecution()
	}
	pending := submit()
	if pending.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("state %v, want awaiting_approval", pending.GetState())
	}
	if out, code := runCLI(t, "approvals", "list", "--data", data); code != 0 || !strings.Contains(out, pending.GetId()) {
		t.Errorf("approvals list (exit %d) lacks %s:\n%s", code, pending.GetId(), out)
	}
	if out, code := runCLI(t, "vault", "lock", "--data", data); code != 0 || !strings.Contains(out, "locked") {
		t.Fatalf("vault lock: exit %d: %s", code, out)
	}
	x := waitFor(t, c, pending.GetId(), recordv1.State_STATE_REJECTED)
	if !strings.Contains(x.GetReason(), "vault was locked") {
		t.Errorf("pending approval after lock: reason %q, want voided by the lock", x.GetReason())
	}
	if r := submit(); r.GetState() != recordv1.State_STATE_REJECTED || r.GetReasonCode() != recordv1.ReasonCode_REASON_CODE_VAULT_LOCKED || !strings.HasPrefix(r.GetReason(), "vault_locked") {
		t.Errorf("call while locked: %v %q, want rejected vault_locked", r.GetState(), r.GetReason())
	}
	if demo.Total() != 0 {
		t.Errorf("the target saw %d requests; nothing was approved", demo.Total())
	}
	if out, code := runCLI(t, "vault", "unlock", "--key-file", filepath.Join(data, "vault.key"), "--data", data); code != 0 || !strings.Contains(out, "unlocked") {
		t.Fatalf("vault unlock: exit %d: %s", code, out)
	}
	fresh := submit()
	if fresh.GetId() == pending.GetId() || fresh.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("call after unlock: %s %v, want a new execution awaiting approval", fresh.GetId(), fresh.GetState())
	}
	if out, code := runCLI(t, "approvals", "approve", fresh.GetId(), "--data", data, "--operator", "ops"); code != 0 {
		t.Fatalf("approvals approve: exit %d: %s", code, out)
	}
	waitFor(t, c, fresh.GetId(), recordv1.State_STATE_COMPLETED)
	if got := demo.Effects("rotation"); got != 1 {
		t.Errorf("rotations at the target = %d, want 1", got)
	}
}

// TestCorruptDataDirIsRefusedClearly: a damaged Badger directory stops
// `latch serve` with exit 1 and a message naming the directory and what to
// do; nothing panics.
func TestCorruptDataDirIsRefusedClearly(t *testing.T) {
	_, url := newTarget(t)
	catalog := writeCatalog(t, url)
	data := t.TempDir()
	p := startServe(t, data, catalog)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	manifest := filepath.Join(datadir.DB(data), "MANIFEST")
	if err := os.WriteFile(manifest, []byte("this is not a badger manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(latchBin, "serve", "--data", data, "--catalog", catalog, "--vault-key-file", filepath.Join(data, "vault.key"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("latch serve on a corrupt data dir: %v, want exit 1\n%s", err, out)
	}
	if strings.Contains(string(out), "panic") || !strings.Contains(string(out), datadir.DB(data)) || !strings.Contains(string(out), "restore from backup") {
		t.Errorf("latch serve output does not name the damaged dir and what to do:\n%s", out)
	}
	if out, code := runCLI(t, "audit", "verify", data); code != 1 || strings.Contains(out, "panic") {
		t.Errorf("audit verify on a corrupt data dir: exit %d\n%s", code, out)
	}
}

// TestExecWatchFollowsChanges: `latch exec watch` prints the state changes
// of executions that start after it, through the API's Watch.
func TestExecWatchFollowsChanges(t *testing.T) {
	_, url := newTarget(t)
	catalog := writeCatalog(t, url)
	data := t.TempDir()
	startServe(t, data, catalog)
	c := client(t, data)
	out := &testbin.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, &Env{Stdout: out, Stderr: io.Discard, Getenv: func(string) string { return "" }}, []string{"exec", "watch", "--state", "completed", "--data", data})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exec watch exit = %d, want 0 after interrupt", code)
		}
	}()
	// Submit until watch has printed one (it polls for new executions);
	// bounded at 30s, a loaded machine's budget, not 10s.
	var id string
	for i := 0; i < 600 && !strings.Contains(out.String(), "completed"); i++ {
		if id == "" || i%20 == 0 {
			r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(fmt.Sprintf(`{"service":"api","version":"9.%d"}`, i))})
			if err != nil {
				t.Fatal(err)
			}
			id = r.GetExecution().GetId()
		}
		time.Sleep(50 * time.Millisecond)
	}
	text := out.String()
	if !strings.Contains(text, " completed ") || !strings.Contains(text, "deploy_release") || strings.Contains(text, " accepted ") {
		t.Errorf("exec watch --state completed printed:\n%s\nwant completed lines of deploy_release only", text)
	}
}

// TestDevPortsAuto: `latch dev --ports auto` listens on free loopback ports
// for every listener not given, and says where in its info file and banner.
func TestDevPortsAuto(t *testing.T) {
	data := filepath.Join(t.TempDir(), "dev")
	cmd := exec.Command(latchBin, "dev", "--data", data, "--ports", "auto")
	cmd.Env = append(os.Environ(), "LATCH_DEV_TOKEN=latch_dev_test_token")
	out := &testbin.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("latch dev output:\n%s", out.String())
		}
	})
	testbin.Eventually(t, "latch dev to print its banner", func() bool { return strings.Contains(out.String(), "/metrics") })
	raw, err := os.ReadFile(datadir.DevInfo(data))
	if err != nil {
		t.Fatal(err)
	}
	var info devInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{info.MCPURL, info.DemoURL} {
		if !strings.HasPrefix(u, "http://127.0.0.1:") || strings.Contains(u, ":"+strings.Split(devListen, ":")[1]) || strings.Contains(u, ":"+strings.Split(devDemoListen, ":")[1]) {
			t.Errorf("with --ports auto, latch dev listens at %s; want a free loopback port, not a default one", u)
		}
	}
	m := regexp.MustCompile(`metrics +(http://127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(out.String())
	if m == nil || strings.HasSuffix(m[1], ":"+strings.Split(devOpsListen, ":")[1]) {
		t.Fatalf("banner's metrics line = %v; want the ops listener on a free port:\n%s", m, out.String())
	}
	resp, err := http.Get(m[1] + "/healthz")
	if err != nil {
		t.Fatalf("ops listener at the printed address: %v", err)
	}
	resp.Body.Close()
	if out, code := runCLI(t, "exec", "list", "--data", data); code != 0 {
		t.Errorf("exec list against latch dev --ports auto: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "dev", "--data", t.TempDir(), "--ports", "fixed"); code != 2 || !strings.Contains(out, "the only value is auto") {
		t.Errorf("latch dev --ports fixed = exit %d, %s; want a usage error naming auto", code, out)
	}
}
