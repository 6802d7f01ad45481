package mcpchannel

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/engine"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

func TestDecodeCallAnswer(t *testing.T) {
	legacy, modern := taskCaps{legacy: true}, taskCaps{modern: true}
	for _, tc := range []struct {
		name   string
		caps   taskCaps
		raw    string
		taskID string // "" for a CallToolResult
		err    bool
	}{
		{"2025-11-25 CreateTaskResult", legacy, `{"task":{"taskId":"t1","status":"working","createdAt":"x","lastUpdatedAt":"x","ttl":1000}}`, "t1", false},
		{"2026-07-28 CreateTaskResult", modern, `{"resultType":"task","taskId":"t2","status":"working","ttlMs":null}`, "t2", false},
		{"plain result", legacy, `{"content":[{"type":"text","text":"hi"}]}`, "", false},
		{"2026-07-28 complete result", modern, `{"resultType":"complete","content":[]}`, "", false},
		{"task without an id", legacy, `{"task":{"status":"working"}}`, "", true},
		{"flat task without an id", modern, `{"resultType":"task","status":"working"}`, "", true},
		{"not JSON", legacy, `{`, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, res, err := decodeCallAnswer(tc.caps, json.RawMessage(tc.raw))
			if (err != nil) != tc.err {
				t.Fatalf("decodeCallAnswer(%s) error = %v, want error %v", tc.raw, err, tc.err)
			}
			if tc.err {
				return
			}
			if tc.taskID != "" && (task == nil || task.TaskID != tc.taskID || res != nil) {
				t.Errorf("decodeCallAnswer(%s) = task %+v result %v, want task %s", tc.raw, task, res, tc.taskID)
			}
			if tc.taskID == "" && (task != nil || res == nil) {
				t.Errorf("decodeCallAnswer(%s) = task %+v result %v, want a CallToolResult", tc.raw, task, res)
			}
		})
	}
}

func TestTaskCapable(t *testing.T) {
	support := map[string]string{"req": "required", "opt": "optional", "no": "forbidden"}
	for _, tc := range []struct {
		name string
		caps taskCaps
		tool string
		want bool
	}{
		{"2025-11-25 required", taskCaps{legacy: true, support: support}, "req", true},
		{"2025-11-25 optional", taskCaps{legacy: true, support: support}, "opt", true},
		{"2025-11-25 forbidden", taskCaps{legacy: true, support: support}, "no", false},
		{"2025-11-25 not listed", taskCaps{legacy: true, support: support}, "other", false},
		{"no capability", taskCaps{support: support}, "req", false},
		{"2026-07-28 extension", taskCaps{modern: true}, "anything", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := taskCapable(tc.caps, tc.tool); got != tc.want || (!got && why == "") {
				t.Errorf("taskCapable(%+v, %s) = %v %q, want %v (with a reason when false)", tc.caps, tc.tool, got, why, tc.want)
			}
		})
	}
}

// TestTaskOutcome: what each terminal status proves (2026-07-28, whose
// tasks/get inlines the result or the error).
func TestTaskOutcome(t *testing.T) {
	c := newTestChannel(t, Config{})
	u := &upstream{c: c, spec: tools.Upstream{Name: "up"}}
	call := engine.Call{Tool: &tools.Tool{UpstreamAction: tools.UpstreamAction{UpstreamTool: "t"}}}
	caps := taskCaps{modern: true}
	for _, tc := range []struct {
		name    string
		task    wireTask
		class   engine.AttemptClass
		outcome recordv1.Outcome
		body    string
	}{
		{"completed", wireTask{TaskID: "a", Status: taskCompleted, Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)}, engine.Observed, recordv1.Outcome_OUTCOME_SUCCEEDED, "done"},
		{"completed isError", wireTask{TaskID: "a", Status: taskCompleted, Result: json.RawMessage(`{"content":[{"type":"text","text":"no"}],"isError":true}`)}, engine.Observed, recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, "no"},
		{"failed", wireTask{TaskID: "a", Status: taskFailed, Error: json.RawMessage(`{"code":-32603,"message":"backend down"}`)}, engine.Observed, recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, "backend down"},
		{"cancelled by the upstream", wireTask{TaskID: "a", Status: taskCancelled, StatusMessage: "operator stopped it"}, engine.Observed, recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, "operator stopped it"},
		{"completed without a result", wireTask{TaskID: "a", Status: taskCompleted}, engine.Unknown, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := tc.task
			a := c.taskOutcome(context.Background(), u, nil, caps, call, &task)
			if a.Class != tc.class || a.Outcome != tc.outcome || !strings.Contains(string(a.Result.GetBody()), tc.body) {
				t.Errorf("taskOutcome(%s) = %v %v %s (%s), want %v %v with %q", tc.task.Status, a.Class, a.Outcome, a.Result.GetBody(), a.Reason, tc.class, tc.outcome, tc.body)
			}
		})
	}
}

