package store

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The full state check's fast path: digests of execution records taken
// from their wire form, without decoding and re-encoding them.
//
// An execution record and the journal snapshot it must equal are both the
// protobuf encoding of one recordv1.Execution, so when their bytes agree
// (field by field, leaving out journal_index, which the snapshot holds one
// step behind, and keeping the fields fixed at acceptance apart) the
// records agree: equal bytes decode to equal messages. The converse does
// not hold (an encoder may order or split fields otherwise), so a wire
// digest that differs only sends the execution to the record-by-record
// comparison of the decoded messages (checkAll's differ list), which
// decides as the decoding check always did: the fast path can only skip
// the decoding of records whose bytes are already those the journal holds.
// Any wire form it does not read plainly (see walk) falls back to
// decoding that one record.

// Field numbers the fast path reads, from the descriptors so that a
// renumbering cannot go unnoticed.
var (
	entryFields = fieldNumbers((&recordv1.JournalEntry{}).ProtoReflect().Descriptor())
	execFields  = fieldNumbers((&recordv1.Execution{}).ProtoReflect().Descriptor())

	// entryFieldsShallow is entryFields without the walk into the
	// execution snapshot: the check walks it itself (digester.execution).
	entryFieldsShallow = func() *wireFields {
		f := *entryFields
		f.sub = slices.Clone(f.sub)
		f.sub[entryExecution] = nil
		return &f
	}()

	entryExecutionID = entryFields.num("execution_id")
	entryKind        = entryFields.num("kind")
	entryEntryKind   = entryFields.num("entry_kind")
	entryExecution   = entryFields.num("execution")
	entryToken       = entryFields.num("token")
	entrySession     = entryFields.num("session")
	entryCatalog     = entryFields.num("catalog")
	entryPin         = entryFields.num("upstream_tool_pin")

	execFingerprint     = execFields.num("fingerprint")
	execState           = execFields.num("state")
	execJournalIndex    = execFields.num("journal_index")
	execResultSha256    = execFields.num("result_sha256")
	execCanonicalIntent = execFields.num("canonical_intent")
	execArguments       = execFields.num("arguments")
	execEvidence        = execFields.num("evidence")
)

// wireFields is what the fast path knows of a message type's fields, by
// field number: how the field is read, its schema's wire type, whether it
// is a string, and for a message field its type's fields.
type wireFields struct {
	desc protoreflect.MessageDescriptor
	how  []fieldHow
	wire []protowire.Type
	str  []bool
	sub  []*wireFields
}

type fieldHow uint8

const (
	fieldUnknown fieldHow = iota // not in the schema: kept as it is, as proto keeps it
	fieldSingular
	fieldRefused // repeated, map or group: the fast path does not read it
)

// fieldNumbers reads md's schema, and those of the message types of its
// fields (seen holds the types already read, for recursive schemas).
func fieldNumbers(md protoreflect.MessageDescriptor) *wireFields {
	return fieldNumbersOf(md, map[protoreflect.FullName]*wireFields{})
}

func fieldNumbersOf(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]*wireFields) *wireFields {
	if f, ok := seen[md.FullName()]; ok {
		return f
	}
	f := &wireFields{desc: md}
	seen[md.FullName()] = f
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		n := int(fd.Number())
		if n > maxWireField {
			continue // read as unknown: present only in a foreign encoding, which then goes slow
		}
		for len(f.how) <= n {
			f.how, f.wire, f.str, f.sub = append(f.how, fieldUnknown), append(f.wire, 0), append(f.str, false), append(f.sub, nil)
		}
		f.how[n], f.str[n] = fieldSingular, fd.Kind() == protoreflect.StringKind
		switch fd.Kind() {
		case protoreflect.MessageKind:
			f.wire[n] = protowire.BytesType
			if !fd.IsList() && !fd.IsMap() {
				f.sub[n] = fieldNumbersOf(fd.Message(), seen)
			}
		case protoreflect.StringKind, protoreflect.BytesKind:
			f.wire[n] = protowire.BytesType
		case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
			f.wire[n] = protowire.Fixed32Type
		case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
			f.wire[n] = protowire.Fixed64Type
		case protoreflect.GroupKind:
			f.how[n] = fieldRefused
		default:
			f.wire[n] = protowire.VarintType
		}
		if fd.IsList() || fd.IsMap() {
			f.how[n] = fieldRefused
		}
	}
	return f
}

// maxWireField bounds the field numbers walk tracks.
const maxWireField = 255

