package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/latchhq/latch/internal/loadgen"
)

// storeWrites is what the dev stack's store wrote, from the counters on its
// ops listener's /metrics: group commits (one sync each), the updates they
// carried, and the keys and bytes (keys and values) they wrote.
type storeWrites struct {
	commits, updates, keys, bytes float64
	ok                            bool // false when the counters could not be read
}

func (a storeWrites) since(b storeWrites) storeWrites {
	if !a.ok || !b.ok {
		return storeWrites{}
	}
	return storeWrites{commits: a.commits - b.commits, updates: a.updates - b.updates, keys: a.keys - b.keys, bytes: a.bytes - b.bytes, ok: true}
}

func (a storeWrites) add(b storeWrites) storeWrites {
	if !a.ok || !b.ok {
		return storeWrites{}
	}
	return storeWrites{commits: a.commits + b.commits, updates: a.updates + b.updates, keys: a.keys + b.keys, bytes: a.bytes + b.bytes, ok: true}
}

// writesMeter reads the store's counters from the `latch dev` ops
// listener. Its zero value (no listener in the dev.json) reads nothing.
type writesMeter struct {
	url string // the ops listener's /metrics
	hc  *http.Client
	err error // why the last read failed
}

func newWritesMeter(opsURL string) *writesMeter {
	if opsURL == "" {
		return &writesMeter{err: fmt.Errorf("the dev.json names no ops listener (written by an older latch dev: restart it with this latch to get them)")}
	}
	return &writesMeter{url: opsURL + "/metrics", hc: benchClient(1)}
}

// The metrics read: latch_store_group_size counts the group commits that
// wrote (its sum the updates in them), the written_* counters what they
// wrote.
const (
	metricGroupSize    = "latch_store_group_size"
	metricWrittenKeys  = "latch_store_written_keys_total"
	metricWrittenBytes = "latch_store_written_bytes_total"
)

// read scrapes the counters; a failure is kept in m.err and gives a reading
// that is not ok (the bench goes on without the writes line).
func (m *writesMeter) read(ctx context.Context) storeWrites {
	if m.url == "" {
		return storeWrites{}
	}
	w, err := m.scrape(ctx)
	if err != nil {
		m.err = err
		return storeWrites{}
	}
	return w
}

func (m *writesMeter) scrape(ctx context.Context) (storeWrites, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return storeWrites{}, err
	}
	resp, err := m.hc.Do(req)
	if err != nil {
		return storeWrites{}, fmt.Errorf("read %s: %w", m.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return storeWrites{}, fmt.Errorf("read %s: %s", m.url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return storeWrites{}, fmt.Errorf("read %s: %w", m.url, err)
	}
	one := func(name string) (*dto.Metric, error) {
		f := fams[name]
		if f == nil || len(f.GetMetric()) != 1 {
			return nil, fmt.Errorf("%s serves no %s (an older latch dev: restart it with this latch to get them)", m.url, name)
		}
		return f.GetMetric()[0], nil
	}
	var w storeWrites
	g, err := one(metricGroupSize)
	if err != nil {
		return storeWrites{}, err
	}
	w.commits, w.updates = float64(g.GetHistogram().GetSampleCount()), g.GetHistogram().GetSampleSum()
	k, err := one(metricWrittenKeys)
	if err != nil {
		return storeWrites{}, err
	}
	b, err := one(metricWrittenBytes)
	if err != nil {
		return storeWrites{}, err
	}
	w.keys, w.bytes, w.ok = k.GetCounter().GetValue(), b.GetCounter().GetValue(), true
	return w, nil
}

// printWrites is the line that says what each durable path cost the store
// per call. The lazy `delivered` updates of a path's last calls may commit
// after its reading (within the store's lazy delay), so the mcp path's
// figures can fall short by up to one group.
func printWrites(out io.Writer, m *writesMeter, names []string, merged map[string]loadgen.Result, spent map[string]benchCPU) {
	line := ""
	for _, n := range names {
		w, r := spent[n].writes, merged[n]
		if !w.ok || r.Ops == 0 || w.commits == 0 {
			continue
		}
		calls := float64(r.Ops)
		if line != "" {
			line += "; "
		}
		line += fmt.Sprintf("%s %.2f commits of %.1f updates, %.1f keys, %.2f KB", n, w.commits/calls, w.updates/w.commits, w.keys/calls, w.bytes/calls/1000)
	}
	switch {
	case line != "":
		fmt.Fprintf(out, "Store writes per call (its /metrics): %s.\n", line)
	case m.err != nil:
		fmt.Fprintf(out, "Store writes not measured: %v.\n", m.err)
	}
}
