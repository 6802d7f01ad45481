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
// kind_host.go, kind_mcp.go); a new kind names its own.

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

// Mode says what Latch does with a tool's calls: enforce its contract, or
// observe them (forward each call as it comes and record what enforcement
// would have done). Switching a tool from one to the other is one catalog
// change; nothing else in its contract changes meaning.
type Mode string

const (
	// ModeEnforce: calls are matched, attached, held and approved by the
	// contract (the default).
	ModeEnforce Mode = "enforce"
	// ModeObserve: every call is forwarded as it comes (no attach, no
	// hold, no approval), still with an execution ID, fingerprint and
	// journal record, and the record says what enforcement would have
	// done. The target sees only what it saw before Latch: no idempotency
	// key or execution ID is added to the request. replay may be left out
	// until someone decides it (the observe report lists such tools).
	ModeObserve Mode = "observe"
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
	// Warnings are what the loader could not check but a person should
	// (a remote host agent's socket): the catalog loads with them.
	Warnings []Problem
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

	// Timeout bounds one exchange with the target: an HTTP exchange
	// (default DefaultHTTPTimeout), a command (when its tool sets none; 0:
	// none), an upstream call (the upstream's timeout).
	Timeout time.Duration
	// Mode is the mode of the target's tools that set none ("" when the
	// target sets none: enforce).
	Mode Mode
	// Settle is how long after a request can no longer be in flight (its
	// send plus the dispatch timeout) the target may still not show it at
	// its status endpoint or agent (default DefaultSettle). 0 says the
	// target commits before answering. An "absent" answer proves nothing
	// happened only when observed after that point.
	Settle time.Duration

	// The settings of the built-in kinds, each owned by its kind
	// (kind_http.go, kind_host.go); their fields read as the target's own
	// (t.BaseURL, t.HostagentSocket).
	HTTPTarget
	HostTarget

	// Spec holds the settings of a target of a kind outside this package,
	// set by its Kind's ParseTarget.
	Spec any
	// kind is the Kind the target was loaded with (Kind()).
	kind Kind
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

	// Timeout bounds the command or request (0: the target's default).
	Timeout time.Duration

	// The actions of the built-in kinds, each owned by its kind
	// (kind_http.go, kind_host.go, kind_mcp.go); their fields read as the
	// tool's own (t.Request, t.Command, t.UpstreamTool).
	HTTPAction
	CommandAction
	UpstreamAction

	// Action is the action of a tool of a kind outside this package, set by
	// its Kind's ParseTool.
	Action any

	// Mode is the tool's mode in force: its own mode key, else its
	// target's (or upstream's), else ModeEnforce.
	Mode Mode
	// Replay is the replay class; "" only in observe mode, for a tool
	// whose contract has not decided it yet (ContractComplete).
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
	// NotifyCompleted: `events: [completed]`, an event goes to the
	// operator's sinks when an execution of the tool completes.
	NotifyCompleted bool
}

// SideEffecting reports whether calls of the tool change the world. An
// observed tool without a replay class yet counts as side-effecting: until
// someone says otherwise, its calls may change the world.
func (t *Tool) SideEffecting() bool { return t.Replay != ReplayReadOnly }

// Observed reports whether the tool's calls are observed, not enforced.
func (t *Tool) Observed() bool { return t.Mode == ModeObserve }

// ContractComplete reports whether the tool's contract says everything
// enforcement needs: a tool in observe mode may still lack its replay
// class, and switching it to enforce then needs that decision first.
func (t *Tool) ContractComplete() bool { return t.Replay != "" }
