// Package kvtest is the contract suite every store backend runs: Run
// holds a backend.KV to the ordered key space the execution store relies
// on (bytewise order, prefix bounds, ScanFrom both ways, early stop,
// deletes, last write wins in a batch, empty values, copies, reads nested
// in scans, concurrent Gets). A backend's own test calls
//
//	kvtest.Run(t, func(t testing.TB) backend.KV { return open(t) })
//
// with a fresh, empty KV per call; Run closes it. Only tests import it.
package kvtest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// Workers and PerWorker size ConcurrentGets.
const Workers, PerWorker = 64, 40

// Run runs the contract against fresh KVs from open.
func Run(t *testing.T, open func(t testing.TB) backend.KV) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, backend.KV)
	}{
		{"Contract", contract},
		{"ConcurrentGets", ConcurrentGets},
	} {
		t.Run(c.name, func(t *testing.T) {
			kv := open(t)
			t.Cleanup(func() { kv.Close() })
			c.run(t, kv)
		})
	}
}

// kvScan collects a scan's keys (and checks each value is the key's).
func kvScan(t *testing.T, kv backend.KV, prefix, start []byte, reverse bool, limit int) []string {
	t.Helper()
	var got []string
	err := kv.ScanFrom(prefix, start, reverse, func(k, v []byte) bool {
		if !bytes.Equal(v, append([]byte("v:"), k...)) {
			t.Errorf("value of %q = %q", k, v)
		}
		got = append(got, string(k))
		return limit <= 0 || len(got) < limit
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// contract holds a backend to the KV contract: bytewise key
// order (0x00 and 0xff bytes included), prefix bounds, ScanFrom both ways,
// early stop, deletes, a key written twice in one batch, empty values,
// copies, and nested reads inside a scan. A backend opened with small
// pages (pgkv: 7 rows or 40 bytes) crosses pages in every scan, some
// ended by the row count and some by size.
func contract(t *testing.T, kv backend.KV) {
	keys := []string{"a", "p", "p\x00", "p\x00\x00", "p\x01", "p/1", "p/10", "p/2", "p\x7f", "p\x80", "p\xfe", "p\xff", "p\xff\xff", "pa", "q", "\xff", "\xff\xff\x00"}
	var ws []backend.Write
	for _, k := range keys {
		ws = append(ws, backend.Write{Key: []byte(k), Value: []byte("v:" + k)})
	}
	ws = append(ws, backend.Write{Key: []byte("gone"), Value: []byte("x")}, backend.Write{Key: []byte("twice"), Value: []byte("first")})
	if err := kv.Commit(ws); err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]backend.Write{{Key: []byte("gone"), Delete: true}, {Key: []byte("twice"), Value: []byte("second")}, {Key: []byte("twice"), Value: []byte("v:twice")}, {Key: []byte("empty")}}); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "twice")
	sort.Strings(keys)

	if _, err := kv.Get([]byte("gone")); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get(deleted) = %v, want ErrNotFound", err)
	}
	if v, err := kv.Get([]byte("twice")); err != nil || string(v) != "v:twice" {
		t.Errorf("Get(twice) = %q, %v: want the batch's last write", v, err)
	}
	if v, err := kv.Get([]byte("empty")); err != nil || len(v) != 0 {
		t.Errorf("Get(empty) = %q, %v", v, err)
	}
	v, _ := kv.Get([]byte("a"))
	v[0] = 'X'
	if again, _ := kv.Get([]byte("a")); string(again) != "v:a" {
		t.Errorf("Get returned the stored bytes, not a copy: %q", again)
	}

	withP := func(ks []string) []string {
		var out []string
		for _, k := range ks {
			if strings.HasPrefix(k, "p") {
				out = append(out, k)
			}
		}
		return out
	}
	rev := func(ks []string) []string {
		out := append([]string(nil), ks...)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	pkeys := withP(keys)
	from := func(ks []string, start string, reverse bool) []string {
		var out []string
		for _, k := range ks {
			if (!reverse && k >= start) || (reverse && k <= start) {
				out = append(out, k)
			}
		}
		if reverse {
			return rev(out)
		}
		return out
	}
	all := append(slices.Clone(keys), "empty")
	sort.Strings(all)
	tests := []struct {
		name    string
		prefix  string
		start   *string
		reverse bool
		limit   int
		want    []string
	}{
		{"prefix ascending", "p", nil, false, 0, pkeys},
		{"prefix descending", "p", nil, true, 0, rev(pkeys)},
		{"from ascending", "p", ptr("p/2"), false, 0, from(pkeys, "p/2", false)},
		{"from descending", "p", ptr("p/2"), true, 0, from(pkeys, "p/2", true)},
		{"from a missing key descending", "p", ptr("p/15"), true, 0, from(pkeys, "p/15", true)},
		{"from the last key descending", "p", ptr("p\xff\xff"), true, 0, rev(pkeys)},
		{"early stop", "p", nil, false, 3, pkeys[:3]},
		{"early stop descending", "p", nil, true, 9, rev(pkeys)[:9]},
		{"0xff prefix", "\xff", nil, false, 0, []string{"\xff", "\xff\xff\x00"}},
		{"0xff prefix descending", "\xff", nil, true, 0, []string{"\xff\xff\x00", "\xff"}},
		{"no such prefix", "zz", nil, false, 0, nil},
	}
	for _, tc := range tests {
		var start []byte
		if tc.start != nil {
			start = []byte(*tc.start)
		}
		got := kvScan(t, kv, []byte(tc.prefix), start, tc.reverse, tc.limit)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, diff)
		}
	}
	var everything []string
	if err := kv.Scan(nil, false, func(k, _ []byte) bool { everything = append(everything, string(k)); return true }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, everything); diff != "" {
		t.Errorf("empty prefix: (-want +got)\n%s", diff)
	}

	// A read nested in a scan's callback, many scans at once: a
	// backend must not hold what the nested read needs.
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := kv.Scan([]byte("p"), false, func(k, _ []byte) bool {
				if _, err := kv.Get(k); err != nil {
					t.Errorf("nested Get(%q): %v", k, err)
				}
				return true
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func ptr(s string) *string { return &s }

// ConcurrentGets: Workers*PerWorker Gets at once, of keys present,
// absent, empty and repeated, each answer right and its own copy. Run
// calls it; a backend that coalesces Gets (pgkv) also calls it to count
// its queries.
func ConcurrentGets(t *testing.T, kv backend.KV) {
	const keys = 50
	var ws []backend.Write
	for i := range keys {
		if i%5 == 4 {
			continue // absent
		}
		v := []byte(fmt.Sprintf("v%d", i))
		if i%7 == 0 {
			v = nil // empty
		}
		ws = append(ws, backend.Write{Key: []byte(fmt.Sprintf("k%d", i)), Value: v})
	}
	if err := kv.Commit(ws); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	errs := make(chan string, Workers*PerWorker)
	var wg sync.WaitGroup
	for w := range Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for j := range PerWorker {
				i := (w*7 + j*3) % keys
				v, err := kv.Get([]byte(fmt.Sprintf("k%d", i)))
				var want string
				switch {
				case i%5 == 4:
					if !errors.Is(err, backend.ErrNotFound) {
						errs <- fmt.Sprintf("Get(k%d) = %q, %v; want ErrNotFound", i, v, err)
					}
					continue
				case i%7 == 0:
				default:
					want = fmt.Sprintf("v%d", i)
				}
				if err != nil || string(v) != want {
					errs <- fmt.Sprintf("Get(k%d) = %q, %v; want %q", i, v, err, want)
					continue
				}
				if len(v) > 0 {
					v[0] = 'X' // must not reach another Get's answer
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
