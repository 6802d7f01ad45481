package loadgen

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRunCountsAndPercentiles(t *testing.T) {
	res, err := Run(context.Background(), 4, 100, func(_ context.Context, i int64) error {
		if i < 1 || i > 100 {
			t.Errorf("op index %d out of 1..100", i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 100 || res.Stopped {
		t.Errorf("Ops = %d, Stopped = %v; want 100, false", res.Ops, res.Stopped)
	}
	if res.Percentile(0.5) > res.Percentile(0.99) {
		t.Errorf("p50 %v > p99 %v", res.Percentile(0.5), res.Percentile(0.99))
	}
}

func TestPercentileNearestRank(t *testing.T) {
	r := Result{sorted: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {0, 1}, {1, 10}} {
		if got := r.Percentile(tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := (Result{}).Percentile(0.5); got != 0 {
		t.Errorf("Percentile of no ops = %v, want 0", got)
	}
}

func TestRunStopsOnFirstError(t *testing.T) {
	boom := errors.New("boom")
	res, err := Run(context.Background(), 2, 1000, func(_ context.Context, i int64) error {
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if res.Ops >= 1000 {
		t.Errorf("Ops = %d after an error, want fewer than 1000", res.Ops)
	}
}

func TestRunStoppedByContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	res, err := Run(ctx, 1, 1000, func(_ context.Context, i int64) error {
		if i == 5 {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Ops != 5 {
		t.Errorf("Ops = %d, Stopped = %v; want 5, true", res.Ops, res.Stopped)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	if _, err := Run(context.Background(), 0, 10, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Run(0 workers) = %v, want ErrConfig", err)
	}
}

func TestMerge(t *testing.T) {
	a := Result{Ops: 2, Elapsed: time.Second, sorted: []time.Duration{1, 5}}
	b := Result{Ops: 3, Elapsed: 2 * time.Second, Stopped: true, sorted: []time.Duration{2, 3, 4}}
	m := Merge(a, b)
	if m.Ops != 5 || m.Elapsed != 3*time.Second || !m.Stopped {
		t.Errorf("Merge = {Ops %d, Elapsed %v, Stopped %v}, want {5, 3s, true}", m.Ops, m.Elapsed, m.Stopped)
	}
	if got := m.Percentile(0.5); got != 3 {
		t.Errorf("Merge p50 = %v, want 3 (latencies of both runs)", got)
	}
	if got, want := m.Rate(), 5.0/3; got != want {
		t.Errorf("Merge rate = %v, want %v", got, want)
	}
}
