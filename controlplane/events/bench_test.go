package events_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/testing/webhooktest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// BenchmarkDeliveryLatency measures, on loopback, the time from the
// commit of a transition (Badger, SyncWrites) to a verifying HTTPS
// receiver accepting its signed event; it reports p50 and p99.
func BenchmarkDeliveryLatency(b *testing.B) {
	rcv := webhooktest.New(b)
	arrived := make(chan string, 16)
	rcv.OnDelivery = func(id string) { arrived <- id }
	kv, err := badgerkv.Open(filepath.Join(b.TempDir(), "db"), badgerkv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	sink := opsSink(b, rcv.URL, rcv.CAFile)
	st.SetEventSource(events.Source(nil, []events.Sink{sink}))
	o, err := events.New(events.Config{Store: st, Sinks: []events.Sink{sink}, Secret: func(string) (string, error) { return webhooktest.Secret, nil },
		UnknownAfter: -1, Poll: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.Run(ctx)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		journal(b, st, step("act_B", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION))
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			b.Fatal("event not delivered")
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
