package mcpfront

import (
	"strings"
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestNotExecutedNoteRestsOnEvidence: the model is told a retry is safe only
// with the evidence that made the execution not_executed, never the bare
// claim that nothing reached the target.
func TestNotExecutedNoteRestsOnEvidence(t *testing.T) {
	reason := "the target has no record of it: status endpoint answered 404 (absent); asked after the settle point"
	note, isError := noteFor(&recordv1.Execution{Id: "act_1", State: recordv1.State_STATE_NOT_EXECUTED, Reason: reason}, "")
	if strings.Contains(note, "nothing reached the target") {
		t.Errorf("noteFor(not_executed) = %q, claims nothing reached the target", note)
	}
	if !strings.Contains(note, reason) || !strings.Contains(note, "evidence") || !isError {
		t.Errorf("noteFor(not_executed) = %q, %v; want the evidence (%q) and isError", note, isError, reason)
	}
}
