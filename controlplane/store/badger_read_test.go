package store

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBadgerScanLendsAndCopies: ScanFromLent visits what ScanFrom visits,
// both ways and from a start key, and ScanFrom's keys and values are still
// intact after the scan moved on (copies), over values larger and smaller
// than the ones before them (Badger reuses its item buffers).
func TestBadgerScanLendsAndCopies(t *testing.T) {
	kv, err := OpenBadger(t.TempDir(), BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	var ws []Write
	for i := range 300 {
		ws = append(ws, Write{Key: fmt.Appendf(nil, "p/%04d", i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 1+(i*37)%500)})
	}
	ws = append(ws, Write{Key: []byte("q/0"), Value: []byte("not in p/")})
	if err := kv.Commit(ws); err != nil {
		t.Fatal(err)
	}
	type kvPair struct{ K, V string }
	for _, tc := range []struct {
		start   []byte
		reverse bool
	}{{nil, false}, {nil, true}, {[]byte("p/0150"), false}, {[]byte("p/0150"), true}} {
		name := fmt.Sprintf("start %q reverse %v", tc.start, tc.reverse)
		var kept [][2][]byte
		if err := kv.ScanFrom([]byte("p/"), tc.start, tc.reverse, func(k, v []byte) bool {
			kept = append(kept, [2][]byte{k, v})
			return true
		}); err != nil {
			t.Fatal(err)
		}
		var fromCopies, lent []kvPair
		for _, p := range kept {
			fromCopies = append(fromCopies, kvPair{string(p[0]), string(p[1])})
		}
		if err := kv.ScanFromLent([]byte("p/"), tc.start, tc.reverse, func(k, v []byte) bool {
			lent = append(lent, kvPair{string(k), string(v)})
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if len(lent) == 0 {
			t.Fatalf("%s: the lent scan read nothing", name)
		}
		for _, p := range lent {
			i, _ := strconv.Atoi(p.K[2:])
			if want := string(ws[i].Value); p.V != want {
				t.Fatalf("%s: lent value of %s is %d bytes, want %d", name, p.K, len(p.V), len(want))
			}
		}
		if diff := cmp.Diff(lent, fromCopies); diff != "" {
			t.Errorf("%s: the values ScanFrom handed over changed after the scan, or differ from the lent scan's (-lent +kept):\n%s", name, diff)
		}
	}
}

// TestJournalKeyIndex: journal keys parse as strconv.ParseInt(hex, 16, 64)
// would, malformed ones included.
func TestJournalKeyIndex(t *testing.T) {
	for _, hex := range []string{"0000000000000000", "000000000000002a", "00000000000000FF", "7fffffffffffffff", "8000000000000000",
		"ffffffffffffffff", "000000000000002g", "+00000000000002a", "-00000000000002a", "2a", "", "00000000000000002a", " 00000000000002a", "0x0000000000002a"} {
		want, werr := strconv.ParseInt(hex, 16, 64)
		got, ok := journalKeyIndex([]byte(hex))
		if ok != (werr == nil) || (ok && got != want) {
			t.Errorf("journalKeyIndex(%q) = %d, %v; strconv says %d, %v", hex, got, ok, want, werr)
		}
	}
}
