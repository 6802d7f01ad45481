package httpchannel

import (
	"testing"

	"github.com/latchhq/latch/internal/testing/pgtest"
)

// TestMain stops the PostgreSQL server the benchmarks start.
func TestMain(m *testing.M) { pgtest.Main(m) }
