package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/internal/jsonscan"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
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
			if js, err := readableEntry(e); err == nil {
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
	// readable lists the record lines whose readable part differs from
	// their data, by position (KindReadable problems); pending are the
	// record lines not checked yet.
	readable []Problem
	pending  []readableJob
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

// The keys each line type may carry.
var (
	headerKeys     = []string{"type", "format", "size"}
	recordKeys     = []string{"type", "index", "leaf_hash", "data", "entry", "missing"}
	checkpointKeys = []string{"type", "note"}
)

// ReadExport reads an export file written by Export, for Verify. It fails
// with ErrMalformedExport when the file does not follow the format (one
// JSON object per line; a header or checkpoint line with a key the format
// does not have, or a key twice, included); a file that parses but was tampered with reads fine
// and Verify reports how. The leaf_hash of each record is served as the
// stored leaf hash of its position; the export carries no interior hashes.
//
// Each record line's readable part is rebuilt from its data and compared
// (see the package documentation); Verify reports every difference as a
// KindReadable problem naming the line's position and the fields.
func ReadExport(r io.Reader) (Source, error) {
	lines := &lineReader{r: bufio.NewReaderSize(r, 1<<16)}
	raw, err := lines.next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("the file is empty")
		}
		return nil, fmt.Errorf("%w: header line: %v", ErrMalformedExport, err)
	}
	var hdr exportLine
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return nil, fmt.Errorf("%w: header line: %v", ErrMalformedExport, err)
	}
	if hdr.Type != "header" || hdr.Format != ExportFormat || hdr.Size == nil || *hdr.Size < 0 {
		return nil, fmt.Errorf("%w: first line is not a %s header with a size", ErrMalformedExport, ExportFormat)
	}
	if err := strictKeys(raw, headerKeys); err != nil {
		return nil, fmt.Errorf("%w: header line: %v", ErrMalformedExport, err)
	}
	src := &exportSource{}
	for {
		raw, err := lines.next()
		line := lines.n
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrMalformedExport, line, err)
		}
		// One scan splits the line into its keys; each value is then
		// decoded alone (a record's entry only by the readable check,
		// later: hence the copy, the reader reuses its line buffer).
		fields, err := objectFields(bytes.Clone(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrMalformedExport, line, err)
		}
		var typ string
		if err := fieldValue(fields, "type", &typ); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrMalformedExport, line, err)
		}
		switch typ {
		case "record":
			if err := src.addRecord(line, fields); err != nil {
				return nil, err
			}
		case "checkpoint":
			var note *string
			if err := fieldValue(fields, "note", &note); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrMalformedExport, line, err)
			}
			if note == nil {
				return nil, fmt.Errorf("%w: line %d: checkpoint without note", ErrMalformedExport, line)
			}
			if err := fieldsAllowed(fields, checkpointKeys); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrMalformedExport, line, err)
			}
			src.checkpoints = append(src.checkpoints, []byte(*note))
		case "header":
			return nil, fmt.Errorf("%w: line %d: a second header", ErrMalformedExport, line)
		default:
			return nil, fmt.Errorf("%w: line %d: unknown type %q", ErrMalformedExport, line, typ)
		}
	}
	src.checkPending()
	records := int64(len(src.data))
	src.size = max(*hdr.Size, records)
	if *hdr.Size-records > maxMissingTail {
		return nil, fmt.Errorf("%w: header claims %d records, the file holds %d", ErrMalformedExport, *hdr.Size, records)
	}
	return src, nil
}

// maxLine bounds the length of one export line: a record line is a few
// kilobytes.
const maxLine = 64 << 20

// lineReader reads the lines of a JSON Lines file, skipping blank ones; n
// is the number of the line last returned. A line must hold one JSON value.
type lineReader struct {
	r   *bufio.Reader
	n   int
	buf []byte
}

