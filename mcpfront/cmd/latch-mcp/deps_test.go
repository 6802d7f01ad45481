package main

import (
	"testing"

	"github.com/latchhq/latch/internal/testbin"
)

// TestDeps enforces the import rule: the MCP front reaches the control plane
// over gRPC only, so it links neither the control plane's packages nor its
// store, nor the host agent, nor any test support. The one exception is
// controlplane/lifecycle, the execution state sets, which imports only the
// record proto: the front asks it whether a state is still pending instead
// of keeping its own list.
func TestDeps(t *testing.T) {
	testbin.ForbidDepsExcept(t,
		[]string{"github.com/latchhq/latch/controlplane/lifecycle"},
		append([]string{
			"github.com/latchhq/latch/controlplane",
			"github.com/latchhq/latch/hostagent",
			"github.com/dgraph-io/badger",
		}, testbin.TestSupport...)...,
	)
}
