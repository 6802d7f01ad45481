package engine

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

func TestAbsenceCountsOnlyAfterTheSettlePoint(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	tool := &tools.Tool{Name: "order", Timeout: time.Minute}
	target := &tools.Target{Name: "orders", Timeout: 5 * time.Minute, Settle: time.Hour}
	tests := []struct {
		name     string
		x        *recordv1.Execution
		tool     *tools.Tool
		a        Attempt
		asked    time.Duration
		counts   bool
		settleAt time.Duration
	}{
		{"before the settle point", &recordv1.Execution{DispatchedAt: at(0), LastSentAt: at(0)}, tool, Attempt{}, time.Hour, false, time.Hour + time.Minute},
		{"at the settle point", &recordv1.Execution{DispatchedAt: at(0), LastSentAt: at(0)}, tool, Attempt{}, time.Hour + time.Minute, true, time.Hour + time.Minute},
		{"counts from the latest send, not the first", &recordv1.Execution{DispatchedAt: at(0), LastSentAt: at(2 * time.Hour)}, tool, Attempt{}, 2 * time.Hour, false, 3*time.Hour + time.Minute},
		{"records without last_sent_at use dispatched_at", &recordv1.Execution{DispatchedAt: at(0)}, tool, Attempt{}, 2 * time.Hour, true, time.Hour + time.Minute},
		{"no send time recorded never counts at once", &recordv1.Execution{}, tool, Attempt{}, 2 * time.Hour, false, 3*time.Hour + time.Minute},
		{"the target's timeout when the tool has none", &recordv1.Execution{DispatchedAt: at(0)}, &tools.Tool{Name: "order"}, Attempt{}, time.Hour + time.Minute, false, time.Hour + 5*time.Minute},
		{"a channel's longer in-flight bound", &recordv1.Execution{DispatchedAt: at(0)}, tool, Attempt{InFlight: 10 * time.Minute}, time.Hour + 5*time.Minute, false, time.Hour + 10*time.Minute},
		{"a durable absence counts at once", &recordv1.Execution{DispatchedAt: at(0)}, tool, Attempt{Durable: true}, time.Second, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.a.Class, tt.a.Reason = Absent, "status endpoint answered 404"
			v := absence(tt.x, Call{Tool: tt.tool, Target: target}, tt.a, t0.Add(tt.asked))
			if v.counts != tt.counts {
				t.Errorf("absence(asked +%s).counts = %v, want %v (%s)", tt.asked, v.counts, tt.counts, v.reason)
			}
			if !tt.a.Durable && !v.settleAt.Equal(t0.Add(tt.settleAt)) {
				t.Errorf("settle point = %s, want +%s", v.settleAt, tt.settleAt)
			}
			if !strings.Contains(v.reason, "404") {
				t.Errorf("reason %q does not say what was seen", v.reason)
			}
		})
	}
}

// TestEarlyAbsenceKeepsTheOutcomeUnknown runs the real engine on a status
// query tool whose target settles in 1h: an absent answer right after the
// dispatch proves nothing, uses up no attempt and schedules the next query
// at the settle point; once the clock passes it, the same answer counts.
// It runs in a synctest bubble: the recovery queue's timers and the clock
// are the bubble's, so the hour passes without a fake clock.
func TestEarlyAbsenceKeepsTheOutcomeUnknown(t *testing.T) {
	synctest.Test(t, testEarlyAbsenceKeepsTheOutcomeUnknown)
}

func testEarlyAbsenceKeepsTheOutcomeUnknown(t *testing.T) {
	h := newHarnessWith(t, "", &fakeChannel{dispatch: []AttemptClass{Unknown}, query: []AttemptClass{Absent, Absent, Absent, Absent}}, func(c *Config) {
		c.Clock = time.Now // the bubble's clock
		c.Recovery.Interval = time.Minute
	})
	r := h.submit(t, "alice", "order", `{"sku":"a-1"}`)
	id := r.Execution.GetId()
	x := h.waitFor(t, id, "the next query scheduled at the settle point", func(x *recordv1.Execution) bool {
		sent, next := x.GetLastSentAt(), x.GetNextRecoveryAt()
		return x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN && sent != nil && next != nil &&
			next.AsTime().Equal(sent.AsTime().Add(time.Minute+time.Hour))
	})
	if x.GetRecoveryAttempts() != 0 {
		t.Errorf("recovery_attempts = %d after an early absence, want 0", x.GetRecoveryAttempts())
	}
	hist, err := h.st.History(id)
	if err != nil {
		t.Fatal(err)
	}
	var query *recordv1.JournalEntry
	for _, e := range hist {
		if lifecycle.EntryKindNameOf(e) == "recovery_query" {
			query = e
		}
		if e.GetTo() == recordv1.State_STATE_NOT_EXECUTED {
			t.Fatalf("journal has not_executed before the settle point: %s", e.GetReason())
		}
	}
	if query == nil || !strings.Contains(query.GetReason(), "not evidence") || !strings.Contains(query.GetReason(), "settle point") {
		t.Fatalf("recovery_query journal entry = %v, want one saying the absence is not evidence before the settle point", query)
	}

	time.Sleep(2 * time.Hour)
	synctest.Wait()
	x = h.waitState(t, id, recordv1.State_STATE_NOT_EXECUTED)
	if !strings.Contains(x.GetReason(), "after the settle point") {
		t.Errorf("not_executed reason = %q, want it to say the absence was seen after the settle point", x.GetReason())
	}
}