// num is the number of the singular field called name; it panics at start
// when the schema lost it (a programming error every test of the package
// would show).
func (f *wireFields) num(name protoreflect.Name) protowire.Number {
	fd := f.desc.Fields().ByName(name)
	if fd == nil || fd.IsList() || fd.IsMap() || int(fd.Number()) > maxWireField {
		panic("store: " + string(f.desc.FullName()) + " has no singular field " + string(name))
	}
	return fd.Number()
}

// field is one top-level field of a wire message: its number, wire type,
// the bytes of its value (for a length-delimited field, without the
// length) and the bytes of the whole field, tag included.
type field struct {
	num   protowire.Number
	typ   protowire.Type
	value []byte
	raw   []byte
}

// walk calls fn (when set) for each top-level field of b, in order. It
// returns false when b is not plainly a message of f's schema: malformed
// wire data, a field of the schema given twice, with another wire type,
// repeated or a group, or a string that is not UTF-8, at any depth (nested
// messages are walked too, so that what walk accepts proto.Unmarshal
// decodes). Fields the schema does not have are passed on as they are.
func (f *wireFields) walk(b []byte, depth int, fn func(field)) bool {
	if depth > maxWireDepth {
		return false
	}
	var seen [(maxWireField + 64) / 64]uint64
	for len(b) > 0 {
		// protowire.ConsumeTag and ConsumeFieldValue, with the one-byte
		// tags and lengths of every record Latch writes read inline.
		var (
			num protowire.Number
			typ protowire.Type
			n   int
		)
		switch {
		case b[0] < 0x80:
			num, typ, n = protowire.Number(b[0]>>3), protowire.Type(b[0]&7), 1
		case len(b) > 1 && b[1] < 0x80: // fields 16 to 2047
			t := uint64(b[0]&0x7f) | uint64(b[1])<<7
			num, typ, n = protowire.Number(t>>3), protowire.Type(t&7), 2
		default:
			if num, typ, n = protowire.ConsumeTag(b); n < 0 {
				return false
			}
		}
		if num == 0 {
			return false // ConsumeTag's errCodeFieldNumber
		}
		var (
			m int
			v []byte // a length-delimited field's value, without the length
		)
		switch rest := b[n:]; typ {
		case protowire.VarintType:
			if len(rest) > 0 && rest[0] < 0x80 {
				m = 1
			} else {
				_, m = protowire.ConsumeVarint(rest)
			}
		case protowire.BytesType:
			if len(rest) > 0 && rest[0] < 0x80 && int(rest[0]) < len(rest) {
				m = 1 + int(rest[0])
				v = rest[1:m:m]
			} else {
				v, m = protowire.ConsumeBytes(rest)
			}
		default:
			m = protowire.ConsumeFieldValue(num, typ, rest)
		}
		if m < 0 {
			return false
		}
		fl := field{num: num, typ: typ, raw: b[:n+m], value: b[n : n+m]}
		b = b[n+m:]
		how := fieldUnknown
		if int(num) < len(f.how) {
			how = f.how[num]
		}
		switch how {
		case fieldRefused:
			return false
		case fieldSingular:
			bit := uint64(1) << (num & 63)
			if typ != f.wire[num] || seen[num>>6]&bit != 0 {
				return false
			}
			seen[num>>6] |= bit
			if typ == protowire.BytesType {
				if f.str[num] && !validUTF8(v) {
					return false
				}
				if sub := f.sub[num]; sub != nil && !sub.walk(v, depth+1, nil) {
					return false
				}
				fl.value = v
			}
		}
		if fn != nil {
			fn(fl)
		}
	}
	return true
}

// validUTF8 is utf8.Valid with the all-ASCII case (every string Latch
// writes but a user's) read 16 bytes at a time.
func validUTF8(v []byte) bool {
	p := v
	for len(p) >= 16 {
		if (binary.LittleEndian.Uint64(p)|binary.LittleEndian.Uint64(p[8:]))&0x8080808080808080 != 0 {
			return utf8.Valid(v)
		}
		p = p[16:]
	}
	for _, c := range p {
		if c >= 0x80 {
			return utf8.Valid(v)
		}
	}
	return true
}

// maxWireDepth bounds how deep walk follows nested messages.
const maxWireDepth = 16

// wireDigests are an execution record's digests read from its wire form.
// They are comparable only with other wire digests.
type wireDigests struct {
	rest, fixed  [16]byte // the fields fixed at acceptance apart, journal_index left out
	journalIndex uint64
	state        recordv1.State
	fingerprint  []byte // aliases the input
	result       []byte // aliases the input
}

