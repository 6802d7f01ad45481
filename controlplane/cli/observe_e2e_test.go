package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/testing/countingtarget"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/tools"
)

// TestObserveReportCountsWhatTheTargetSaw: an agent behind `latch dev`
// (a real process, through its MCP front) times out on a slow creation
// call, retries it in the same session with a new JSON-RPC id while the
// first is still in flight, then reconnects and calls it again. In observe
// mode every call reaches the counting target, which sees three effects;
// `latch observe report` counts the two duplicates it really saw, how each
// came, and says the tool is ready to enforce. Switched to enforce (the
// one catalog change mode: enforce, reloaded), the same traffic is one
// effect.
func TestObserveReportCountsWhatTheTargetSaw(t *testing.T) {
	target := countingtarget.Start(countingtarget.Config{MaxHold: time.Minute, Keyless: true})
	t.Cleanup(target.Close)
	cc := countingtarget.CatalogConfig{Addr: target.Addr(), Prefix: "obs", Timeout: time.Minute, Mode: tools.ModeObserve}
	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := countingtarget.WriteCatalog(catalog, cc); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "dev")
	startDev(t, data, "--catalog", catalog)
	raw, err := os.ReadFile(datadir.DevInfo(data))
	if err != nil {
		t.Fatal(err)
	}
	var info devInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	tool := cc.Tool(countingtarget.ClassIdem)

	// agentTraffic is the agent's story for one intent: a call that times
	// out while the target holds it, a retry in the same session (a new
	// JSON-RPC id) while the first is in flight, then, once the first has
	// committed, a reconnect and the same call again.
	agentTraffic := func(intent string, retryWaits bool) {
		t.Helper()
		arrived := target.Plan(intent, true, nil)
		s1 := connectAgent(t, info)
		args := map[string]any{"intent": intent}
		short, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		_, err := s1.CallTool(short, &mcp.CallToolParams{Name: tool, Arguments: args})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("first call of %s: %v, want the agent's own timeout (the target holds it)", intent, err)
		}
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatalf("the first call of %s never reached the target", intent)
		}
		retryCtx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		if !retryWaits { // enforced: the retry attaches and waits for the held first; the agent gives up again
			cancel()
			retryCtx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
		}
		res, err := s1.CallTool(retryCtx, &mcp.CallToolParams{Name: tool, Arguments: args})
		cancel()
		if retryWaits && (err != nil || res.IsError) {
			t.Fatalf("retry of %s: %v %+v", intent, err, res)
		}
		s1.Close()
		target.ReleaseFirst(intent, countingtarget.Release{How: countingtarget.Commit})
		testbin.Eventually(t, "the first call of "+intent+" to commit at the target", func() bool {
			keys, _ := target.Truth(intent)
			return len(keys) > 0 && keys[0].State == countingtarget.Committed
		})
		s2 := connectAgent(t, info)
		res, err = s2.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
		s2.Close()
		if err != nil || res.IsError {
			t.Fatalf("call of %s in a new session: %v %+v", intent, err, res)
		}
	}

	agentTraffic("observed", true)
	keys, effects := target.Truth("observed")
	if effects != 3 {
		t.Fatalf("the target saw %d effects of the observed intent (%v), want 3: observe mode forwards every call", effects, keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k.Key, "keyless-") {
			t.Errorf("the target got Idempotency-Key %q in observe mode, want none", k.Key)
		}
	}
	var rep *controlplanev1.ObserveReportResponse
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last observe report: %v", rep)
		}
	})
	testbin.Eventually(t, "the observe report to count three calls", func() bool {
		rep = observeReport(t, data)
		r := reportRow(rep, tool)
		return r != nil && r.GetCalls() == 3
	})
	r := reportRow(rep, tool)
	want := &controlplanev1.ObservedTool{Tool: tool, Mode: "observe", Replay: "idempotency_key", ContractComplete: true, NextStep: "ready: set mode: enforce",
		Calls: 3, WouldAttach: 2, ReachedTwice: int64(effects - 1), NewRequestId: 1, NewSession: 1, Concurrent: 1}
	if r.GetMode() != want.GetMode() || r.GetReplay() != want.GetReplay() || !r.GetContractComplete() || r.GetNextStep() != want.GetNextStep() ||
		r.GetCalls() != want.GetCalls() || r.GetWouldAttach() != want.GetWouldAttach() || r.GetReachedTwice() != want.GetReachedTwice() ||
		r.GetNewRequestId() != want.GetNewRequestId() || r.GetNewSession() != want.GetNewSession() || r.GetConcurrent() != want.GetConcurrent() ||
		r.GetWouldHoldUncertain() != 0 || r.GetWouldNeedApproval() != 0 {
		t.Errorf("report row = %v\nwant %v", r, want)
	}
	if r.GetGapMinSeconds() <= 0 || r.GetGapMaxSeconds() < r.GetGapMinSeconds() {
		t.Errorf("gaps = %v..%v, want positive and ordered", r.GetGapMinSeconds(), r.GetGapMaxSeconds())
	}
	if len(rep.GetPairs()) != 2 {
		t.Fatalf("pairs = %v, want 2", rep.GetPairs())
	}
	// Each pair names two executions the target saw.
	committed := target.CommittedKeys()
	if len(committed) != 3 {
		t.Errorf("committed keys = %v, want 3", committed)
	}
	text, code := runCLI(t, "observe", "report", "--data", data)
	if code != ExitOK || !strings.Contains(text, tool) || !strings.Contains(text, "ready: set mode: enforce") || !strings.Contains(text, "reached the target twice") {
		t.Fatalf("latch observe report = exit %d:\n%s", code, text)
	}
	t.Logf("latch observe report:\n%s", text)

	// The one catalog change: mode enforce, reloaded.
	cc.Mode = tools.ModeEnforce
	if err := countingtarget.WriteCatalog(catalog, cc); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, "catalog", "reload", "--data", data); code != ExitOK {
		t.Fatalf("latch catalog reload = exit %d:\n%s", code, out)
	}
	agentTraffic("enforced", false)
	if keys, effects := target.Truth("enforced"); effects != 1 || len(keys) != 1 {
		t.Errorf("the target saw %d effects under %d keys of the enforced intent (%v), want one", effects, len(keys), keys)
	}
	rep = observeReport(t, data)
	if r := reportRow(rep, tool); r.GetCalls() != 3 || r.GetMode() != "enforce" || r.GetNextStep() != "enforced" {
		t.Errorf("report row after the switch = %v, want the 3 observed calls of a tool now enforced", r)
	}
}

