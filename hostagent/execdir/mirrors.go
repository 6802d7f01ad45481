package execdir

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// maxParallelSyncs bounds the file fsyncs a mirror group runs at once.
const maxParallelSyncs = 16

// Mirrors writes script marker mirrors (DIR/scripts/<id>.json) with group
// commit. Write returns once the file is durable, exactly as
// WriteScriptMirror; concurrent writers share the syncs:
//
//  1. each file of the group is written to its own temp file in DIR/scripts;
//  2. the temp files are fsync'd, in parallel (the file system journals
//     concurrent fsyncs together), so every new content is on disk before
//     any name points at it;
//  3. the temp files are renamed over their targets, in arrival order;
//  4. DIR/scripts is fsync'd once, which makes every rename of the group
//     durable; only then is any writer of the group answered.
//
// A crash at any point leaves each mirror either as it was or as written,
// never partial (a leftover temp file is named .<id>.json.tmp-* and is
// ignored by ReadScriptMirrors). There is no goroutine: the first writer to
// find no group in flight writes the group of everyone waiting, then hands
// the next group to the first writer that arrived meanwhile.
//
// Writers of one ID must be serialised by the caller (the agent holds the
// script lock), so that mirrors follow the store's order.
type Mirrors struct {
	dir string

	mu       sync.Mutex
	pending  []*mirrorWrite
	flushing bool
}

type mirrorWrite struct {
	m    *hostagentv1.Marker
	err  error
	lead bool          // set before wake is closed: this writer writes the next group
	wake chan struct{} // closed when done, or when this writer is to lead
}

// NewMirrors returns the mirror writer of the agent data directory dataDir.
func NewMirrors(dataDir string) *Mirrors { return &Mirrors{dir: ScriptsDir(dataDir)} }

// Write durably writes the mirror of script marker m.
func (w *Mirrors) Write(m *hostagentv1.Marker) error {
	if err := ValidID(m.GetExecutionId()); err != nil {
		return fmt.Errorf("execdir: mirror of %q: %w", m.GetExecutionId(), err)
	}
	me := &mirrorWrite{m: m, wake: make(chan struct{})}
	w.mu.Lock()
	w.pending = append(w.pending, me)
	if w.flushing {
		w.mu.Unlock()
		<-me.wake
		if !me.lead {
			return me.err
		}
		w.mu.Lock()
	}
	w.flushing = true
	group := w.pending
	w.pending = nil
	w.mu.Unlock()

	w.writeGroup(group, me)

	w.mu.Lock()
	if len(w.pending) > 0 {
		next := w.pending[0]
		next.lead = true
		close(next.wake)
	} else {
		w.flushing = false
	}
	w.mu.Unlock()
	return me.err
}

// writeGroup writes every mirror of group durably, sets each err and wakes
// every writer but leader (who is running this).
func (w *Mirrors) writeGroup(group []*mirrorWrite, leader *mirrorWrite) {
	defer func() {
		for _, g := range group {
			if g != leader {
				close(g.wake)
			}
		}
	}()
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		for _, g := range group {
			g.err = fmt.Errorf("execdir: create %s: %w", w.dir, err)
		}
		return
	}
	temps := make([]string, len(group))
	defer func() {
		for _, t := range temps {
			if t != "" {
				_ = os.Remove(t)
			}
		}
	}()
	files := make([]*os.File, len(group))
	for i, g := range group {
		files[i], g.err = createTemp(w.dir, g.m)
		if g.err == nil {
			temps[i] = files[i].Name()
		}
	}
	// Step 2: content durable before any rename.
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelSyncs)
	for i, f := range files {
		if f == nil {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := group[i].m.GetExecutionId() + ".json"
			if err := f.Sync(); err != nil {
				group[i].err = fmt.Errorf("execdir: fsync %s: %w", name, err)
			}
			if err := f.Close(); err != nil && group[i].err == nil {
				group[i].err = fmt.Errorf("execdir: close %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	// Step 3: renames, in arrival order.
	renamed := 0
	for i, g := range group {
		if g.err != nil || temps[i] == "" {
			continue
		}
		name := g.m.GetExecutionId() + ".json"
		if err := os.Rename(temps[i], filepath.Join(w.dir, name)); err != nil {
			g.err = fmt.Errorf("execdir: rename %s: %w", name, err)
			continue
		}
		temps[i] = ""
		renamed++
	}
	// Step 4: one directory sync makes every rename durable.
	if renamed == 0 {
		return
	}
	if err := SyncDir(w.dir); err != nil {
		for i, g := range group {
			if g.err == nil && temps[i] == "" {
				g.err = err
			}
		}
	}
}

// createTemp writes the mirror of m to a new temp file in dir (not yet
// synced) and returns it open.
func createTemp(dir string, m *hostagentv1.Marker) (*os.File, error) {
	name := m.GetExecutionId() + ".json"
	b, err := protojson.MarshalOptions{Multiline: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("execdir: encode %s: %w", name, err)
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("execdir: create temp for %s: %w", name, err)
	}
	fail := func(what string, err error) (*os.File, error) {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("execdir: %s %s: %w", what, name, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fail("write", err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail("chmod", err)
	}
	return f, nil
}
