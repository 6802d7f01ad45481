//go:build latch_mutants

package sim

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestMutantsAreCaught proves the simulator can fail: for each way
// engine/mutants_on.go breaks the engine, this test binary runs
// TestSimulate again with the engine so broken and wants a violation
// within 10,000 schedules.
//
//	go test -tags latch_mutants -run TestMutantsAreCaught ./controlplane/sim -v
func TestMutantsAreCaught(t *testing.T) {
	if os.Getenv("LATCH_MUTANT") != "" {
		t.Skip("already a mutant")
	}
	failing := regexp.MustCompile(`seed (\d+): ([^\n]*)`)
	for _, m := range []string{"no_attach", "early_absence", "send_after_fence"} {
		t.Run(m, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestSimulate$", "-sim.seeds=10000")
			cmd.Env = append(os.Environ(), "LATCH_MUTANT="+m)
			out, err := cmd.CombinedOutput()
			found := failing.FindSubmatch(out)
			if err == nil || found == nil {
				t.Fatalf("the %s mutant survived 10,000 schedules (err %v):\n%s", m, err, out)
			}
			t.Logf("caught at seed %s: %s", found[1], found[2])
		})
	}
}
