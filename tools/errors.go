package tools

import (
	"errors"
	"fmt"

	"github.com/latchhq/latch/internal/yamlpos"
)

var (
	// ErrInvalid is matched (errors.Is) by every *LoadError: the catalog was
	// refused and nothing of it may be used.
	ErrInvalid = errors.New("tools: invalid catalog")
	// ErrInvalidArguments means a call's arguments do not satisfy the tool's
	// input schema or cannot be rendered into its request or command. The
	// message names the argument and the rule, and is written for the caller.
	ErrInvalidArguments = errors.New("tools: invalid arguments")
	// ErrWrongChannel means a rendering method was called on a tool of the
	// other kind (RenderRequest on an SSH tool, RenderArgv on an HTTP tool).
	ErrWrongChannel = errors.New("tools: method does not apply to this tool's channel")
)

// Problem is one thing wrong with a catalog, located in its file.
type Problem = yamlpos.Problem

// LoadError lists every problem found in a refused catalog, in file order.
type LoadError struct {
	Problems []Problem
}

// Error returns the problems one per line, each "file:line: what is wrong".
func (e *LoadError) Error() string {
	return yamlpos.Join(e.Problems)
}

// Is makes errors.Is(err, ErrInvalid) true for a *LoadError.
func (e *LoadError) Is(target error) bool { return target == ErrInvalid }

// ArgumentError is every error PrepareArguments and the renderers return for
// a call's arguments; it matches ErrInvalidArguments. Problem is the message
// written for the caller (it names the argument and what is expected),
// without any package prefix: the MCP front hands it to the model as is.
type ArgumentError struct {
	Problem string
}

func (e *ArgumentError) Error() string { return ErrInvalidArguments.Error() + ": " + e.Problem }

// Is makes errors.Is(err, ErrInvalidArguments) true for an *ArgumentError.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArguments }

// ArgumentProblem returns the caller-facing problem of the *ArgumentError in
// err's chain, or "" when there is none.
func ArgumentProblem(err error) string {
	var ae *ArgumentError
	if errors.As(err, &ae) {
		return ae.Problem
	}
	return ""
}

// argError builds an *ArgumentError.
func argError(format string, args ...any) error {
	return &ArgumentError{Problem: fmt.Sprintf(format, args...)}
}
