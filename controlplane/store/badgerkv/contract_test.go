package badgerkv

import (
	"testing"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/testing/kvtest"
)

// TestKVContract holds the Badger backend to the KV contract.
func TestKVContract(t *testing.T) {
	kvtest.Run(t, func(t testing.TB) backend.KV {
		kv, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return kv
	})
}
