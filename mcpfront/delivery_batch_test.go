package mcpfront

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// blockingDeliveries records MarkDelivered requests; the first one waits
// until release is closed; with fail, every one fails.
type blockingDeliveries struct {
	controlplanev1.ControlPlaneClient
	started chan struct{}
	release chan struct{}
	fail    bool
	mu      sync.Mutex
	got     [][]string
}

func (c *blockingDeliveries) MarkDelivered(_ context.Context, req *controlplanev1.MarkDeliveredRequest, _ ...grpc.CallOption) (*controlplanev1.MarkDeliveredResponse, error) {
	c.mu.Lock()
	c.got = append(c.got, append([]string{req.GetExecutionId()}, req.GetMoreExecutionIds()...))
	first := len(c.got) == 1
	c.mu.Unlock()
	if first {
		close(c.started)
		<-c.release
	}
	if c.fail {
		return nil, status.Error(codes.Unavailable, "control plane down")
	}
	return &controlplanev1.MarkDeliveredResponse{}, nil
}

// TestDeliveriesBatch: deliveries made while a MarkDelivered is in flight
// go together in the next one, each id once, and Close waits for them; an
// id the front did not hand out is never sent.
func TestDeliveriesBatch(t *testing.T) {
	cp := &blockingDeliveries{started: make(chan struct{}), release: make(chan struct{})}
	f, err := New(Config{ControlPlane: cp})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"act_a", "act_b", "act_c", "act_d"} {
		f.expectDelivery(id)
	}
	f.markDelivered("act_a")
	<-cp.started // act_a's MarkDelivered is in flight
	f.markDelivered("act_b")
	f.markDelivered("act_forged") // never handed out: not sent
	f.markDelivered("act_c")
	f.markDelivered("act_b") // twice: sent once
	f.markDelivered("act_d")
	close(cp.release)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"act_a"}, {"act_b", "act_c", "act_d"}}
	if diff := cmp.Diff(want, cp.got); diff != "" {
		t.Errorf("MarkDelivered requests (-want +got):\n%s", diff)
	}
	if len(f.pending) != 0 || len(f.deliverQ) != 0 {
		t.Errorf("after Close: pending %v, queue %v; want none", f.pending, f.deliverQ)
	}
}

// TestDeliveriesDroppedOnCloseWhenDown: a front closing while the control
// plane refuses its deliveries stops after the failing call instead of
// trying every batch left; those executions stay completed, not delivered.
func TestDeliveriesDroppedOnCloseWhenDown(t *testing.T) {
	cp := &blockingDeliveries{started: make(chan struct{}), release: make(chan struct{}), fail: true}
	f, err := New(Config{ControlPlane: cp})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 3*maxDeliveryBatch)
	for i := range ids {
		ids[i] = fmt.Sprintf("act_%d", i)
		f.expectDelivery(ids[i])
	}
	f.markDelivered(ids[0])
	<-cp.started
	for _, id := range ids[1:] {
		f.markDelivered(id)
	}
	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	<-f.closing // Close has begun; now the call in flight fails
	close(cp.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if len(cp.got) != 1 {
		t.Errorf("MarkDelivered called %d times while closing with the control plane down, want 1 (the one in flight)", len(cp.got))
	}
}

// flakyDeliveries fails the first failures MarkDelivered calls as a control
// plane that cannot be reached, then records the ids it is sent.
type flakyDeliveries struct {
	controlplanev1.ControlPlaneClient
	mu       sync.Mutex
	failures int
	calls    int
	recorded []string
}

func (c *flakyDeliveries) MarkDelivered(_ context.Context, req *controlplanev1.MarkDeliveredRequest, _ ...grpc.CallOption) (*controlplanev1.MarkDeliveredResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls <= c.failures {
		return nil, status.Error(codes.Unavailable, "control plane restarting")
	}
	c.recorded = append(c.recorded, append([]string{req.GetExecutionId()}, req.GetMoreExecutionIds()...)...)
	return &controlplanev1.MarkDeliveredResponse{}, nil
}

// TestDeliveriesKeptWhileControlPlaneAway: a delivery the control plane
// cannot take now (it is restarting) is kept and sent again until it is
// recorded, instead of being dropped and leaving the execution to read as
// not delivered after the caller got its answer.
func TestDeliveriesKeptWhileControlPlaneAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &flakyDeliveries{failures: 4}
		f, err := New(Config{ControlPlane: cp})
		if err != nil {
			t.Fatal(err)
		}
		f.expectDelivery("act_a")
		f.expectDelivery("act_b")
		f.markDelivered("act_a")
		f.markDelivered("act_b")
		time.Sleep(time.Minute) // the backoff's waits, in the bubble's clock
		synctest.Wait()
		cp.mu.Lock()
		got := append([]string(nil), cp.recorded...)
		calls := cp.calls
		cp.mu.Unlock()
		if diff := cmp.Diff([]string{"act_a", "act_b"}, got); diff != "" {
			t.Errorf("recorded deliveries after %d calls (-want +got):\n%s", calls, diff)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