// TestQueryWithoutTaskID: an execution whose task ID was never recorded
// (Latch stopped between the upstream's CreateTaskResult and its own write)
// cannot be asked about: Unsupported, which recovery turns into needs_review.
func TestQueryWithoutTaskID(t *testing.T) {
	c := newTestChannel(t, Config{})
	a := c.Query(context.Background(), engine.Call{
		Execution: &recordv1.Execution{Id: "act_1"},
		Tool:      &tools.Tool{UpstreamAction: tools.UpstreamAction{UpstreamTool: "charge"}, Replay: tools.ReplayStatusQuery},
		Target:    &tools.Target{Name: "tasker"},
	})
	if a.Class != engine.Unsupported || !strings.Contains(a.Reason, "no task ID was recorded") {
		t.Errorf("Query = %v (%s), want Unsupported saying no task ID was recorded", a.Class, a.Reason)
	}
}

// TestSSEParser: the data of each complete event, in any chunking, CRLF
// or LF, multi-line data joined with newlines, comments skipped, the last
// event ID and retry kept for a resume; nothing after the event emit took.
func TestSSEParser(t *testing.T) {
	stream := ": comment\r\nevent: message\r\nid: 1\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nretry: 10\n\ndata: two\n\ndata: three\n\n"
	for _, chunk := range []int{1, 3, 7, len(stream)} {
		p := &sseParser{max: 1 << 10}
		var got []string
		for b := []byte(stream); len(b) > 0; {
			n := min(chunk, len(b))
			if err := p.feed(b[:n], func(d []byte) bool { got = append(got, string(d)); return string(d) == "two" }); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		if diff := cmp.Diff([]string{"{\"a\":\n1}", "two"}, got); diff != "" {
			t.Errorf("chunk %d: events (-want +got):\n%s", chunk, diff)
		}
		if p.lastID != "1" || p.retry != 10*time.Millisecond {
			t.Errorf("chunk %d: last event ID %q retry %v, want 1 and 10ms", chunk, p.lastID, p.retry)
		}
	}
	p := &sseParser{max: 8}
	if err := p.feed([]byte("data: 0123456789\n"), func([]byte) bool { return false }); err == nil {
		t.Error("an event over the bound was accepted")
	}
}

// TestSniffReadsTaskCaps: the tap reads the task fields of the SDK's
// initialize and tools/list answers off the HTTP bodies, JSON or stream.
func TestSniffReadsTaskCaps(t *testing.T) {
	tp := newTap()
	body := func(ct, s string) *http.Response {
		return &http.Response{Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(s))}
	}
	r := body("application/json", `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}}}}`)
	tp.sniff([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`), r)
	io.ReadAll(r.Body)
	r = body("text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"charge\",\"execution\":{\"taskSupport\":\"required\"}},{\"name\":\"plain\"}]}}\n\n")
	tp.sniff([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`), r)
	io.ReadAll(r.Body)
	caps := tp.capsNow()
	if !caps.legacy || caps.protocolVersion != "2025-11-25" {
		t.Errorf("caps = %+v, want 2025-11-25 with tasks for tools/call", caps)
	}
	if ok, _ := taskCapable(caps, "charge"); !ok {
		t.Error("charge (taskSupport required) is not task-capable")
	}
	if ok, _ := taskCapable(caps, "plain"); ok {
		t.Error("plain (no taskSupport) is task-capable")
	}
}

// TestParamHeaders: SEP-2243 x-mcp-header properties, nested too, as
// headers; non-ASCII and edge whitespace Base64-wrapped; numbers only as
// safe integers; absent and non-primitive arguments left out.
func TestParamHeaders(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
		"count":  map[string]any{"type": "integer", "x-mcp-header": "Count"},
		"ratio":  map[string]any{"type": "integer", "x-mcp-header": "Ratio"},
		"dry":    map[string]any{"type": "boolean", "x-mcp-header": "Dry"},
		"note":   map[string]any{"type": "string", "x-mcp-header": "Note"},
		"absent": map[string]any{"type": "string", "x-mcp-header": "Absent"},
		"plain":  map[string]any{"type": "string"},
		"inner":  map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string", "x-mcp-header": "Inner-Id"}}},
	}}
	args := map[string]any{"region": "eu-west-1", "count": 42, "ratio": 1.5, "dry": true, "note": "café ", "plain": "x", "inner": map[string]any{"id": "i-1"}}
	want := map[string]string{
		"Mcp-Param-Region":   "eu-west-1",
		"Mcp-Param-Count":    "42",
		"Mcp-Param-Dry":      "true",
		"Mcp-Param-Note":     "=?base64?Y2Fmw6kg?=",
		"Mcp-Param-Inner-Id": "i-1",
	}
	if diff := cmp.Diff(want, paramHeaders(schema, args)); diff != "" {
		t.Errorf("paramHeaders (-want +got):\n%s", diff)
	}
}
