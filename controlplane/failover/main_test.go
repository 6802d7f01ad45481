package failover

import (
	"flag"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/testbin"
)

var (
	flagKills = flag.Int("failover.kills", 3, "SIGKILLs of the active replica in TestFailoverUnderLoad, besides one database freeze (full run: 24)")
	flagSeed  = flag.Int64("failover.seed", 0, "seed of the random choices (0: from the clock)")
	flagAsync = flag.Bool("failover.async", false, "also run TestDatabaseFailoverAsync (asynchronous replication: logs what a database failover loses)")
)

// The real binaries, built once.
var latchBin, mcpBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		testbin.Exit(m.Run())
	}
	testbin.Main(m, []string{
		"github.com/latchhq/latch/controlplane/cmd/latch",
		"github.com/latchhq/latch/mcpfront/cmd/latch-mcp",
	}, []*string{&latchBin, &mcpBin})
}

// seed returns the run's seed, logging it.
func seed(t *testing.T) int64 {
	s := *flagSeed
	if s == 0 {
		s = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("seed %d (replay with -failover.seed=%d)", s, s)
	return s
}