// next returns the next non-blank line, valid until the following call,
// or io.EOF.
func (l *lineReader) next() ([]byte, error) {
	for {
		l.buf = l.buf[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = l.r.ReadSlice('\n')
			l.buf = append(l.buf, chunk...)
			if len(l.buf) > maxLine {
				l.n++
				return nil, fmt.Errorf("longer than %d bytes", maxLine)
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if len(l.buf) == 0 && err != nil {
			return nil, io.EOF
		}
		l.n++
		line := bytes.TrimSpace(l.buf)
		if len(line) == 0 {
			continue
		}
		if jsonscan.Valid(line, lineScan) != nil {
			return nil, fmt.Errorf("not one JSON value (an export has one per line)")
		}
		return line, nil
	}
}

// addRecord adds a record line (file line number line, split into fields)
// at the next position and notes how its readable part differs from its
// data.
func (s *exportSource) addRecord(line int, fields []jsonField) error {
	pos := int64(len(s.data))
	var l exportLine
	for _, f := range []struct {
		name string
		into any
	}{{"index", &l.Index}, {"leaf_hash", &l.LeafHash}, {"data", &l.Data}, {"missing", &l.Missing}} {
		if err := fieldValue(fields, f.name, f.into); err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrMalformedExport, line, err)
		}
	}
	if l.Missing {
		s.data = append(s.data, nil)
		s.leafHashes = append(s.leafHashes, nil)
	} else {
		if l.Data == nil {
			return fmt.Errorf("%w: line %d: record without data", ErrMalformedExport, line)
		}
		data := *l.Data
		if data == nil {
			data = []byte{}
		}
		var hp *tlog.Hash
		if l.LeafHash != nil {
			if len(*l.LeafHash) != tlog.HashSize {
				return fmt.Errorf("%w: line %d: leaf_hash is %d bytes, want %d", ErrMalformedExport, line, len(*l.LeafHash), tlog.HashSize)
			}
			var h tlog.Hash
			copy(h[:], *l.LeafHash)
			hp = &h
		}
		s.data = append(s.data, data)
		s.leafHashes = append(s.leafHashes, hp)
	}
	s.pending = append(s.pending, readableJob{pos: pos, line: line, l: l, fields: fields})
	if len(s.pending) >= readableBatch {
		s.checkPending()
	}
	return nil
}

// readableBatch is how many record lines ReadExport checks at once.
const readableBatch = 1024

// readableJob is one record line waiting for its readable check.
type readableJob struct {
	pos    int64
	line   int
	l      exportLine
	fields []jsonField
}

// checkPending runs the readable check of the pending lines on every CPU
// (rebuilding an entry's readable form costs more than reading the line)
// and keeps the problems in position order.
func (s *exportSource) checkPending() {
	jobs := s.pending
	s.pending = s.pending[:0:0]
	found := make([]*Problem, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(jobs)); i = next.Add(1) - 1 {
				found[i] = jobs[i].check()
			}
		})
	}
	wg.Wait()
	for _, p := range found {
		if p != nil {
			s.readable = append(s.readable, *p)
		}
	}
}

// check returns the line's readable problem, or nil.
func (j *readableJob) check() *Problem {
	diffs := readableDiffs(&j.l, j.fields)
	if len(diffs) == 0 {
		return nil
	}
	const maxListed = 8
	if len(diffs) > maxListed {
		diffs = append(diffs[:maxListed], fmt.Sprintf("and %d more", len(diffs)-maxListed))
	}
	return &Problem{j.pos, KindReadable,
		fmt.Sprintf("the record line at position %d (line %d) says what its data does not: %s", j.pos, j.line, strings.Join(diffs, "; "))}
}

// readableDiffs lists, one item per field, how a record line's readable
// part (its keys, index and entry) differs from what its data says.
func readableDiffs(l *exportLine, fields []jsonField) []string {
	var diffs []string
	present := make(map[string]json.RawMessage)
	for _, f := range fields {
		switch {
		case f.count > 1:
			diffs = append(diffs, fmt.Sprintf("key %q appears %d times", f.name, f.count))
		case !slices.Contains(recordKeys, f.name):
			diffs = append(diffs, fmt.Sprintf("key %q is not part of the format", f.name))
		}
		present[f.name] = f.value
	}
	entryRaw, hasEntry := present["entry"]
	if l.Missing {
		for _, k := range []string{"data", "leaf_hash", "entry"} {
			if _, ok := present[k]; ok {
				diffs = append(diffs, fmt.Sprintf("a missing record carries %s", k))
			}
		}
		return diffs
	}
	e, err := DecodeEntry(*l.Data)
	if err != nil {
		// Verify reports the data itself as modified; the readable
		// part can only be wrong by being there.
		if hasEntry {
			diffs = append(diffs, "entry: present, but data is not a journal entry")
		}
		return diffs
	}
	switch {
	case l.Index == nil:
		diffs = append(diffs, fmt.Sprintf("index: absent, data says %d", e.GetIndex()))
	case *l.Index < 0 || uint64(*l.Index) != e.GetIndex():
		diffs = append(diffs, fmt.Sprintf("index: %d, data says %d", *l.Index, e.GetIndex()))
	}
	if !hasEntry {
		return append(diffs, "entry: absent, data holds one")
	}
	rebuilt, err := readableEntry(e)
	if err != nil {
		return append(diffs, fmt.Sprintf("entry: data's entry has no readable form (%v)", err))
	}
	return append(diffs, entryDiffs(entryRaw, rebuilt)...)
}

