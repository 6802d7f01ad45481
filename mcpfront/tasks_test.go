package mcpfront

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/mcpwire"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestTaskStatusTable walks every execution state through the mapping the
// docs/concepts/tasks.md documents.
func TestTaskStatusTable(t *testing.T) {
	type want struct {
		status  mcpwire.TaskStatus
		isError bool
		message string // a substring of statusMessage
	}
	tests := []struct {
		state  recordv1.State
		reason string
		want   want
	}{
		{recordv1.State_STATE_ACCEPTED, "", want{mcpwire.TaskWorking, false, "not yet dispatched"}},
		{recordv1.State_STATE_AUTHORIZED, "", want{mcpwire.TaskWorking, false, "not yet dispatched"}},
		{recordv1.State_STATE_DISPATCHED, "", want{mcpwire.TaskWorking, false, "waiting for the target's answer"}},
		{recordv1.State_STATE_AWAITING_APPROVAL, "the tool requires approval for every call", want{mcpwire.TaskWorking, false, "The operator runs: latch approvals approve act_1"}},
		{recordv1.State_STATE_AWAITING_APPROVAL, "session_authorization: agent session ses_9 is new", want{mcpwire.TaskWorking, false, "The operator runs: latch session authorize ses_9"}},
		{recordv1.State_STATE_OUTCOME_UNKNOWN, "", want{mcpwire.TaskWorking, false, "outcome is being established"}},
		{recordv1.State_STATE_NEEDS_REVIEW, "", want{mcpwire.TaskWorking, false, "awaits an operator's review"}},
		{recordv1.State_STATE_COMPLETED, "", want{mcpwire.TaskCompleted, false, "completed"}},
		{recordv1.State_STATE_DELIVERED, "", want{mcpwire.TaskCompleted, false, "completed"}},
		{recordv1.State_STATE_NOT_EXECUTED, "", want{mcpwire.TaskCompleted, true, "nothing took effect"}},
		{recordv1.State_STATE_REJECTED, "", want{mcpwire.TaskCompleted, true, "nothing was sent"}},
		{recordv1.State_STATE_CANCELLED, "", want{mcpwire.TaskCompleted, true, "nothing was sent"}},
	}
	seen := map[recordv1.State]bool{}
	for _, tc := range tests {
		seen[tc.state] = true
		t.Run(tc.state.String(), func(t *testing.T) {
			exec := &recordv1.Execution{Id: "act_1", State: tc.state, Reason: tc.reason, SessionId: "ses_9"}
			row := taskRowFor(tc.state)
			msg := taskMessage(exec, row, "")
			got := want{row.status, row.isError, tc.want.message}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("taskRowFor(%v) (-want +got):\n%s", tc.state, diff)
			}
			if !strings.Contains(msg, tc.want.message) {
				t.Errorf("taskMessage(%v) = %q, want it to contain %q", tc.state, msg, tc.want.message)
			}
		})
	}
	for v := range recordv1.State_name {
		if s := recordv1.State(v); s != recordv1.State_STATE_UNSPECIFIED && !seen[s] {
			t.Errorf("state %v is not in the test table", s)
		}
	}
	// No execution is ever a failed or input_required task.
	for _, r := range taskTable {
		if r.status != mcpwire.TaskWorking && r.status != mcpwire.TaskCompleted {
			t.Errorf("taskTable row %v maps to %q, want working or completed only", r.states, r.status)
		}
	}
	// The row above is a record written before reason codes (its text
	// names the code); a current one carries the code, whatever its text.
	coded := &recordv1.Execution{Id: "act_1", State: recordv1.State_STATE_AWAITING_APPROVAL, SessionId: "ses_9",
		ReasonCode: recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION, Reason: "agent session ses_9 is new"}
	if msg := taskMessage(coded, taskRowFor(coded.GetState()), ""); !strings.Contains(msg, "The operator runs: latch session authorize ses_9") {
		t.Errorf("taskMessage(session_authorization code) = %q, want the session authorize command", msg)
	}
	other := &recordv1.Execution{Id: "act_1", State: recordv1.State_STATE_AWAITING_APPROVAL, SessionId: "ses_9",
		ReasonCode: recordv1.ReasonCode_REASON_CODE_OTHER, Reason: "session_authorization: text alone decides nothing"}
	if msg := taskMessage(other, taskRowFor(other.GetState()), ""); !strings.Contains(msg, "The operator runs: latch approvals approve act_1") {
		t.Errorf("taskMessage(other code) = %q, want the approvals approve command", msg)
	}
	// The command reaches a control plane whose data dir is not the default.
	if msg := taskMessage(other, taskRowFor(other.GetState()), "--data '/srv/my latch'"); !strings.Contains(msg, "The operator runs: latch approvals approve act_1 --data '/srv/my latch'") {
		t.Errorf("taskMessage(other code, --data) = %q, want the approvals approve command with --data", msg)
	}
}