// connectAgent opens an MCP session (protocol 2025-11-25, whose sessions
// have IDs: a reconnect is a new session the evidence names; a stateless
// 2026-07-28 client's reconnect is told only by its request ids).
func connectAgent(t *testing.T, info devInfo) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "observe-e2e", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: info.MCPURL,
		HTTPClient: &http.Client{Transport: bearerRT{info.Token}}, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func observeReport(t *testing.T, data string) *controlplanev1.ObserveReportResponse {
	t.Helper()
	out, code := runCLI(t, "observe", "report", "--json", "--data", data)
	if code != ExitOK {
		t.Fatalf("latch observe report --json = exit %d:\n%s", code, out)
	}
	var shape observeReportJSON
	if err := decodeStrict(out, &shape); err != nil {
		t.Fatalf("latch observe report --json is not its documented shape: %v\n%s", err, out)
	}
	// The view's names are the .proto's and its counts plain numbers, so
	// the ObservedTool rows decode as protojson reads them.
	var rep struct {
		Tools []json.RawMessage `json:"tools"`
		Pairs []json.RawMessage `json:"pairs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	resp := &controlplanev1.ObserveReportResponse{}
	for _, raw := range rep.Tools {
		r := &controlplanev1.ObservedTool{}
		if err := protojson.Unmarshal(raw, r); err != nil {
			t.Fatalf("tool row %s: %v", raw, err)
		}
		resp.Tools = append(resp.Tools, r)
	}
	for range rep.Pairs {
		resp.Pairs = append(resp.Pairs, &controlplanev1.ObservedPair{})
	}
	return resp
}

func reportRow(rep *controlplanev1.ObserveReportResponse, tool string) *controlplanev1.ObservedTool {
	for _, r := range rep.GetTools() {
		if r.GetTool() == tool {
			return r
		}
	}
	return nil
}

// TestDevObserveUpstream: `latch dev --observe-upstream -- COMMAND` puts a
// stdio MCP server (mcpchannel's counting one) behind Latch in observe
// mode with a generated catalog that loads; the same call made twice
// reaches the server twice, with no idempotency argument, and the report
// counts the duplicate and says each tool needs a contract decision.
func TestDevObserveUpstream(t *testing.T) {
	state := t.TempDir()
	data := filepath.Join(t.TempDir(), "dev")
	startDev(t, data, "--observe-upstream", "--", countupBin, "--state", state)
	raw, err := os.ReadFile(datadir.DevInfo(data))
	if err != nil {
		t.Fatal(err)
	}
	var info devInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	generated := filepath.Join(data, "observe-catalog.yaml")
	if out, code := runCLI(t, "catalog", "validate", generated); code != ExitOK {
		t.Fatalf("latch catalog validate %s = exit %d:\n%s", generated, code, out)
	}
	for range 2 {
		s := connectAgent(t, info)
		res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "countup.add_note", Arguments: map[string]any{"text": "hello"}})
		s.Close()
		if err != nil || res.IsError {
			t.Fatalf("countup.add_note: %v %+v", err, res)
		}
	}
	effects, err := os.ReadFile(filepath.Join(state, "effects"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(effects)), "\n")
	if len(lines) != 2 {
		t.Fatalf("the server saw %d effects, want 2 (observe mode forwards both):\n%s", len(lines), effects)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "- ") {
			t.Errorf("effect %q carries a request_id: observe mode must not set an idempotency argument", l)
		}
	}
	rep := observeReport(t, data)
	r := reportRow(rep, "countup.add_note")
	if r.GetCalls() != 2 || r.GetWouldAttach() != 1 || r.GetReachedTwice() != 1 || r.GetContractComplete() ||
		!strings.HasPrefix(r.GetNextStep(), "needs a contract decision: replay") {
		t.Errorf("report row = %v, want 2 calls, 1 duplicate that reached the server twice, a contract decision to make", r)
	}
	if c := reportRow(rep, "countup.count"); c == nil || c.GetMode() != "observe" {
		t.Errorf("report row of countup.count = %v, want the generated tool listed in observe mode", c)
	}
}
