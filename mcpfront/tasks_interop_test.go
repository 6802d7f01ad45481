package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// tsTasks runs testdata/tsclient/tasks.mjs and decodes its JSON line into
// out. release, when set, runs once the target holds the call.
func tsTasks(t *testing.T, st *testStack, out any, release bool, args ...string) {
	t.Helper()
	node := tsNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"tasks.mjs", st.URL, st.tokens["alice"]}, args...)...)
	cmd.Dir = tsClientDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting node: %v", err)
	}
	if release {
		st.waitArrived(t)
		st.effect.release()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node tasks.mjs %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out); err != nil {
		t.Fatalf("tasks.mjs output %q: %v (stderr: %s)", stdout.String(), err, stderr.String())
	}
}

type tsToolResult struct {
	IsError           bool           `json:"isError"`
	StructuredContent CallResult     `json:"structuredContent"`
	Meta              map[string]any `json:"_meta"`
}

// The official TypeScript SDK drives tasks: (2025-11-25) a call creates a
// task and the client goes away mid-task; a new client follows the same task
// to completion and reads its result (delivered, one effect); the SDK's own
// task stream runs a call end to end; (2026-07-28, raw JSON-RPC through the
// SDK's transport) a long call returns a task at once and tasks/get follows
// it to completion.
func TestInteropTypeScriptTasks(t *testing.T) {
	t.Run("drop and follow", func(t *testing.T) {
		st := newTestStack(t, stackOptions{})
		var created struct {
			Task struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			} `json:"task"`
		}
		tsTasks(t, st, &created, false, "create", "slow_job", `{"job":"ts-drop"}`)
		key := st.waitArrived(t)
		if created.Task.TaskID != key || created.Task.Status != "working" {
			t.Fatalf("CreateTaskResult task = %+v, want working task %s", created.Task, key)
		}
		st.effect.release()
		var followed struct {
			Statuses []string     `json:"statuses"`
			Result   tsToolResult `json:"result"`
		}
		tsTasks(t, st, &followed, false, "follow", "slow_job", "{}", key)
		rel, _ := followed.Result.Meta[MetaRelatedTask].(map[string]any)
		if n := len(followed.Statuses); n == 0 || followed.Statuses[n-1] != "completed" || followed.Result.IsError ||
			followed.Result.StructuredContent.ExecutionID != key || rel["taskId"] != key {
			t.Errorf("followed = %+v, want statuses ending completed and the result of %s", followed, key)
		}
		if n := st.effect.count("/slow"); n != 1 {
			t.Errorf("effect count = %d, want 1", n)
		}
		st.waitState(t, key, recordv1.State_STATE_DELIVERED)
	})
	t.Run("sdk task stream", func(t *testing.T) {
		st := newTestStack(t, stackOptions{})
		var out struct {
			TaskID   string       `json:"taskId"`
			Messages []string     `json:"messages"`
			Result   tsToolResult `json:"result"`
		}
		tsTasks(t, st, &out, false, "stream", "deploy_release", `{"service":"api","version":"7"}`)
		if out.TaskID == "" || out.Result.IsError || out.Result.StructuredContent.ExecutionID != out.TaskID {
			t.Errorf("callToolStream = %+v, want a task and its successful result", out)
		}
		if n := st.effect.count("/v1/releases"); n != 1 {
			t.Errorf("effect count = %d, want 1", n)
		}
	})
	t.Run("2026-07-28 raw", func(t *testing.T) {
		st := newTestStack(t, stackOptions{})
		var out struct {
			Created  map[string]any `json:"created"`
			Statuses []string       `json:"statuses"`
			Task     struct {
				TaskID string       `json:"taskId"`
				Status string       `json:"status"`
				Result tsToolResult `json:"result"`
			} `json:"task"`
		}
		tsTasks(t, st, &out, true, "modern", "slow_job", `{"job":"ts-modern"}`)
		id, _ := out.Created["taskId"].(string)
		if out.Task.Status != "completed" || out.Task.TaskID != id || out.Task.Result.StructuredContent.ExecutionID != id {
			t.Errorf("modern task = %+v, want completed with the result of %s", out, id)
		}
		if n := st.effect.count("/slow"); n != 1 {
			t.Errorf("effect count = %d, want 1", n)
		}
		st.waitState(t, id, recordv1.State_STATE_DELIVERED)
	})
}
