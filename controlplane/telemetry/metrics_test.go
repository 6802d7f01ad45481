package telemetry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/internal/opshttp"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

type labels = map[string]string

// TestMetricsFollowCalls: a new call and its retry move the front's and
// the control plane's counters by exactly one each, with bounded labels.
func TestMetricsFollowCalls(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	st := newObsStack(t, true)
	cs := st.connect(t, "2025-11-25")
	callOnce := func() string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": "3.0"}})
		if err != nil || res.IsError {
			t.Fatalf("CallTool: %v %v", res, err)
		}
		return res.StructuredContent.(map[string]any)["disposition"].(string)
	}
	if d := callOnce(); d != "new" {
		t.Fatalf("first call disposition %q, want new", d)
	}
	m := scrape(t, st.reg)
	for _, c := range []struct {
		name   string
		labels labels
		want   float64
	}{
		{"latch_submit_total", labels{"tool": "deploy_release", "disposition": "new"}, 1},
		{"latch_mcp_tool_calls_total", labels{"tool": "deploy_release", "disposition": "new"}, 1},
		{"latch_mcp_requests_total", labels{"method": "tools/call", "protocol": "2025-11-25"}, 1},
		{"latch_mcp_requests_total", labels{"method": "initialize", "protocol": "2025-11-25"}, 1},
		{"latch_mcp_wait_seconds", nil, 1},
		{"latch_mcp_inflight", nil, 0},
		{"latch_dispatch_duration_seconds", labels{"channel": "http", "tool": "deploy_release"}, 1},
		{"latch_transitions_total", labels{"tool": "deploy_release", "from": "unspecified", "to": "accepted"}, 1},
		{"latch_transitions_total", labels{"tool": "deploy_release", "from": "authorized", "to": "dispatched"}, 1},
		{"latch_transitions_total", labels{"tool": "deploy_release", "from": "dispatched", "to": "completed"}, 1},
		{"latch_executions", labels{"state": "accepted"}, 0},
		{"latch_executions", labels{"state": "dispatched"}, 0},
	} {
		if got := value(m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value(m, "latch_executions", labels{"state": "completed"}) + value(m, "latch_executions", labels{"state": "delivered"}); got != 1 {
		t.Errorf("latch_executions{completed|delivered} = %v, want 1", got)
	}
	if value(m, "latch_store_commit_duration_seconds", nil) == 0 || value(m, "latch_store_group_size", nil) == 0 || value(m, "latch_journal_records", nil) < 3 {
		t.Errorf("store metrics did not move: commits %v, groups %v, journal %v", value(m, "latch_store_commit_duration_seconds", nil),
			value(m, "latch_store_group_size", nil), value(m, "latch_journal_records", nil))
	}
	// At least the three journal records and the execution's record, each
	// with its key.
	if keys, bytes := value(m, "latch_store_written_keys_total", nil), value(m, "latch_store_written_bytes_total", nil); keys < 4 || bytes <= keys {
		t.Errorf("store writes: %v keys, %v bytes; want at least 4 keys and more bytes than keys", keys, bytes)
	}

	if d := callOnce(); d != "attached" {
		t.Fatalf("retry disposition %q, want attached", d)
	}
	m = scrape(t, st.reg)
	for _, c := range []struct {
		name   string
		labels labels
		want   float64
	}{
		{"latch_submit_total", labels{"tool": "deploy_release", "disposition": "attached"}, 1},
		{"latch_submit_total", labels{"tool": "deploy_release", "disposition": "new"}, 1},
		{"latch_mcp_tool_calls_total", labels{"tool": "deploy_release", "disposition": "attached"}, 1},
		{"latch_dispatch_duration_seconds", nil, 1},
	} {
		if got := value(m, c.name, c.labels); got != c.want {
			t.Errorf("after the retry, %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestExecutionsCountedAtStartThenKept: latch_executions starts from the
// store's state index and then follows every commit; a tool the catalog
// does not name is labelled "other"; the oldest unresolved age is read at
// scrape time.
func TestExecutionsCountedAtStartThenKept(t *testing.T) {
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(id string, from, to recordv1.State) {
		t.Helper()
		err := st.Update(context.Background(), func(tx *store.Tx) error {
			x, err := tx.Execution(id)
			if err != nil {
				x = &recordv1.Execution{Id: id, Tool: "retired_tool", Actor: "alice", AcceptedAt: timestamppb.New(t0), DispatchedAt: timestamppb.New(t0)}
			}
			x.State = to
			if _, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(t0), ExecutionId: id, From: from, To: to, Kind: "recovery", Execution: x}); err != nil {
				return err
			}
			return tx.PutExecution(x, false)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("act_01", recordv1.State_STATE_UNSPECIFIED, recordv1.State_STATE_COMPLETED)
	put("act_02", recordv1.State_STATE_UNSPECIFIED, recordv1.State_STATE_COMPLETED)
	put("act_03", recordv1.State_STATE_UNSPECIFIED, recordv1.State_STATE_OUTCOME_UNKNOWN)

	reg := opshttp.NewRegistry()
	cat, err := tools.Parse("c.yaml", []byte(fmt.Sprintf(stackCatalog, "http://127.0.0.1:1")))
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	tel, err := telemetry.New(telemetry.Config{Registry: reg, Catalog: cat, Clock: func() time.Time { return t0.Add(90 * time.Second) },
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})})
	if err != nil {
		t.Fatal(err)
	}
	if err := tel.ObserveStore(st); err != nil {
		t.Fatal(err)
	}
	m := scrape(t, reg)
	for _, c := range []struct {
		state string
		want  float64
	}{{"completed", 2}, {"outcome_unknown", 1}, {"needs_review", 0}} {
		if got := value(m, "latch_executions", labels{"state": c.state}); got != c.want {
			t.Errorf("at start, latch_executions{state=%q} = %v, want %v", c.state, got, c.want)
		}
	}
	if got := value(m, "latch_recovery_queue_depth", nil); got != 1 {
		t.Errorf("latch_recovery_queue_depth = %v, want 1", got)
	}
	if got := value(m, "latch_oldest_unresolved_seconds", labels{"state": "outcome_unknown"}); got != 90 {
		t.Errorf("latch_oldest_unresolved_seconds{outcome_unknown} = %v, want 90", got)
	}

	put("act_03", recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_COMPLETED)
	m = scrape(t, reg)
	if got := value(m, "latch_executions", labels{"state": "completed"}); got != 3 {
		t.Errorf("after recovery, latch_executions{completed} = %v, want 3", got)
	}
	if got := value(m, "latch_executions", labels{"state": "outcome_unknown"}); got != 0 {
		t.Errorf("after recovery, latch_executions{outcome_unknown} = %v, want 0", got)
	}
	if got := value(m, "latch_transitions_total", labels{"tool": "other", "from": "outcome_unknown", "to": "completed"}); got != 1 {
		t.Errorf("latch_transitions_total{tool=other, outcome_unknown→completed} = %v, want 1 (a tool outside the catalog is other)", got)
	}
	if got := value(m, "latch_transitions_total", labels{"tool": "retired_tool"}); got != 0 {
		t.Errorf("a tool outside the catalog became a label value")
	}
	if got := value(m, "latch_oldest_unresolved_seconds", labels{"state": "outcome_unknown"}); got != 0 {
		t.Errorf("latch_oldest_unresolved_seconds{outcome_unknown} = %v with none left, want 0", got)
	}
	tel.Close() // flushes the settled-execution lines
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"execution_id":"act_03"`) && strings.Contains(l, "execution settled") {
			line = l
		}
	}
	for _, want := range []string{`"@level":"info"`, `"tool":"retired_tool"`, `"actor":"alice"`, `"disposition":"recovered"`, `"state":"completed"`, `"duration":"0s"`} {
		if !strings.Contains(line, want) {
			t.Errorf("settled line %q lacks %s\nlog:\n%s", line, want, logs.String())
		}
	}
}

// TestReadyzFollowsTheStore: /readyz passes while the store is open and
// fails, naming the store, once it is closed.
func TestReadyzFollowsTheStore(t *testing.T) {
	srv, err := server.New(server.Config{DataDir: t.TempDir(), CatalogSource: catalog.Bytes("c.yaml", []byte(fmt.Sprintf(stackCatalog, "http://127.0.0.1:1"))), Channels: map[tools.Channel]engine.Channel{}})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := opshttp.New(opshttp.Config{Addr: "127.0.0.1:0", Gatherer: opshttp.NewRegistry(), Checks: srv.ReadyChecks()})
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		ops.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("GET /readyz with the store open = %d %s, want 200", code, body)
	}
	srv.Store.Close()
	code, body := get()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"name":"store","ready":false`) || !strings.Contains(body, `"name":"journal","ready":false`) {
		t.Errorf("GET /readyz with the store closed = %d %s, want 503 naming store and journal", code, body)
	}
}
