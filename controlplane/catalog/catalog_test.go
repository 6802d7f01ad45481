package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const one = `
targets:
  api: {channel: http, base_url: "http://127.0.0.1:1", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  deploy:
    input_schema: {type: object}
    target: api
    request: {method: POST, path: /deploy}
    replay: idempotency_key
`

const two = one + `  look:
    input_schema: {type: object}
    target: api
    request: {method: GET, path: /look}
    replay: read_only
`

// bad has two problems, on lines the error must name.
const bad = two + `  broken:
    target: nowhere
    replay: sometimes
`

func catalogs(t *testing.T, st *store.Store) []*recordv1.CatalogVersion {
	t.Helper()
	var out []*recordv1.CatalogVersion
	for i := range st.JournalSize() {
		b, err := st.JournalEntry(i)
		if err != nil {
			t.Fatal(err)
		}
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		if lifecycle.EntryKindOf(e) != KindLoaded {
			t.Errorf("journal entry %d is %q, want only %s", i, lifecycle.EntryKindNameOf(e), KindLoaded)
		}
		out = append(out, e.GetCatalog())
	}
	return out
}

func TestLoadReload(t *testing.T) {
	kv := memkv.New()
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(one)
	var applied []string
	cfg := Config{Store: st, Source: File(path), OnChange: func(c *tools.Catalog, v string) { applied = append(applied, v) }}
	m, err := Load(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	v1 := Version([]byte(one))
	if cur := m.Current(); cur.Version != v1 || len(cur.Catalog.Tools) != 1 || cur.Source != path {
		t.Fatalf("Current = %s from %s with %d tools, want %s from %s with 1", cur.Version, cur.Source, len(cur.Catalog.Tools), v1, path)
	}

	// A restart on the same file records nothing new.
	if _, err := Load(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}

	// A bad catalog changes nothing and names file:line for each problem.
	write(bad)
	r, err := m.Reload(t.Context(), TriggerReload)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Reload(bad) = %v, want ErrInvalid", err)
	}
	for _, line := range []string{path + ":16:", path + ":17:"} {
		if !strings.Contains(err.Error(), line) {
			t.Errorf("Reload(bad) error %q does not name %s", err, line)
		}
	}
	if r.Changed || m.Current().Version != v1 {
		t.Errorf("after a refused reload: changed %v, version %s; want %s unchanged", r.Changed, m.Current().Version, v1)
	}

	write(two)
	r, err = m.Reload(t.Context(), TriggerReload)
	v2 := Version([]byte(two))
	if err != nil || !r.Changed || r.Version != v2 || r.Previous != v1 || len(r.Catalog.Tools) != 2 {
		t.Fatalf("Reload(two) = %+v, %v; want changed to %s from %s with 2 tools", r, err, v2, v1)
	}
	if r, err := m.Reload(t.Context(), TriggerSIGHUP); err != nil || r.Changed {
		t.Errorf("Reload(same file) = changed %v, %v; want unchanged", r.Changed, err)
	}
	os.Remove(path)
	if _, err := m.Reload(t.Context(), TriggerReload); !errors.Is(err, ErrUnreadable) || m.Current().Version != v2 {
		t.Errorf("Reload(missing file) = %v, version %s; want ErrUnreadable and %s kept", err, m.Current().Version, v2)
	}

	got := catalogs(t, st)
	want := []*recordv1.CatalogVersion{
		{Version: v1, Source: path, Tools: 1, Trigger: TriggerStart},
		{Version: v2, Source: path, Tools: 2, Previous: v1, Trigger: TriggerReload},
	}
	if diff := cmp.Diff(want, got, cmpProto); diff != "" {
		t.Errorf("catalog_loaded records (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{v1, v1, v2}, applied); diff != "" {
		t.Errorf("OnChange calls (-want +got):\n%s", diff)
	}
	if src, err := st.CatalogSource(v2); err != nil || string(src) != two {
		t.Errorf("CatalogSource(%s) = %q, %v; want the file's bytes", v2, src, err)
	}

	// A start on another file records it, naming the version it replaced.
	other := filepath.Join(t.TempDir(), "other.yaml")
	os.WriteFile(other, []byte(one), 0o600)
	if _, err := Load(t.Context(), Config{Store: st, Source: File(other)}); err != nil {
		t.Fatal(err)
	}
	if got := catalogs(t, st); len(got) != 3 || got[2].GetPrevious() != v2 || got[2].GetTrigger() != TriggerStart {
		t.Errorf("start on another file recorded %v, want a third record replacing %s", got[len(got)-1], v2)
	}
	// The first catalog must be valid.
	if _, err := Load(t.Context(), Config{Store: st, Source: Bytes("bad.yaml", []byte(bad))}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Load(bad) = %v, want ErrInvalid", err)
	}
}

var cmpProto = cmp.Comparer(proto.Equal)