// waitFor waits (bounded) until the execution satisfies ok.
func (h *harness) waitFor(tb testing.TB, id, what string, ok func(*recordv1.Execution) bool) *recordv1.Execution {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := h.e.Watch(ctx, id, "")
	if err != nil {
		tb.Fatal(err)
	}
	var last *recordv1.Execution
	for x := range w {
		last = x
		if ok(x) {
			return x
		}
	}
	tb.Fatalf("execution %s never reached %s; last seen %v", id, what, last)
	return nil
}

// TestRecoveryResendIsJournaledBeforeItGoesOut: a re-send under the same
// key is a send, so its time is durable (last_sent_at, a recovery_replay
// record) before the channel is called, and later absences count from it.
func TestRecoveryResendIsJournaledBeforeItGoesOut(t *testing.T) {
	h := newHarness(t, t.TempDir(), &fakeChannel{dispatch: []AttemptClass{Unknown, Observed}})
	r := h.submit(t, "alice", "deploy", `{"service":"s","version":"7"}`)
	x := h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if !x.GetLastSentAt().AsTime().After(x.GetDispatchedAt().AsTime()) {
		t.Errorf("last_sent_at %s is not after dispatched_at %s: the re-send was not recorded", x.GetLastSentAt().AsTime(), x.GetDispatchedAt().AsTime())
	}
	hist, err := h.st.History(x.GetId())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range hist {
		kinds = append(kinds, lifecycle.EntryKindNameOf(e)+">"+e.GetTo().String())
	}
	replay := -1
	for i, e := range hist {
		if lifecycle.EntryKindNameOf(e) == "recovery_replay" {
			replay = i
			if !e.GetExecution().GetLastSentAt().AsTime().Equal(x.GetLastSentAt().AsTime()) {
				t.Errorf("recovery_replay record carries last_sent_at %s, want %s", e.GetExecution().GetLastSentAt().AsTime(), x.GetLastSentAt().AsTime())
			}
		}
	}
	if replay < 0 || hist[len(hist)-1].GetTo() != recordv1.State_STATE_COMPLETED || replay > len(hist)-2 {
		t.Errorf("journal = %v, want a recovery_replay record before completed", kinds)
	}
}

// TestStaleRecoveryNeverResends: recovery working from a stale copy of an
// execution that has settled meanwhile sends nothing and journals nothing.
func TestStaleRecoveryNeverResends(t *testing.T) {
	h := newHarness(t, t.TempDir(), &fakeChannel{query: []AttemptClass{Unknown}})
	for _, c := range []struct{ tool, args string }{
		{"deploy", `{"service":"s","version":"8"}`}, // re-send class
		{"ticket", `{"title":"t"}`},                 // status query class
	} {
		tool := c.tool
		r := h.submit(t, "alice", tool, c.args)
		x := h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)
		before, err := h.st.History(x.GetId())
		if err != nil {
			t.Fatal(err)
		}
		calls := h.ch.calls.Load()
		stale := proto.Clone(x).(*recordv1.Execution)
		stale.State = recordv1.State_STATE_OUTCOME_UNKNOWN
		h.e.recoverOne(t.Context(), stale, true)
		if got := h.ch.calls.Load(); got != calls {
			t.Errorf("%s: recovery of a stale copy re-sent the request (%d dispatches, want %d)", tool, got, calls)
		}
		after, err := h.st.History(x.GetId())
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Errorf("%s: recovery of a stale copy journaled %d records, want none: %v", tool, len(after)-len(before), after[len(before):])
		}
	}
}
