package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/encoding/protojson"
)

// ExportFormat names the export file format in its header line.
const ExportFormat = "latch-journal-export/v1"

// maxMissingTail bounds how many more positions an export's header may
// claim than it has record lines (each becomes a missing record), so a
// forged header cannot make a reader allocate without bound.
const maxMissingTail = 1 << 16

type exportHeader struct {
	Type   string `json:"type"`
	Format string `json:"format"`
	Size   int64  `json:"size"`
}

type exportRecord struct {
	Type     string          `json:"type"`
	Index    int64           `json:"index"`
	LeafHash []byte          `json:"leaf_hash"`
	Data     []byte          `json:"data"`
	Entry    json.RawMessage `json:"entry,omitempty"`
}

type exportHole struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Missing bool   `json:"missing"`
}

type exportCheckpoint struct {
	Type string `json:"type"`
	Note string `json:"note"`
}

// exportLine is any line, as read.
type exportLine struct {
	Type     string  `json:"type"`
	Format   string  `json:"format"`
	Size     *int64  `json:"size"`
	Index    *int64  `json:"index"`
	LeafHash *[]byte `json:"leaf_hash"`
	Data     *[]byte `json:"data"`
	Missing  bool    `json:"missing"`
	Note     *string `json:"note"`
}

// Export writes src as an export file (see the package documentation).
// A position src reports as ErrEntryNotFound is written as a missing
// record; any other read error aborts the export.
func Export(w io.Writer, src Source) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	n := src.Size()
	if err := enc.Encode(exportHeader{Type: "header", Format: ExportFormat, Size: n}); err != nil {
		return fmt.Errorf("journal: export header: %w", err)
	}
	for p := range n {
		data, err := src.Entry(p)
		if errors.Is(err, ErrEntryNotFound) {
			if err := enc.Encode(exportHole{Type: "record", Index: p, Missing: true}); err != nil {
				return fmt.Errorf("journal: export record %d: %w", p, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("journal: export: read entry %d: %w", p, err)
		}
		h, ok, err := src.StoredHash(tlog.StoredHashIndex(0, p))
		if err != nil {
			return fmt.Errorf("journal: export: read stored leaf hash %d: %w", p, err)
		}
		if !ok {
			h = tlog.RecordHash(data)
		}
		rec := exportRecord{Type: "record", Index: p, LeafHash: h[:], Data: data}
		if rec.Data == nil {
			rec.Data = []byte{}
		}
		if e, err := DecodeEntry(data); err == nil {
			if js, err := protojson.Marshal(e); err == nil {
				rec.Entry = js
			}
		}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("journal: export record %d: %w", p, err)
		}
	}
	notes, err := src.Checkpoints()
	if err != nil {
		return fmt.Errorf("journal: export: read checkpoints: %w", err)
	}
	for _, msg := range notes {
		if err := enc.Encode(exportCheckpoint{Type: "checkpoint", Note: string(msg)}); err != nil {
			return fmt.Errorf("journal: export checkpoint: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("journal: export: %w", err)
	}
	return nil
}

// exportSource is an export file read into memory.
type exportSource struct {
	size        int64
	data        [][]byte // nil: missing
	leafHashes  []*tlog.Hash
	checkpoints [][]byte
}

var _ Source = (*exportSource)(nil)

func (s *exportSource) Size() int64 { return s.size }

func (s *exportSource) Entry(i int64) ([]byte, error) {
	if i < 0 || i >= int64(len(s.data)) || s.data[i] == nil {
		return nil, fmt.Errorf("%w: position %d", ErrEntryNotFound, i)
	}
	return s.data[i], nil
}

func (s *exportSource) StoredHash(index int64) (tlog.Hash, bool, error) {
	if index < 0 {
		return tlog.Hash{}, false, nil
	}
	level, n := tlog.SplitStoredHashIndex(index)
	if level != 0 || n >= int64(len(s.leafHashes)) || s.leafHashes[n] == nil {
		return tlog.Hash{}, false, nil
	}
	return *s.leafHashes[n], true, nil
}

func (s *exportSource) Checkpoints() ([][]byte, error) { return s.checkpoints, nil }

// ReadExport reads an export file written by Export, for Verify. It fails
// with ErrMalformedExport when the file does not follow the format; a file
// that parses but was tampered with reads fine and Verify reports how.
// The leaf_hash of each record is served as the stored leaf hash of its
// position; the export carries no interior hashes.
func ReadExport(r io.Reader) (Source, error) {
	dec := json.NewDecoder(r)
	var hdr exportLine
	if err := dec.Decode(&hdr); err != nil {
		return nil, fmt.Errorf("%w: header line: %v", ErrMalformedExport, err)
	}
	if hdr.Type != "header" || hdr.Format != ExportFormat || hdr.Size == nil || *hdr.Size < 0 {
		return nil, fmt.Errorf("%w: first line is not a %s header with a size", ErrMalformedExport, ExportFormat)
	}
	src := &exportSource{}
	for line := 2; ; line++ {
		var l exportLine
		err := dec.Decode(&l)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrMalformedExport, line, err)
		}
		switch l.Type {
		case "record":
			if l.Missing {
				src.data = append(src.data, nil)
				src.leafHashes = append(src.leafHashes, nil)
				continue
			}
			if l.Data == nil {
				return nil, fmt.Errorf("%w: line %d: record without data", ErrMalformedExport, line)
			}
			data := *l.Data
			if data == nil {
				data = []byte{}
			}
			var hp *tlog.Hash
			if l.LeafHash != nil {
				if len(*l.LeafHash) != tlog.HashSize {
					return nil, fmt.Errorf("%w: line %d: leaf_hash is %d bytes, want %d", ErrMalformedExport, line, len(*l.LeafHash), tlog.HashSize)
				}
				var h tlog.Hash
				copy(h[:], *l.LeafHash)
				hp = &h
			}
			src.data = append(src.data, data)
			src.leafHashes = append(src.leafHashes, hp)
		case "checkpoint":
			if l.Note == nil {
				return nil, fmt.Errorf("%w: line %d: checkpoint without note", ErrMalformedExport, line)
			}
			src.checkpoints = append(src.checkpoints, []byte(*l.Note))
		case "header":
			return nil, fmt.Errorf("%w: line %d: a second header", ErrMalformedExport, line)
		default:
			return nil, fmt.Errorf("%w: line %d: unknown type %q", ErrMalformedExport, line, l.Type)
		}
	}
	records := int64(len(src.data))
	src.size = max(*hdr.Size, records)
	if *hdr.Size-records > maxMissingTail {
		return nil, fmt.Errorf("%w: header claims %d records, the file holds %d", ErrMalformedExport, *hdr.Size, records)
	}
	return src, nil
}
