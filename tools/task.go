package tools

import (
	"slices"
	"strings"
)

// TaskSupport says whether an MCP client may (optional), must (required) or
// must not (forbidden) call the tool as a task: the 2026-07-28 extension
// io.modelcontextprotocol/tasks and the 2025-11-25 tasks utility (the tool's
// execution.taskSupport). A task is the tool call's execution: its task ID is
// the execution ID (mcpfront/tasks.go).
type TaskSupport string

const (
	TaskOptional  TaskSupport = "optional"
	TaskRequired  TaskSupport = "required"
	TaskForbidden TaskSupport = "forbidden"
)

var taskSupports = []string{string(TaskOptional), string(TaskRequired), string(TaskForbidden)}

// DefaultTaskSupport is a tool's task support when its contract has no
// `task` key: optional for side-effecting tools (they may wait for a person
// or a slow target), forbidden for read-only ones (they answer at once).
func DefaultTaskSupport(r Replay) TaskSupport {
	if r == ReplayReadOnly {
		return TaskForbidden
	}
	return TaskOptional
}

// parseTask reads the tool's `task` key into t.Task (after replay is known).
func (p *parser) parseTask(t *Tool, f map[string]kv, what string) {
	t.Task = DefaultTaskSupport(t.Replay)
	e, ok := f["task"]
	if !ok {
		return
	}
	s, ok := p.str(e, what+": task")
	if !ok {
		return
	}
	if !slices.Contains(taskSupports, s) {
		p.addf(e.keyNode, "%s: unknown task support %q (want %s)", what, s, strings.Join(taskSupports, ", "))
		return
	}
	t.Task = TaskSupport(s)
}
