package faultsuite

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"testing"

	"github.com/latchhq/latch/internal/testing/testbin"
)

var (
	flagTrials = flag.Int("faultsuite.trials", 0, "run the randomized fault suite with this many trials (0: skip; env LATCH_FAULT_TRIALS)")
	flagSeed   = flag.Int64("faultsuite.seed", 0, "seed of the first trial (0: from the clock; env LATCH_FAULT_SEED); with -faultsuite.trials=1 it replays one trial")
	flagLanes  = flag.Int("faultsuite.lanes", 2, "independent stacks running trials side by side (env LATCH_FAULT_LANES)")
)

// The real binaries, built once when the suite runs.
var latchBin, mcpBin, agentBin string

// settings reads the flags, falling back to the environment.
func settings() (trials int, seed int64, lanes int, err error) {
	trials, seed, lanes = *flagTrials, *flagSeed, *flagLanes
	if v := os.Getenv("LATCH_FAULT_TRIALS"); trials == 0 && v != "" {
		if trials, err = strconv.Atoi(v); err != nil || trials < 0 {
			return 0, 0, 0, fmt.Errorf("LATCH_FAULT_TRIALS=%q is not a number of trials", v)
		}
	}
	if v := os.Getenv("LATCH_FAULT_SEED"); seed == 0 && v != "" {
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("LATCH_FAULT_SEED=%q is not an integer seed", v)
		}
	}
	if v := os.Getenv("LATCH_FAULT_LANES"); v != "" && !isFlagSet("faultsuite.lanes") {
		if lanes, err = strconv.Atoi(v); err != nil {
			return 0, 0, 0, fmt.Errorf("LATCH_FAULT_LANES=%q is not a number of lanes", v)
		}
	}
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	if lanes < 1 {
		lanes = 1
	}
	return trials, seed, min(lanes, max(trials, 1)), nil
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func TestMain(m *testing.M) {
	flag.Parse()
	if n, _, _, err := settings(); err != nil || n == 0 {
		os.Exit(m.Run()) // the suite skips (or reports the bad setting)
	}
	testbin.Main(m, []string{
		"github.com/latchhq/latch/controlplane/cmd/latch",
		"github.com/latchhq/latch/mcpfront/cmd/latch-mcp",
		"github.com/latchhq/latch/hostagent/cmd/latch-hostagent",
	}, []*string{&latchBin, &mcpBin, &agentBin})
}
