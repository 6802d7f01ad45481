package lease

import (
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// TestHoldsUntilTheLocalDeadline: a keeper holds the lease while its local
// deadline is ahead, not past it, and not before it took one.
func TestHoldsUntilTheLocalDeadline(t *testing.T) {
	k := NewKeeper()
	if k.Holds() {
		t.Error("Holds before the lease was taken = true, want false")
	}
	future, past := time.Now().Add(time.Hour), time.Now().Add(-time.Millisecond)
	k.deadline.Store(&future)
	if !k.Holds() {
		t.Error("Holds within the deadline = false, want true")
	}
	k.deadline.Store(&past)
	if k.Holds() {
		t.Error("Holds past the deadline = true, want false")
	}
}

func TestStandbyWait(t *testing.T) {
	db := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ttl := 2 * time.Second
	tests := []struct {
		name string
		l    *backend.Lease
		want time.Duration
	}{
		{"no lease read", nil, 5 * time.Millisecond},
		{"expired", &backend.Lease{Now: db, Expires: db.Add(-time.Second)}, 5 * time.Millisecond},
		{"expires soon: just after it", &backend.Lease{Now: db, Expires: db.Add(120 * time.Millisecond)}, 125 * time.Millisecond},
		{"expires late: a quarter ttl", &backend.Lease{Now: db, Expires: db.Add(time.Hour)}, ttl / 4},
	}
	for _, tt := range tests {
		if got := StandbyWait(tt.l, ttl); got != tt.want {
			t.Errorf("%s: StandbyWait = %v, want %v", tt.name, got, tt.want)
		}
	}
}
