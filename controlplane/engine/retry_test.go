package engine

import (
	"fmt"
	"testing"
	"time"
)

func TestRetryPolicyBackoff(t *testing.T) {
	p := RetryPolicy{Min: 250 * time.Millisecond, Max: time.Second}
	for _, tt := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, 250 * time.Millisecond},
		{1, 250 * time.Millisecond},
		{2, 500 * time.Millisecond},
		{3, time.Second},
		{4, time.Second},
		{60, time.Second},
	} {
		if got := p.Backoff(tt.attempt); got != tt.want {
			t.Errorf("Backoff(%d) = %s, want %s", tt.attempt, got, tt.want)
		}
	}
}

func TestRetryPolicyJitterStaysBounded(t *testing.T) {
	p := RetryPolicy{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond, Jitter: true}
	for attempt := 1; attempt <= 10; attempt++ {
		ceil := min(10*time.Millisecond<<(attempt-1), 80*time.Millisecond)
		for range 50 {
			if d := p.Backoff(attempt); d < ceil/2 || d > ceil {
				t.Fatalf("Backoff(%d) = %s, want within [%s, %s]", attempt, d, ceil/2, ceil)
			}
		}
	}
}

// TestBackoffOfIsPerExecution: one execution's nth wait is always the same
// (a simulated schedule replays), within the jitter's bounds, and
// executions that fail together do not all wait alike.
func TestBackoffOfIsPerExecution(t *testing.T) {
	p := RetryPolicy{Min: time.Second, Max: time.Minute, Jitter: true}
	waits := map[time.Duration]bool{}
	for i := range 100 {
		id := fmt.Sprintf("act_%026d", i)
		for attempt := 1; attempt <= 4; attempt++ {
			d := p.BackoffOf(id, attempt)
			ceil := min(time.Second<<(attempt-1), time.Minute)
			if d < ceil/2 || d > ceil {
				t.Fatalf("BackoffOf(%s, %d) = %s, want within [%s, %s]", id, attempt, d, ceil/2, ceil)
			}
			if again := p.BackoffOf(id, attempt); again != d {
				t.Fatalf("BackoffOf(%s, %d) = %s, then %s", id, attempt, d, again)
			}
			if attempt == 1 {
				waits[d] = true
			}
		}
	}
	if len(waits) < 90 {
		t.Errorf("100 executions' first waits take %d values; want them spread", len(waits))
	}
}

func TestRetryPolicyExhausted(t *testing.T) {
	for _, tt := range []struct {
		limit, attempts int
		want            bool
	}{
		{0, 1000, false},
		{3, 0, false},
		{3, 2, false},
		{3, 3, true},
		{3, 4, true},
	} {
		p := RetryPolicy{Limit: tt.limit}
		if got := p.Exhausted(tt.attempts); got != tt.want {
			t.Errorf("RetryPolicy{Limit: %d}.Exhausted(%d) = %v, want %v", tt.limit, tt.attempts, got, tt.want)
		}
	}
}
