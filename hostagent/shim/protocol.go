package shim

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/latchhq/latch/internal/redact"
)

// ExitGateClosed is the gate's exit code when the gate never opened.
const ExitGateClosed = 125

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
	// SecretEnv names the entries of Env whose values are secret: the shim
	// redacts them from the output file and the status file's reason. The
	// values travel only in Env, over the control channel.
	SecretEnv []string `json:"secret_env,omitempty"`
	// SecretValues are the bare secrets inside those entries' values
	// (RunRequest.secret_values): redacted too, in the same forms, so a
	// secret the command prints without the text around it is replaced.
	SecretValues []string `json:"secret_values,omitempty"`
}

// Redactor returns the redactor of the secret values of s (nil when it
// names none): every value of an Env entry SecretEnv names and every one of
// SecretValues, in the forms package redact looks for.
func (s *Spec) Redactor() *redact.Redactor {
	if len(s.SecretEnv) == 0 && len(s.SecretValues) == 0 {
		return nil
	}
	var needles [][]byte
	for _, kv := range s.Env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(s.SecretEnv, k) {
			needles = redact.Needles(needles, v)
		}
	}
	for _, v := range s.SecretValues {
		needles = redact.Needles(needles, v)
	}
	return redact.New(needles)
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
