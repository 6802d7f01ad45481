package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestDelay(t *testing.T) {
	p := Policy{Min: time.Second, Max: 5 * time.Second}
	for _, tt := range []struct {
		attempt int
		want    time.Duration
	}{{-1, time.Second}, {0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 5 * time.Second}, {100, 5 * time.Second}} {
		if got := p.Delay(tt.attempt); got != tt.want {
			t.Errorf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
		}
	}
	j := Policy{Min: time.Second, Max: 8 * time.Second, Jitter: true}
	for attempt := 1; attempt <= 5; attempt++ {
		full := Policy{Min: j.Min, Max: j.Max}.Delay(attempt)
		for range 200 {
			if got := j.Delay(attempt); got < full/2 || got > full {
				t.Fatalf("jittered Delay(%d) = %v, want within [%v, %v]", attempt, got, full/2, full)
			}
		}
	}
	if got := (Policy{}).Delay(3); got != 0 {
		t.Errorf("zero Policy Delay = %v, want 0", got)
	}
}

func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Policy{Min: time.Minute, Max: time.Hour}
		start := time.Now()
		if !p.Wait(context.Background(), 2, nil) || time.Since(start) != 2*time.Minute {
			t.Errorf("Wait(2) returned after %v, want 2m and true", time.Since(start))
		}
		wake := make(chan struct{})
		go func() { time.Sleep(time.Second); close(wake) }()
		start = time.Now()
		if !p.Wait(context.Background(), 1, wake) || time.Since(start) != time.Second {
			t.Errorf("woken Wait returned after %v, want 1s and true", time.Since(start))
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancel() }()
		if p.Wait(ctx, 1, nil) {
			t.Errorf("Wait on a cancelled context = true, want false")
		}
	})
}
