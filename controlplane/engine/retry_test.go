package engine

import (
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
