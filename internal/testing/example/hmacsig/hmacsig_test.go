package hmacsig_test

import (
	"testing"

	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/example/hmacsig"
	"github.com/latchhq/latch/internal/testing/kindtest"
)

func init() { vault.Register(hmacsig.Kind{}) }

func TestContract(t *testing.T) {
	kindtest.Run(t, hmacsig.Kind{}, vault.Credential{Kind: hmacsig.Name, Fields: vault.Fields{"key_id": "k1", "secret": "hmac-secret-0123456789"}})
}
