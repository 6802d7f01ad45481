package receipt

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestFieldNumbersAreTheRecords holds the verifier's field numbers and
// enum names (it reads records without the record package) to
// latch.record.v1's descriptors.
func TestFieldNumbersAreTheRecords(t *testing.T) {
	entry := (&recordv1.JournalEntry{}).ProtoReflect().Descriptor().Fields()
	exec := (&recordv1.Execution{}).ProtoReflect().Descriptor().Fields()
	for _, tc := range []struct {
		fields protoreflect.FieldDescriptors
		name   protoreflect.Name
		num    protoreflect.FieldNumber
	}{
		{entry, "index", entryIndex}, {entry, "execution", entryExecution},
		{exec, "id", execID}, {exec, "fingerprint", execFingerprint}, {exec, "actor", execActor},
		{exec, "tool", execTool}, {exec, "state", execState}, {exec, "outcome", execOutcome},
		{exec, "target_status", execTargetStatus}, {exec, "result_sha256", execResultSHA256},
	} {
		fd := tc.fields.ByName(tc.name)
		if fd == nil || fd.Number() != tc.num {
			t.Errorf("field %s: number %v, want %d", tc.name, fd.Number(), tc.num)
		}
	}
	states := recordv1.State(0).Descriptor().Values()
	if states.Len() != len(stateNames) {
		t.Errorf("State has %d values, the verifier names %d: add the new ones to stateNames (and receipt.mjs)", states.Len(), len(stateNames))
	}
	for i := range states.Len() {
		v := states.Get(i)
		if int(v.Number()) >= len(stateNames) || "STATE_"+upper(stateNames[v.Number()]) != string(v.Name()) {
			t.Errorf("state %d is %s, the verifier does not name it so", v.Number(), v.Name())
		}
	}
	outcomes := recordv1.Outcome(0).Descriptor().Values()
	if outcomes.Len() != len(outcomeNames) {
		t.Errorf("Outcome has %d values, the verifier names %d", outcomes.Len(), len(outcomeNames))
	}
	for i := 1; i < outcomes.Len(); i++ {
		v := outcomes.Get(i)
		if "OUTCOME_"+upper(outcomeNames[v.Number()]) != string(v.Name()) {
			t.Errorf("outcome %d is %s, the verifier does not name it so", v.Number(), v.Name())
		}
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
