package store

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestSameRecord: equal bytes say equal; bytes that differ leave the
// decision to proto.Equal, so an equal record encoded another way still
// matches and a changed record never does.
func TestSameRecord(t *testing.T) {
	x := &recordv1.Execution{Id: "act_1", Actor: "alice", Tool: "deploy", State: recordv1.State_STATE_COMPLETED, JournalIndex: 7,
		Evidence: &recordv1.Evidence{JsonrpcId: "3"}, ResultSha256: []byte{1, 2, 3}}
	stored, err := proto.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(x).(*recordv1.Execution)
	if b, _ := proto.Marshal(want); string(b) != string(stored) {
		t.Fatal("an equal record encodes otherwise: the bytes path would never be taken")
	}
	if !sameRecord(x, stored, want) || !sameRecord(x, nil, want) {
		t.Error("an equal record does not match")
	}

	// The same record with its fields in reverse order on the wire.
	var reordered []byte
	var fields [][]byte
	for b := stored; len(b) > 0; {
		_, _, n := protowire.ConsumeField(b)
		if n < 0 {
			t.Fatal("malformed encoding")
		}
		fields, b = append(fields, b[:n]), b[n:]
	}
	for i := len(fields) - 1; i >= 0; i-- {
		reordered = append(reordered, fields[i]...)
	}
	y := &recordv1.Execution{}
	if err := proto.Unmarshal(reordered, y); err != nil {
		t.Fatal(err)
	}
	if string(reordered) == string(stored) || !sameRecord(y, reordered, want) {
		t.Error("an equal record encoded in another field order does not match")
	}

	changed := proto.Clone(x).(*recordv1.Execution)
	changed.State = recordv1.State_STATE_DISPATCHED
	cb, _ := proto.Marshal(changed)
	if sameRecord(changed, cb, want) || sameRecord(changed, nil, want) {
		t.Error("a changed record matches")
	}
}
