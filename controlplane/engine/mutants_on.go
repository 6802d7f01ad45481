//go:build latch_mutants

package engine

import "os"

// A build with the latch_mutants tag breaks the engine the way LATCH_MUTANT
// names (no_attach, early_absence, send_after_fence), for the simulator's
// proof that it catches each (controlplane/sim TestMutantsAreCaught).
var (
	mutantNoAttach       = os.Getenv("LATCH_MUTANT") == "no_attach"
	mutantEarlyAbsence   = os.Getenv("LATCH_MUTANT") == "early_absence"
	mutantSendAfterFence = os.Getenv("LATCH_MUTANT") == "send_after_fence"
)
