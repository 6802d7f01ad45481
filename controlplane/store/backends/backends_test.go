package backends

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/memkv"
)

func TestOpenRefusesAStoreThatIsNoConnectionString(t *testing.T) {
	_, err := Open(context.Background(), "/var/lib/latch/db", t.TempDir(), nil)
	if !errors.Is(err, ErrStoreSpec) || !strings.Contains(err.Error(), "leave --store out") {
		t.Errorf("Open(a directory) = %v, want ErrStoreSpec saying what to do", err)
	}
	kv, err := Open(context.Background(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if _, ok := kv.(*badgerkv.KV); !ok {
		t.Errorf("Open(\"\") = %T, want Badger", kv)
	}
}

// TestRegister: a registered kind is opened for the values it takes; a
// second kind of the same name, or one taking a value another kind takes,
// is refused.
func TestRegister(t *testing.T) {
	opened := 0
	k := Kind{
		Name:  "test-mem",
		Takes: func(spec string) bool { return strings.HasPrefix(spec, "test-mem:") },
		Open: func(context.Context, string, string, hclog.Logger) (backend.KV, error) {
			opened++
			return memkv.New(), nil
		},
	}
	if err := Register(k); err != nil {
		t.Fatal(err)
	}
	if err := Register(k); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Register(the same name again) = %v, want ErrDuplicate", err)
	}
	kv, err := Open(context.Background(), "test-mem:x", t.TempDir(), nil)
	if err != nil || opened != 1 {
		t.Fatalf("Open(test-mem:x) = %T, %v after %d opens; want the registered kind's", kv, err, opened)
	}
	kv.Close()
	greedy := Kind{Name: "test-greedy", Takes: func(spec string) bool { return spec == "test-mem:y" }, Open: k.Open}
	if err := Register(greedy); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), "test-mem:y", t.TempDir(), nil); !errors.Is(err, ErrStoreSpec) || !strings.Contains(err.Error(), "more than one") {
		t.Errorf("Open(a value two kinds take) = %v, want ErrStoreSpec naming both", err)
	}
}

// TestOpenReaderReadsWhatOpenWrote: a data dir's store written and closed
// is read back through OpenReader, which takes no writes.
func TestOpenReaderReadsWhatOpenWrote(t *testing.T) {
	dir := t.TempDir()
	kv, err := Open(context.Background(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReader(context.Background(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v, err := r.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Errorf("Get(k) through OpenReader = %q, %v; want the value written", v, err)
	}
	if err := r.Commit([]backend.Write{{Key: []byte("k2"), Value: []byte("v")}}); err == nil {
		t.Error("Commit through OpenReader succeeded; a reader takes no writes")
	}
}

// TestSpecNames: IsSpec tells a store value from a data dir, and Noun names
// a store without its connection string.
func TestSpecNames(t *testing.T) {
	for s, want := range map[string]bool{"": false, "/var/lib/latch": false, "postgres://x@h/db": true, "host=h dbname=db": true} {
		if got := IsSpec(s); got != want {
			t.Errorf("IsSpec(%q) = %v, want %v", s, got, want)
		}
	}
	if got := Noun("postgres://x:secret@h/db"); got != "the PostgreSQL store" {
		t.Errorf("Noun(postgres://…) = %q, want the PostgreSQL store", got)
	}
	if got := Noun("/a/dir"); got != "the store" {
		t.Errorf("Noun(a directory) = %q, want the store", got)
	}
}
