package store

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func wireTestExecution() *recordv1.Execution {
	at := timestamppb.New(timestamppb.Now().AsTime().Truncate(1e3))
	return &recordv1.Execution{
		Id: "act_01", Fingerprint: "hmac-sha256:ab", Actor: "agent:ci", IntentScope: "actor:agent:ci", Tool: "deploy", Target: "https://t/x",
		Channel: "http", Replay: "idempotency_key", CanonicalIntent: []byte(`{"v":1}`), State: recordv1.State_STATE_COMPLETED,
		Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 201, ResultRef: "sha256:00", AcceptedAt: at, CompletedAt: at,
		Evidence: &recordv1.Evidence{JsonrpcId: "7"}, Arguments: []byte(`{"version":"1"}`), Attempts: 1, JournalIndex: 41,
		ResultSha256: []byte{1, 2, 3},
	}
}

// TestWireDigestsSeeEveryField: changing any one field of an execution
// changes its wire digests (the rest, or the fields fixed at acceptance,
// or for journal_index the index read), so bytes that agree are records
// that agree field by field.
func TestWireDigestsSeeEveryField(t *testing.T) {
	dg := newDigester()
	base := wireTestExecution()
	enc := func(x *recordv1.Execution) []byte {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bw, ok := dg.execution(enc(base))
	if !ok || bw.journalIndex != 41 || bw.state != recordv1.State_STATE_COMPLETED || string(bw.fingerprint) != "hmac-sha256:ab" || !bytes.Equal(bw.result, []byte{1, 2, 3}) {
		t.Fatalf("wire digests of the base record = %+v, %v", bw, ok)
	}
	fields := base.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		x := proto.Clone(base).(*recordv1.Execution)
		m := x.ProtoReflect()
		switch fd.Kind() {
		case protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(m.Get(fd).String()+"x"))
		case protoreflect.BytesKind:
			m.Set(fd, protoreflect.ValueOfBytes(append(bytes.Clone(m.Get(fd).Bytes()), 'x')))
		case protoreflect.BoolKind:
			m.Set(fd, protoreflect.ValueOfBool(!m.Get(fd).Bool()))
		case protoreflect.EnumKind:
			m.Set(fd, protoreflect.ValueOfEnum(m.Get(fd).Enum()+1))
		case protoreflect.Int32Kind:
			m.Set(fd, protoreflect.ValueOfInt32(int32(m.Get(fd).Int()+1)))
		case protoreflect.Int64Kind:
			m.Set(fd, protoreflect.ValueOfInt64(m.Get(fd).Int()+1))
		case protoreflect.Uint64Kind:
			m.Set(fd, protoreflect.ValueOfUint64(m.Get(fd).Uint()+1))
		case protoreflect.MessageKind:
			switch v := m.Mutable(fd).Message().Interface().(type) {
			case *timestamppb.Timestamp:
				v.Seconds++
			case *recordv1.Evidence:
				v.JsonrpcId += "x"
			case *recordv1.Observation:
				v.PriorExecutionId += "x"
			default:
				t.Fatalf("field %s: message type %T: teach this test to change it", fd.Name(), v)
			}
		default:
			t.Fatalf("field %s: kind %v: teach this test to change it", fd.Name(), fd.Kind())
		}
		w, ok := dg.execution(enc(x))
		if !ok {
			t.Fatalf("field %s changed: the fast path refused the record", fd.Name())
		}
		if w.rest == bw.rest && w.fixed == bw.fixed && w.journalIndex == bw.journalIndex {
			t.Errorf("field %s changed, wire digests did not", fd.Name())
		}
	}
}

