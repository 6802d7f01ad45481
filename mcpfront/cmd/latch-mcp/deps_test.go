package main

import (
	"testing"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// TestDeps enforces the import rule: the MCP front reaches the control plane
// over gRPC only, so it links neither the control plane's packages nor its
// store, nor the host agent, nor any test support, with no exception: the
// execution state sets it shares with the control plane are the neutral
// leaf internal/lifecycle.
func TestDeps(t *testing.T) {
	testbin.ForbidDeps(t,
		append([]string{
			"github.com/latchhq/latch/controlplane",
			"github.com/latchhq/latch/hostagent",
			"github.com/dgraph-io/badger",
		}, testbin.TestSupport...)...,
	)
}
