package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// A front's report that the caller left is journaled once, changes no
// state, and gives way to a later delivery (a retry that attached); the
// state check agrees with every record written.
func TestMarkCallerLeftThenDeliveredToARetry(t *testing.T) {
	h := newHarness(t, t.TempDir(), nil)
	r := h.submit(t, "alice", "deploy", `{"service":"api","version":"7.0.0"}`)
	id := r.Execution.GetId()
	h.waitState(t, id, recordv1.State_STATE_COMPLETED)

	late := h.e.cfg.Clock().Add(-time.Minute)
	x, err := h.e.MarkCallerLeft(t.Context(), id, late)
	if err != nil {
		t.Fatalf("MarkCallerLeft(%s) = %v", id, err)
	}
	if x.GetState() != recordv1.State_STATE_COMPLETED || lifecycle.DeliveryOf(x) != recordv1.Delivery_DELIVERY_CALLER_LEFT || x.GetCallerLeftAt() == nil {
		t.Fatalf("after MarkCallerLeft: state %v, delivery %v, caller_left_at %v; want completed, caller_left, stamped", x.GetState(), x.GetDelivery(), x.GetCallerLeftAt())
	}
	again, err := h.e.MarkCallerLeft(t.Context(), id, time.Time{})
	if err != nil || again.GetJournalIndex() != x.GetJournalIndex() {
		t.Errorf("MarkCallerLeft again = journal index %d, %v; want %d (nothing new recorded)", again.GetJournalIndex(), err, x.GetJournalIndex())
	}

	d, err := h.e.MarkDelivered(t.Context(), id)
	if err != nil || lifecycle.DeliveryOf(d) != recordv1.Delivery_DELIVERY_DELIVERED || d.GetDelivery() != recordv1.Delivery_DELIVERY_DELIVERED {
		t.Fatalf("MarkDelivered after the caller left = %v, %v; want delivered", d, err)
	}
	if after, err := h.e.MarkCallerLeft(t.Context(), id, time.Time{}); err != nil || after.GetState() != recordv1.State_STATE_DELIVERED || after.GetJournalIndex() != d.GetJournalIndex() {
		t.Errorf("MarkCallerLeft after delivery = %v, %v; want delivered unchanged", after, err)
	}

	hist, err := h.e.History(id, "")
	if err != nil {
		t.Fatal(err)
	}
	var left []*recordv1.JournalEntry
	for _, e := range hist {
		if lifecycle.EntryKindOf(e) == lifecycle.CallerLeftKind {
			left = append(left, e)
		}
	}
	if len(left) != 1 || left[0].GetFrom() != recordv1.State_STATE_COMPLETED || left[0].GetTo() != recordv1.State_STATE_COMPLETED {
		t.Fatalf("caller_left records = %v, want one, completed -> completed", left)
	}
	if !strings.Contains(left[0].GetReason(), late.UTC().Format(time.RFC3339Nano)) {
		t.Errorf("caller_left reason = %q, want it to name the front's time %s (the record came late)", left[0].GetReason(), late.UTC().Format(time.RFC3339Nano))
	}
	rep, err := h.st.CheckState(context.Background(), store.CheckAll)
	if err != nil || !rep.OK() {
		t.Errorf("CheckState = %v, %v; want the records to agree with the journal", rep, err)
	}

	if _, err := h.e.MarkCallerLeft(t.Context(), "act_nope", time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkCallerLeft(unknown) = %v, want ErrNotFound", err)
	}
}
