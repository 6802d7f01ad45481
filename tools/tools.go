// Package tools is Latch's tool catalog: the contract of every tool an agent
// may call (target, request or command template, replay class, attach window,
// approval, fingerprint rules), its YAML loader and its validator.
//
// A tool without a complete contract is never loaded: Load refuses the whole
// catalog and lists every problem as "file:line: what is wrong".
//
// Any Latch component may import this package; it imports nothing of Latch.
package tools

import (
	"encoding/json"
	"time"
)

// Channel is how the control plane reaches a target: the name of a
// channel kind (Kind).
type Channel string

// The built-in channels are named next to their kinds (kind_http.go,
// kind_host.go, upstream.go); a new kind names its own.

// Replay is a tool's replay class (docs/design §6).
type Replay string

const (
	ReplayReadOnly       Replay = "read_only"
	ReplayIdempotencyKey Replay = "idempotency_key"
	ReplayStatusQuery    Replay = "status_query"
	ReplayReview         Replay = "review"
)

// Approval says when a human must approve an execution.
type Approval string

const (
	ApprovalNone      Approval = "none"
	ApprovalSession   Approval = "session"
	ApprovalEveryCall Approval = "every_call"
)

// RepeatOfArgument is the optional argument every side-effecting tool accepts
// to cite the execution it deliberately repeats (docs/design §5).
const RepeatOfArgument = "repeat_of"

// Catalog is a loaded, validated catalog.
type Catalog struct {
	// Source is the file the catalog was loaded from.
	Source  string
	Targets map[string]*Target
	Tools   map[string]*Tool
	// Upstreams are the upstream MCP servers (upstream.go); each is also a
	// target of channel mcp.
	Upstreams map[string]*Upstream
	// Held are the tools of the file left out of the catalog in force, and
	// why (an upstream tool that is not offered, or whose offer changed):
	// set by the control plane when it binds upstreams, never by Parse.
	Held []HeldTool
}

// HeldTool is a tool left out of the catalog in force, and why.
type HeldTool struct {
	Tool, Reason string
}

// Target is a place actions are sent to.
type Target struct {
	Name    string
	Channel Channel
	// Credential is the credential_ref held by the vault ("" for none).
	Credential string

	// HTTP targets.
	BaseURL           string
	IdempotencyHeader string
	Status            *StatusQuery
	// AllowPrivate permits private (RFC 1918, ULA) and loopback addresses.
	AllowPrivate bool
	// Timeout bounds one HTTP exchange (default 30s).
	Timeout time.Duration
	// Settle is how long after a request can no longer be in flight (its
	// send plus the dispatch timeout) the target may still not show it at
	// its status endpoint or agent (default DefaultSettle). 0 says the
	// target commits before answering. An "absent" answer proves nothing
	// happened only when observed after that point.
	Settle time.Duration

	// SSH targets.
	Address string
	User    string
	// HostKey is the pinned host key in authorized_keys form.
	HostKey string

	// SSH and local targets: the hostagent's unix socket ("" for plain SSH).
	HostagentSocket string

	// Spec holds the settings of a target of a kind outside this package,
	// set by its Kind's ParseTarget.
	Spec any
	// kind is the Kind the target was loaded with (Kind()).
	kind Kind
}

// StatusQuery is how to ask an HTTP target what became of an execution.
// "{execution_id}" in Path is replaced by the execution ID. Its answers mean
// (see Classify): a status in InProgress, the request is still being
// processed (no evidence, ask again); in Absent, the target has no record of
// the ID (evidence only after the settle point); any other 2xx, completed,
// the answer being the stored result; anything else, no evidence.
type StatusQuery struct {
	Method string
	Path   string
	// Absent lists the "no record of this ID" statuses (default 404, 410).
	Absent []int
	// InProgress lists the "still in progress" statuses (default 202, 409, 425).
	InProgress []int
}

// Request is an HTTP tool's request template. Strings may contain {{arg}}.
type Request struct {
	Method  string
	Path    string
	Query   map[string]string
	Headers map[string]string
	// Body is a JSON-shaped template tree (map[string]any, []any, string,
	// int64 or float64 as written, bool, nil). A string that is exactly
	// "{{arg}}" becomes the argument's JSON value (left out when absent);
	// other strings get plain substitution.
	Body any
}

// Fingerprint lists arguments that are dropped from, or hashed into, the
// canonical intent record.
type Fingerprint struct {
	Ignore []string
	Secret []string
}

// Tool is one tool's contract.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments (without repeat_of).
	// Load sets a no-arguments schema when the catalog gives none; see
	// MCPInputSchema for the schema advertised to agents.
	InputSchema json.RawMessage
	// Defaults are materialised by PrepareArguments for absent arguments;
	// values have PrepareArguments' shape (numbers are float64). They include
	// "default" keywords of the schema's top-level properties.
	Defaults map[string]any
	Target   string

	// HTTP tools.
	Request *Request

	// SSH and local tools: argv, each element templated; never a shell string.
	Command []string
	// PositionalAfterDoubleDash lists arguments that are whole positional
	// command elements: Latch passes "--" before the first of them, so a
	// value starting with "-" is data, not an option (options.go).
	PositionalAfterDoubleDash []string
	Cwd                       string
	Env                       map[string]string
	// Timeout bounds the command or request (0: the target's default).
	Timeout time.Duration

	// Upstream tools (upstream.go): the upstream, its name for the tool,
	// and the argument it treats as an idempotency key ("" for none).
	Upstream            string
	UpstreamTool        string
	IdempotencyArgument string

	// Action is the action of a tool of a kind outside this package, set by
	// its Kind's ParseTool.
	Action any

	Replay Replay
	// AttachWindow bounds matching; ignored when UntilResolved. Load sets
	// DefaultAttachWindow for side-effecting tools that do not set one.
	AttachWindow  time.Duration
	UntilResolved bool
	Approval      Approval
	// Task is the tool's MCP task support (task.go); Load fills the
	// default (DefaultTaskSupport) when the contract has no `task` key.
	Task        TaskSupport
	Fingerprint Fingerprint
}

// SideEffecting reports whether calls of the tool change the world.
func (t *Tool) SideEffecting() bool { return t.Replay != ReplayReadOnly }