// digester hashes wire records; one per goroutine (its buffers are
// scratch space).
type digester struct {
	rest, fixed []byte // the raw fields of each digest, in order
}

func newDigester() *digester { return &digester{} }

// emptyDigest is the digest of no fields (a record without the fields
// fixed at acceptance).
var emptyDigest = func() [16]byte {
	s := sha256.Sum256(nil)
	return [16]byte(s[:16])
}()

// execution returns the wire digests of an encoded recordv1.Execution, ok
// false when the fast path does not read it (see walk).
func (d *digester) execution(b []byte) (w wireDigests, ok bool) {
	if w, ok = execFacts(b); !ok {
		return wireDigests{}, false
	}
	w.rest, w.fixed = d.digests(b, true, true)
	return w, true
}

// execFacts walks an encoded recordv1.Execution as execution does and
// reads its state, fingerprint, result and journal index, without hashing
// it (see digests); ok is false when the fast path does not read it.
func execFacts(b []byte) (w wireDigests, ok bool) {
	ok = execFields.walk(b, 0, func(fl field) {
		switch fl.num {
		case execJournalIndex:
			v, n := protowire.ConsumeVarint(fl.value)
			if n >= 0 { // cannot fail: walk consumed it as a varint
				w.journalIndex = v
			}
		case execState:
			v, _ := protowire.ConsumeVarint(fl.value)
			w.state = recordv1.State(int32(v))
		case execFingerprint:
			w.fingerprint = fl.value
		case execResultSha256:
			w.result = fl.value
		}
	})
	if !ok {
		return wireDigests{}, false
	}
	return w, true
}

// digests hashes the top-level fields of b, an encoded
// recordv1.Execution that execFacts accepted: rest is the digest of every
// field but journal_index and those fixed at acceptance, in order, fixed
// that of the fields fixed at acceptance; each only when asked for (the
// other is zero).
func (d *digester) digests(b []byte, wantRest, wantFixed bool) (rest, fixed [16]byte) {
	d.rest, d.fixed = d.rest[:0], d.fixed[:0]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break // cannot happen: walk accepted b
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			break // likewise
		}
		raw := b[:n+m]
		b = b[n+m:]
		switch num {
		case execJournalIndex:
		case execCanonicalIntent, execArguments, execEvidence:
			if wantFixed {
				d.fixed = append(d.fixed, raw...)
			}
		default:
			if wantRest {
				d.rest = append(d.rest, raw...)
			}
		}
	}
	if wantRest {
		s := sha256.Sum256(d.rest)
		rest = [16]byte(s[:16])
	}
	if wantFixed {
		fixed = emptyDigest
		if len(d.fixed) > 0 {
			s := sha256.Sum256(d.fixed)
			fixed = [16]byte(s[:16])
		}
	}
	return rest, fixed
}

// wireEntry is what the full check reads of a journal entry.
type wireEntry struct {
	executionID []byte // aliases the input
	kind        []byte // JournalEntry.kind, written before entry_kind
	entryKind   recordv1.EntryKind
	execution   []byte // the encoded snapshot; nil when the entry has none
	hasExec     bool
}

// attach reports whether the entry is an attach note (lifecycle.EntryKindOf
// reads the kind, from entry_kind or the text of older records).
func (e *wireEntry) attach() bool {
	return lifecycle.EntryKindOf(&recordv1.JournalEntry{Kind: string(e.kind), EntryKind: e.entryKind}) == recordv1.EntryKind_ENTRY_KIND_ATTACH
}

// readWireEntry reads an encoded recordv1.JournalEntry; ok is false when
// the fast path does not read it (see walk), or when it carries a token, a
// session, a catalog or an upstream tool pin, which the check decodes. It does not look into the execution snapshot:
// whoever reads the entry must read e.execution with digester.execution
// (which refuses what walk refuses) before taking the entry as sound.
func readWireEntry(b []byte) (e wireEntry, ok bool) {
	token := false
	ok = entryFieldsShallow.walk(b, 0, func(fl field) {
		switch fl.num {
		case entryExecutionID:
			e.executionID = fl.value
		case entryKind:
			e.kind = fl.value
		case entryEntryKind:
			v, _ := protowire.ConsumeVarint(fl.value)
			e.entryKind = recordv1.EntryKind(int32(v))
		case entryExecution:
			e.execution, e.hasExec = fl.value, true
		case entryToken, entrySession, entryCatalog, entryPin:
			token = true
		}
	})
	return e, ok && !token
}
