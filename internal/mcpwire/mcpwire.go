// Package mcpwire is the one place MCP wire terms are spelled: the protocol
// eras Latch speaks, the Streamable HTTP header names, the tasks methods,
// extension and metadata keys, and task statuses. The MCP front (as a
// server) and the mcp channel (as a client of upstream servers) both use
// it; neither spells these strings itself.
//
// Anyone may import it; it imports nothing.
package mcpwire

// Protocol eras (revisions) Latch speaks, by their dates. Revisions compare
// as strings: a later date is a later revision.
const (
	// Era20251125 is the revision with sessions (Mcp-Session-Id) and the
	// tasks utility (capabilities.tasks; tasks/result, tasks/list).
	Era20251125 = "2025-11-25"
	// Era20260728 is the first revision without sessions, with the tasks
	// extension (ExtensionTasks; tasks/get carries the result) and the
	// standard routing headers (HeaderMethod, HeaderName; SEP-2243).
	Era20260728 = "2026-07-28"
)

// Modern reports whether revision v is Era20260728 or later ("" is not).
func Modern(v string) bool { return v != "" && v >= Era20260728 }

// Streamable HTTP header names.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	// HeaderMethod and HeaderName are the Era20260728 routing headers: the
	// request's method, and its name (a tool's, a task's ID).
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
	// HeaderLastEventID resumes an SSE stream after its last event.
	HeaderLastEventID = "Last-Event-ID"
)

// Tasks: methods, extension and metadata keys.
const (
	MethodTasksGet    = "tasks/get"
	MethodTasksCancel = "tasks/cancel"
	MethodTasksUpdate = "tasks/update" // Era20260728
	MethodTasksResult = "tasks/result" // Era20251125
	MethodTasksList   = "tasks/list"   // Era20251125
	// NotificationTasksStatus tells a requestor a task's status changed
	// (Era20251125; optional, the requestor still polls).
	NotificationTasksStatus = "notifications/tasks/status"

	// ExtensionTasks is the Era20260728 tasks extension's identifier.
	ExtensionTasks = "io.modelcontextprotocol/tasks"
	// MetaRelatedTask ties a message to a task (Era20251125; tasks/result).
	MetaRelatedTask = "io.modelcontextprotocol/related-task"
	// MetaImmediateResponse is the text a host may hand the model at once
	// when a tools/call made a task (Era20251125, non-binding).
	MetaImmediateResponse = "io.modelcontextprotocol/model-immediate-response"
)

// TaskStatus is a task's status on the wire (both eras).
type TaskStatus string

// Task statuses.
const (
	TaskWorking       TaskStatus = "working"
	TaskInputRequired TaskStatus = "input_required"
	TaskCompleted     TaskStatus = "completed"
	TaskFailed        TaskStatus = "failed"
	TaskCancelled     TaskStatus = "cancelled"
)