// readableEntry is a record's readable form in an export: its protojson,
// with "kind" the kind's name also on a record that names it only in
// entry_kind, so that the export reads as it did before entry_kind (a
// reader selecting on .entry.kind keeps working). The data is never
// re-encoded: this is only its readable part, rebuilt the same way by the
// readable check.
func readableEntry(e *recordv1.JournalEntry) ([]byte, error) {
	if e.GetKind() == "" {
		if name := lifecycle.EntryKindNameOf(e); name != "" {
			c := proto.CloneOf(e)
			c.Kind = name
			e = c
		}
	}
	return protojson.Marshal(e)
}

// entryDiffs compares a readable entry with the one rebuilt from data,
// field by field ("entry.actor: \"mallory\", data says \"agent:ci\"").
// protojson varies its whitespace, so the fast path compares compacted
// bytes; when they differ, both are decoded (a key given twice is a
// difference) and compared as JSON values, so a change of form that keeps
// every value (whitespace, escapes) is not a difference.
func entryDiffs(readable, rebuilt []byte) []string {
	// Export writes the entry compacted: an untouched line is equal to
	// the compacted rebuild byte for byte.
	var b bytes.Buffer
	if json.Compact(&b, rebuilt) == nil && bytes.Equal(readable, b.Bytes()) {
		return nil
	}
	var a bytes.Buffer
	if json.Compact(&a, readable) == nil && bytes.Equal(a.Bytes(), b.Bytes()) {
		return nil
	}
	var diffs []string
	got, err := decodeJSON(readable, "entry", &diffs)
	if err != nil {
		return append(diffs, fmt.Sprintf("entry: does not parse (%v)", err))
	}
	want, err := decodeJSON(rebuilt, "entry", nil)
	if err != nil {
		return append(diffs, fmt.Sprintf("entry: data's readable form does not parse (%v)", err))
	}
	diffJSON("entry", got, want, &diffs)
	return diffs
}

// jsonField is one key of a JSON object as written: its last value (the
// one encoding/json and most readers keep) and how many times it appears.
type jsonField struct {
	name  string
	value json.RawMessage
	count int
}

// fieldValue decodes the value of the named field into v, leaving v as is
// when the field is absent.
func fieldValue(fields []jsonField, name string, v any) error {
	for _, f := range fields {
		if f.name == name {
			if err := json.Unmarshal(f.value, v); err != nil {
				return fmt.Errorf("key %q: %v", name, err)
			}
			return nil
		}
	}
	return nil
}

var errNotObject = errors.New("not a JSON object")

// lineScan is how an export line is read: the strict scanner (jsonscan),
// keeping a key given twice (the readable check reports it) and reading
// what encoding/json reads, so every line encoding/json takes splits.
var lineScan = jsonscan.Options{MaxDepth: maxJSONDepth, KeepDuplicates: true, ReplaceInvalidUTF8: true}

// objectFields splits the JSON object raw into its top-level keys in order
// of first appearance, in one pass that does not decode the values; raw
// that is not one JSON object is an error, never a panic.
func objectFields(raw []byte) ([]jsonField, error) {
	s := jsonscan.New(raw, lineScan)
	t, err := s.Next()
	if err != nil {
		return nil, err
	}
	if t.Kind != jsonscan.ObjectStart {
		return nil, errNotObject
	}
	var fields []jsonField
	var byName map[string]int // once there are many fields
	for {
		k, err := s.Next()
		if err != nil {
			return nil, err
		}
		if k.Kind == jsonscan.ObjectEnd {
			break
		}
		name := string(k.Text)
		repeated := k.Repeated
		t, err := s.Next()
		if err != nil {
			return nil, err
		}
		end, err := s.Skip(t)
		if err != nil {
			return nil, err
		}
		value := json.RawMessage(raw[t.Offset:end])
		if !repeated {
			fields = append(fields, jsonField{name: name, value: value, count: 1})
			if byName != nil {
				byName[name] = len(fields) - 1
			} else if len(fields) > 16 {
				byName = make(map[string]int, 2*len(fields))
				for at, f := range fields {
					byName[f.name] = at
				}
			}
			continue
		}
		// A line has a handful of keys: look them up in the slice, and
		// only past that in a map (a hostile line may have millions).
		k2 := -1
		if byName != nil {
			k2 = byName[name]
		} else {
			k2 = slices.IndexFunc(fields, func(f jsonField) bool { return f.name == name })
		}
		fields[k2].count++
		fields[k2].value = value
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		return nil, err
	}
	return fields, nil
}

