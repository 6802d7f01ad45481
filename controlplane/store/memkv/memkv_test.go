package memkv

import (
	"testing"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/testing/kvtest"
)

// TestKVContract holds the in-memory backend to the KV contract.
func TestKVContract(t *testing.T) {
	kvtest.Run(t, func(testing.TB) backend.KV { return New() })
}
