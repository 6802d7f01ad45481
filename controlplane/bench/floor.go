package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/loadgen"
)

// The durability floor: what two synced writes cost on the disk under the
// data dir, measured in the same run as the paths, so the report can say
// how much of the durable path's extra time is the price of durability
// (docs/design §11: a durable call makes two synced commits before it answers,
// one before the first byte is sent and one after the answer is observed)
// and how much is everything else.

// floorSamples is how many synced commits (and fsyncs) the floor takes.
const floorSamples = 200

// benchFloor is the measured floor.
type benchFloor struct {
	commit time.Duration // p50 of a synced Badger commit of a Submit-sized batch
	fsync  time.Duration // p50 of a small append and fsync on the same file system
}

// measureFloor opens a throwaway Badger store in a temporary directory
// inside dir (the data dir's file system, where the control plane syncs)
// and times floorSamples synced commits of a Submit-sized batch (eight keys,
// 2 KB), then floorSamples appends with fsync; the directory is removed.
// A fresh, empty store is a lower bound of what the control plane's store
// pays per commit.
func measureFloor(ctx context.Context, dir string) (benchFloor, error) {
	tmp, err := os.MkdirTemp(dir, ".bench-floor-")
	if err != nil {
		return benchFloor{}, fmt.Errorf("bench: durability floor: %w", err)
	}
	defer os.RemoveAll(tmp)
	kv, err := badgerkv.Open(datadir.DB(tmp), badgerkv.Options{})
	if err != nil {
		return benchFloor{}, fmt.Errorf("bench: durability floor: %w", err)
	}
	value := make([]byte, 256)
	commits := make([]time.Duration, 0, floorSamples)
	for i := range floorSamples {
		if err := ctx.Err(); err != nil {
			kv.Close()
			return benchFloor{}, err
		}
		writes := make([]store.Write, 8)
		for k := range writes {
			writes[k] = store.Write{Key: fmt.Appendf(nil, "floor/%06d/%d", i, k), Value: value}
		}
		t := time.Now()
		if err := kv.Commit(writes); err != nil {
			kv.Close()
			return benchFloor{}, fmt.Errorf("bench: durability floor: %w", err)
		}
		commits = append(commits, time.Since(t))
	}
	if err := kv.Close(); err != nil {
		return benchFloor{}, fmt.Errorf("bench: durability floor: %w", err)
	}
	f, err := os.Create(filepath.Join(tmp, "fsync"))
	if err != nil {
		return benchFloor{}, fmt.Errorf("bench: durability floor: %w", err)
	}
	defer f.Close()
	syncs := make([]time.Duration, 0, floorSamples)
	for range floorSamples {
		if err := ctx.Err(); err != nil {
			return benchFloor{}, err
		}
		t := time.Now()
		if _, err := f.Write(value); err != nil {
			return benchFloor{}, fmt.Errorf("bench: durability floor: %w", err)
		}
		if err := f.Sync(); err != nil {
			return benchFloor{}, fmt.Errorf("bench: durability floor: %w", err)
		}
		syncs = append(syncs, time.Since(t))
	}
	return benchFloor{commit: p50(commits), fsync: p50(syncs)}, nil
}

func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// split is how much of extra (a path's p50 over its baseline) the two
// synced commits explain, and the rest.
func (f benchFloor) split(extra time.Duration) (syncs, rest time.Duration) {
	syncs = 2 * f.commit
	return syncs, extra - syncs
}

// printFloor writes the floor and, at concurrency 1, splits the durable
// path's p50 over direct and the mcp path's over bare into the two synced
// commits and the rest. Above concurrency 1 calls share commits and queue
// for the CPU: their p50 over the baseline is mostly that wait, not work to
// split.
func printFloor(w io.Writer, floor benchFloor, merged map[string]loadgen.Result, conc int) {
	fmt.Fprintf(w, "Durability floor on this disk: a synced commit p50 %s on a fresh store, a lower bound (append+fsync p50 %s); a durable call waits for two before it answers", ms(floor.commit), ms(floor.fsync))
	if conc > 1 {
		fmt.Fprintf(w, ".\n  At concurrency %d calls share commits and queue for the CPU, so their p50 is mostly waiting; CPU/call is what to compare (--concurrency 1 splits the p50).\n", conc)
		return
	}
	fmt.Fprintln(w, ":")
	for _, c := range []struct{ path, base, rest string }{
		{"durable", "direct", "gRPC, engine, dispatch"},
		{"mcp", "bare", "gRPC, engine, dispatch, the front"},
	} {
		extra := merged[c.path].Percentile(0.5) - merged[c.base].Percentile(0.5)
		syncs, rest := floor.split(extra)
		fmt.Fprintf(w, "  %s over %s p50 %s: %s the two syncs, %s the rest (%s)\n", c.path, c.base, overP50(merged[c.path], merged[c.base], false), ms(syncs), signedMs(rest), c.rest)
	}
}
