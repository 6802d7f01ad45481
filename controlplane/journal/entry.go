package journal

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Errors of this package.
var (
	// ErrEntryNotFound is what a Source returns (possibly wrapped) from
	// Entry for a position it holds no record for.
	ErrEntryNotFound = errors.New("journal: entry not found")
	// ErrMalformedEntry: leaf data that is not a JournalEntry.
	ErrMalformedEntry = errors.New("journal: malformed entry")
	// ErrMalformedCheckpoint: checkpoint text or note that does not parse.
	ErrMalformedCheckpoint = errors.New("journal: malformed checkpoint")
	// ErrBadSignature: a checkpoint not signed by the verifier key.
	ErrBadSignature = errors.New("journal: checkpoint signature does not verify")
	// ErrBadKey: a signer or verifier key that does not parse.
	ErrBadKey = errors.New("journal: invalid key")
	// ErrMalformedExport: an export file that does not parse.
	ErrMalformedExport = errors.New("journal: malformed export")
)

var marshalOptions = proto.MarshalOptions{Deterministic: true}

// EncodeEntry returns the leaf data of e: its deterministic protobuf
// encoding. The caller sets e.Index to the leaf's position.
func EncodeEntry(e *recordv1.JournalEntry) ([]byte, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil entry", ErrMalformedEntry)
	}
	b, err := marshalOptions.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	return b, nil
}

// DecodeEntry parses leaf data written by EncodeEntry.
func DecodeEntry(data []byte) (*recordv1.JournalEntry, error) {
	e := new(recordv1.JournalEntry)
	if err := proto.Unmarshal(data, e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	return e, nil
}

// LeafHash is the RFC 6962 leaf hash of data (tlog.RecordHash).
func LeafHash(data []byte) tlog.Hash { return tlog.RecordHash(data) }

// StoredHashes returns the hashes to store when appending leaf n (0-based)
// with the given data. Store them at the consecutive stored-hash indexes
// tlog.StoredHashIndex(0, n), tlog.StoredHashIndex(0, n)+1, ...; the first
// is the leaf hash. r must return hashes stored for leaves before n.
func StoredHashes(n int64, data []byte, r tlog.HashReader) ([]tlog.Hash, error) {
	h, err := tlog.StoredHashes(n, data, r)
	if err != nil {
		return nil, fmt.Errorf("journal: stored hashes of leaf %d: %w", n, err)
	}
	return h, nil
}

// TreeHash returns the root hash of the tree of the first n leaves, read
// from the stored hashes through r.
func TreeHash(n int64, r tlog.HashReader) (tlog.Hash, error) {
	h, err := tlog.TreeHash(n, r)
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("journal: tree hash of size %d: %w", n, err)
	}
	return h, nil
}

// fieldShape is what the wire form of one JournalEntry field must look
// like: its wire types, and whether it is a string (valid UTF-8).
type fieldShape struct {
	known          bool
	wire, wireList protowire.Type // wireList: the packed form of a repeated scalar, else wire
	utf8           bool
}

// entryShape is indexed by field number, built from the JournalEntry
// descriptor so that a field added to the message is checked too.
var entryShape = func() []fieldShape {
	fields := (&recordv1.JournalEntry{}).ProtoReflect().Descriptor().Fields()
	var out []fieldShape
	for i := range fields.Len() {
		fd := fields.Get(i)
		num := int(fd.Number())
		for len(out) <= num {
			out = append(out, fieldShape{})
		}
		var w protowire.Type
		switch fd.Kind() {
		case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind,
			protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
			w = protowire.VarintType
		case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
			w = protowire.Fixed32Type
		case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
			w = protowire.Fixed64Type
		case protoreflect.GroupKind:
			w = protowire.StartGroupType
		default: // string, bytes, message
			w = protowire.BytesType
		}
		wl := w
		if fd.IsList() && w != protowire.BytesType && w != protowire.StartGroupType {
			wl = protowire.BytesType // packed
		}
		out[num] = fieldShape{known: true, wire: w, wireList: wl, utf8: fd.Kind() == protoreflect.StringKind}
	}
	return out
}()

// entryIndex returns the index field of leaf data without decoding the
// whole entry: it walks the top-level fields, checking each known field's
// wire type and each string's UTF-8, as proto.Unmarshal would, and leaves
// nested messages (time, execution, evidence, session) unparsed. ok is
// false when the data does not have the shape of a JournalEntry; then
// DecodeEntry says why. Verify uses it because decoding every field of
// every record costs more than hashing it; a record with damaged nested
// fields and intact top-level shape is still caught, by its hash.
func entryIndex(data []byte) (index uint64, ok bool) {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return 0, false
		}
		data = data[n:]
		var shape fieldShape
		if int(num) < len(entryShape) {
			shape = entryShape[num]
		}
		if shape.known && typ != shape.wire && typ != shape.wireList {
			return 0, false
		}
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(data)
			if n < 0 {
				return 0, false
			}
			index, data = v, data[n:]
		case shape.utf8:
			v, n := protowire.ConsumeBytes(data)
			if n < 0 || !utf8.Valid(v) {
				return 0, false
			}
			data = data[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, data)
			if n < 0 {
				return 0, false
			}
			data = data[n:]
		}
	}
	return index, true
}

// StoredHashReader is a tlog.HashReader over a function reading one
// stored hash (the store's StoredHash): a hash it reports absent is a
// damaged data dir.
func StoredHashReader(read func(index int64) (tlog.Hash, bool, error)) tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			h, ok, err := read(x)
			if err != nil {
				return nil, fmt.Errorf("journal: stored hash %d: %w", x, err)
			}
			if !ok {
				return nil, fmt.Errorf("journal: stored hash %d is missing: the data dir is damaged (run latch audit verify)", x)
			}
			out[i] = h
		}
		return out, nil
	})
}

// ProveTree is the RFC 6962 consistency proof from the tree of the first
// old leaves to the tree of the first n.
func ProveTree(n, old int64, r tlog.HashReader) (tlog.TreeProof, error) {
	p, err := tlog.ProveTree(n, old, r)
	if err != nil {
		return nil, fmt.Errorf("journal: consistency proof from size %d to %d: %w", old, n, err)
	}
	return p, nil
}
