//go:build !latch_mutants

package engine

// Mutants are deliberately broken builds the simulator must catch
// (controlplane/sim). In every build without the latch_mutants tag they are
// constant false and their branches compile away; mutants_on.go sets them
// from LATCH_MUTANT in a build with it.
const (
	// mutantNoAttach: a retry never attaches to its prior execution.
	mutantNoAttach = false
	// mutantEarlyAbsence: an absence counts as proof even before the
	// settle point.
	mutantEarlyAbsence = false
	// mutantSendAfterFence: a replica sends after its lease lapsed.
	mutantSendAfterFence = false
)