// strictKeys fails when the JSON object raw has a key not in allowed, or a
// key twice.
func strictKeys(raw []byte, allowed []string) error {
	fields, err := objectFields(raw)
	if err != nil {
		return err
	}
	return fieldsAllowed(fields, allowed)
}

// fieldsAllowed fails when a field is not in allowed, or given twice.
func fieldsAllowed(fields []jsonField, allowed []string) error {
	for _, f := range fields {
		if f.count > 1 {
			return fmt.Errorf("key %q appears %d times", f.name, f.count)
		}
		if !slices.Contains(allowed, f.name) {
			return fmt.Errorf("key %q is not part of the format (want %s)", f.name, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// decodeJSON decodes one JSON value into map[string]any, []any, string,
// json.Number, bool or nil, with the strict scanner (jsonscan): invalid
// UTF-8 or a lone surrogate escape is an error, not U+FFFD, so a readable
// part cannot hide an edit behind the replacement. A key given twice in an
// object keeps its last value and, when dups is not nil, is listed there
// by path.
func decodeJSON(raw []byte, path string, dups *[]string) (any, error) {
	s := jsonscan.New(raw, jsonscan.Options{MaxDepth: maxJSONDepth, KeepDuplicates: true})
	t, err := s.Next()
	if err != nil {
		return nil, err
	}
	v, err := decodeValue(s, t, path, dups)
	if err != nil {
		return nil, err
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		return nil, err
	}
	return v, nil
}

// maxJSONDepth bounds the nesting an export line may have (encoding/json's
// own bound).
const maxJSONDepth = 10000

// decodeValue decodes the value whose first token is t; the scanner bounds
// the recursion.
func decodeValue(s *jsonscan.Scanner, t jsonscan.Token, path string, dups *[]string) (any, error) {
	switch t.Kind {
	case jsonscan.ObjectStart:
		obj := make(map[string]any)
		for {
			kt, err := s.Next()
			if err != nil {
				return nil, err
			}
			if kt.Kind == jsonscan.ObjectEnd {
				return obj, nil
			}
			k := string(kt.Text)
			vt, err := s.Next()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(s, vt, path+"."+k, dups)
			if err != nil {
				return nil, err
			}
			if kt.Repeated && dups != nil {
				*dups = append(*dups, fmt.Sprintf("%s.%s: key appears more than once", path, k))
			}
			obj[k] = v // the last, as encoding/json and most readers keep
		}
	case jsonscan.ArrayStart:
		arr := []any{}
		for i := 0; ; i++ {
			et, err := s.Next()
			if err != nil {
				return nil, err
			}
			if et.Kind == jsonscan.ArrayEnd {
				return arr, nil
			}
			v, err := decodeValue(s, et, fmt.Sprintf("%s[%d]", path, i), dups)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
	case jsonscan.String:
		return string(t.Text), nil
	case jsonscan.Number:
		return json.Number(t.Text), nil
	case jsonscan.True:
		return true, nil
	case jsonscan.False:
		return false, nil
	default: // jsonscan.Null; the scanner returns no other kind here
		return nil, nil
	}
}

// diffJSON appends one item per path where got (the readable part) and
// want (rebuilt from data) differ.
func diffJSON(path string, got, want any, diffs *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range w {
				if !yield(k) {
					return
				}
			}
			for k := range g {
				if _, ok := w[k]; !ok && !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			gv, inGot := g[k]
			wv, inWant := w[k]
			switch {
			case !inGot:
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: absent, data says %s", path, k, jsonText(wv)))
			case !inWant:
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: %s, not in data", path, k, jsonText(gv)))
			default:
				diffJSON(path+"."+k, gv, wv, diffs)
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		for i := range w {
			diffJSON(fmt.Sprintf("%s[%d]", path, i), g[i], w[i], diffs)
		}
		return
	default:
		switch got.(type) {
		case map[string]any, []any:
		default:
			if got == want {
				return
			}
		}
	}
	*diffs = append(*diffs, fmt.Sprintf("%s: %s, data says %s", path, jsonText(got), jsonText(want)))
}

// jsonText renders a decoded JSON value compactly, cut to a readable length.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	const maxLen = 80
	if s := []rune(string(b)); len(s) > maxLen {
		return string(s[:maxLen]) + "…"
	}
	return string(b)
}