// TestWireWalkAcceptsOnlyWhatDecodes: whatever the fast path reads,
// proto.Unmarshal decodes, and whatever it reads of an encoding is what
// the decoded message holds: over every single-byte change and every
// truncation of an encoded execution and journal entry.
func TestWireWalkAcceptsOnlyWhatDecodes(t *testing.T) {
	dg := newDigester()
	x := wireTestExecution()
	xb, err := proto.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := proto.Marshal(&recordv1.JournalEntry{Index: 3, ExecutionId: "act_01", Kind: "transition", Execution: x, Reason: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	variants := func(b []byte) [][]byte {
		var out [][]byte
		for i := range b {
			out = append(out, b[:i])
			for _, d := range []byte{1, 0x80, 0xff} {
				c := bytes.Clone(b)
				c[i] ^= d
				out = append(out, c)
			}
		}
		return out
	}
	fast := 0
	for _, b := range variants(xb) {
		w, ok := dg.execution(b)
		if !ok {
			continue
		}
		fast++
		got := &recordv1.Execution{}
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatalf("the fast path read execution bytes %x that do not decode: %v", b, err)
		}
		if w.state != got.GetState() || string(w.fingerprint) != got.GetFingerprint() || !bytes.Equal(w.result, got.GetResultSha256()) || w.journalIndex != got.GetJournalIndex() {
			t.Fatalf("the fast path read %+v from %x, which decodes to %v", w, b, got)
		}
	}
	for _, b := range variants(eb) {
		we, ok := readWireEntry(b)
		if ok && we.hasExec {
			_, ok = dg.execution(we.execution) // the check's own step: readWireEntry leaves the snapshot to it
		}
		if !ok {
			continue
		}
		fast++
		got := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatalf("the fast path read entry bytes %x that do not decode: %v", b, err)
		}
		if string(we.executionID) != got.GetExecutionId() || string(we.kind) != got.GetKind() || we.entryKind != got.GetEntryKind() || we.hasExec != (got.GetExecution() != nil) {
			t.Fatalf("the fast path read %+v from %x, which decodes to %v", we, b, got)
		}
	}
	if fast == 0 {
		t.Fatal("the fast path read none of the variants")
	}
}

// TestWireWalkRefusesAToken: an entry carrying a token goes the decoding
// way (the check keeps the token).
func TestWireWalkRefusesAToken(t *testing.T) {
	b, err := proto.Marshal(&recordv1.JournalEntry{Index: 1, Kind: "token_issued", Token: &recordv1.AgentToken{Id: "tok_1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := readWireEntry(b); ok {
		t.Fatal("readWireEntry read an entry with a token")
	}
}

// BenchmarkWireRead measures the journal pass's read of one entry (its
// fields and its snapshot's, without hashing) and the record scan's
// digests of one record, on records of the shape Latch writes.
func BenchmarkWireRead(b *testing.B) {
	x := wireTestExecution()
	xb, err := proto.Marshal(x)
	if err != nil {
		b.Fatal(err)
	}
	eb, err := proto.Marshal(&recordv1.JournalEntry{Index: 3, ExecutionId: "act_01", Kind: "transition", Execution: x, Reason: "target answered 201", Time: timestamppb.Now()})
	if err != nil {
		b.Fatal(err)
	}
	dg := newDigester()
	b.Run("entry", func(b *testing.B) {
		for b.Loop() {
			we, ok := readWireEntry(eb)
			if !ok {
				b.Fatal("refused")
			}
			if _, ok := execFacts(we.execution); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("record", func(b *testing.B) {
		for b.Loop() {
			if _, ok := dg.execution(xb); !ok {
				b.Fatal("refused")
			}
		}
	})
}

// TestValidUTF8: validUTF8 says what utf8.Valid says, for strings of every
// length up to 40 with a non-ASCII byte, a valid multi-byte rune or an
// invalid sequence at every position.
func TestValidUTF8(t *testing.T) {
	for n := range 41 {
		base := bytes.Repeat([]byte{'a'}, n)
		cases := [][]byte{base}
		for i := range n {
			for _, ins := range [][]byte{{0xff}, {0x80}, []byte("é"), []byte("€"), {0xe2, 0x82}, {0xc3}} {
				c := append(append(append([]byte{}, base[:i]...), ins...), base[i:]...)
				cases = append(cases, c)
			}
		}
		for _, c := range cases {
			if got, want := validUTF8(c), utf8.Valid(c); got != want {
				t.Fatalf("validUTF8(%q) = %v, utf8.Valid says %v", c, got, want)
			}
		}
	}
}
