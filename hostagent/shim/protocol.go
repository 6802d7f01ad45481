package shim

import (
	"errors"
	"time"
)

// ExitGateClosed is the gate's exit code when the gate never opened.
const ExitGateClosed = 125

// TestPauseEnv, when set in the shim's environment to a Go duration, makes the
// shim pause that long (at most a minute) after the command is waiting at the
// gate and before it tells the agent. Tests use it to kill a shim before the
// gate opens; it has no other use.
const TestPauseEnv = "LATCH_HOSTAGENT_TEST_SHIM_PAUSE"

var (
	// ErrShimGone means the shim closed the control channel early.
	ErrShimGone = errors.New("shim: control channel closed before the shim answered")
	// ErrNotStarted means the shim could not start the command.
	ErrNotStarted = errors.New("shim: command not started")
	// ErrProtocol means an unexpected message arrived on the control channel.
	ErrProtocol = errors.New("shim: unexpected message on control channel")
)

// Spec is what the agent asks the shim to run.
type Spec struct {
	ExecutionID string        `json:"execution_id"`
	Argv        []string      `json:"argv"`
	Cwd         string        `json:"cwd,omitempty"`
	Env         []string      `json:"env"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	OutputCap   int64         `json:"output_cap"`
}

// Started names the command waiting at the gate.
type Started struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	BootID     string `json:"boot_id"`
}

type message struct {
	Spec    *Spec    `json:"spec,omitempty"`
	Started *Started `json:"started,omitempty"`
	Open    bool     `json:"open,omitempty"`
	Abort   string   `json:"abort,omitempty"`
	Done    bool     `json:"done,omitempty"`
	Error   string   `json:"error,omitempty"`
}