// rpcClient speaks raw JSON-RPC over Streamable HTTP as one actor, in one
// era: "2025-11-25" opens a session with initialize; "2026-07-28" sends
// every request sessionless with the per-request _meta and routing headers.
type rpcClient struct {
	t       testing.TB
	url     string
	token   string
	era     string
	session string
	ids     atomic.Int64
	tasks   bool // declare the tasks extension (2026-07-28)
	// initialized is the initialize result (2025-11-25).
	initialized json.RawMessage
}

const eraModern = "2026-07-28"

func (st *testStack) rpc(t testing.TB, actor, era string) *rpcClient {
	t.Helper()
	c := &rpcClient{t: t, url: st.URL, token: st.tokens[actor], era: era, tasks: true}
	if era != eraModern {
		res, rerr := c.do("initialize", map[string]any{
			"protocolVersion": era,
			"capabilities":    map[string]any{"tasks": map[string]any{"cancel": map[string]any{}, "list": map[string]any{}}},
			"clientInfo":      map[string]any{"name": "latch-raw", "version": "1"},
		}, "")
		if rerr != nil {
			t.Fatalf("initialize: %v", rerr)
		}
		c.initialized = res
		c.notify("notifications/initialized")
	}
	return c
}

type rpcErr struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	HTTP    int             `json:"-"`
}

func (e *rpcErr) Error() string {
	return fmt.Sprintf("JSON-RPC error %d (HTTP %d): %s", e.Code, e.HTTP, e.Message)
}

func (c *rpcClient) post(body map[string]any, method, name string) (*http.Response, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.era == eraModern {
		req.Header.Set("Mcp-Protocol-Version", c.era)
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	} else if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", c.era)
	}
	return http.DefaultClient.Do(req)
}

func (c *rpcClient) notify(method string) {
	resp, err := c.post(map[string]any{"jsonrpc": "2.0", "method": method}, method, "")
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// do sends one request and returns its result (JSON) or its error. name
// is the Mcp-Name header (2026-07-28); "" derives it from params.
func (c *rpcClient) do(method string, params map[string]any, name string) (json.RawMessage, *rpcErr) {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if c.era == eraModern {
		meta, _ := params["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		caps := map[string]any{}
		if c.tasks {
			caps["extensions"] = map[string]any{ExtensionTasks: map[string]any{}}
		}
		meta[mcp.MetaKeyProtocolVersion] = c.era
		meta[mcp.MetaKeyClientCapabilities] = caps
		meta[mcp.MetaKeyClientInfo] = map[string]any{"name": "latch-raw", "version": "1"}
		params["_meta"] = meta
		if name == "" {
			if n, ok := params["name"].(string); ok {
				name = n
			} else if n, ok := params["taskId"].(string); ok {
				name = n
			}
		}
	}
	id := c.ids.Add(1)
	resp, err := c.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}, method, name)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" && c.session == "" {
		c.session = s
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcErr         `json:"error"`
	}
	body, _ := io.ReadAll(resp.Body)
	data := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			line := sc.Text()
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id":`+fmt.Sprint(id)) {
				data = []byte(d)
			}
		}
	}
	if err := json.Unmarshal(data, &msg); err != nil {
		c.t.Fatalf("%s: HTTP %d, answer %q: %v", method, resp.StatusCode, body, err)
	}
	if msg.Error != nil {
		msg.Error.HTTP = resp.StatusCode
		return nil, msg.Error
	}
	return msg.Result, nil
}

// must is do that fails the test on an error.
func (c *rpcClient) must(method string, params map[string]any) map[string]any {
	c.t.Helper()
	raw, rerr := c.do(method, params, "")
	if rerr != nil {
		c.t.Fatalf("%s(%v): %v", method, params, rerr)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		c.t.Fatalf("%s: result %s: %v", method, raw, err)
	}
	return m
}

// callTask makes a task-augmented tools/call and returns the task object.
func (c *rpcClient) callTask(tool string, args map[string]any) map[string]any {
	c.t.Helper()
	params := map[string]any{"name": tool, "arguments": args}
	if c.era != eraModern {
		params["task"] = map[string]any{"ttl": 60000}
	}
	m := c.must("tools/call", params)
	if c.era == eraModern {
		if m["resultType"] != "task" {
			c.t.Fatalf("tools/call %s = %v, want a CreateTaskResult (resultType task)", tool, m)
		}
		return m
	}
	task, ok := m["task"].(map[string]any)
	if !ok {
		c.t.Fatalf("tools/call %s = %v, want a CreateTaskResult {task: ...}", tool, m)
	}
	return task
}

func (c *rpcClient) get(id string) map[string]any {
	c.t.Helper()
	return c.must("tasks/get", map[string]any{"taskId": id})
}

// pollUntil polls tasks/get until status is want (bounded).
func (c *rpcClient) pollUntil(id string, want mcpwire.TaskStatus) map[string]any {
	c.t.Helper()
	var m map[string]any
	for i := 0; i < 3000; i++ { // 30s and more: a loaded CI machine's bound
		m = c.get(id)
		if m["status"] == string(want) {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("task %s = %v, want status %s", id, m, want)
	return nil
}
