package badgerkv

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// TestBadgerScanLendsAndCopies: ScanFromLent visits what ScanFrom visits,
// both ways and from a start key, and ScanFrom's keys and values are still
// intact after the scan moved on (copies), over values larger and smaller
// than the ones before them (Badger reuses its item buffers).
func TestBadgerScanLendsAndCopies(t *testing.T) {
	kv, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	var ws []backend.Write
	for i := range 300 {
		ws = append(ws, backend.Write{Key: fmt.Appendf(nil, "p/%04d", i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 1+(i*37)%500)})
	}
	ws = append(ws, backend.Write{Key: []byte("q/0"), Value: []byte("not in p/")})
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
