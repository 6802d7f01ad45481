package mcpfront

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/internal/backoff"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Delivery reports: what this front observed about handing a completed
// execution's answer to its caller, sent to the control plane off the
// critical path of the answer (MarkDelivered with reports):
//
//   - delivered: the answer was written to the caller (serveObserved, the
//     stdio transport);
//   - caller left: the caller's connection or stream closed before the
//     answer could be written (a stateless call whose request ended, a
//     write that failed, an explicit cancel). A stateful session's dropped
//     stream is not reported: its answer is kept for a resume (GET +
//     Last-Event-ID), and the session's end records what it never got.
//
// A report the control plane cannot take now (restarting, failing over,
// unreachable) is kept and sent again with deliveryBackoff until it is;
// with Config.StateDir it is kept on disk too (deliveryqueue.go), so a
// front that stops meanwhile sends it when it starts again. The queue is
// bounded (maxQueued reports, maxQueueBytes encoded); past it the oldest
// are dropped, counted (latch_mcp_delivery_reports_dropped_total) and
// logged: those executions then read "delivery not recorded", never failed.

// maxQueued bounds the reports kept for the control plane.
const maxQueued = 100_000

// maxQueueBytes bounds the encoded size of the reports kept (on disk, the
// queue file is about this size at most).
const maxQueueBytes = 8 << 20

// maxDeliveryBatch bounds the reports of one MarkDelivered (the control
// plane takes up to 1000).
const maxDeliveryBatch = 256

// markDelivered reports delivery of a result this front handed out
// (expectDelivery), once per registered id.
func (f *Front) markDelivered(id string) {
	if !f.takePending(id) {
		return
	}
	f.report(id, recordv1.Delivery_DELIVERY_DELIVERED)
}

// callerLeft reports that the caller of execution id left before its
// answer could be written. A result handed out for it and not written is
// no longer expected.
func (f *Front) callerLeft(id string) {
	if id == "" {
		return
	}
	f.takePending(id)
	f.report(id, recordv1.Delivery_DELIVERY_CALLER_LEFT)
}

// notWritten reports that the result this front handed out for id
// (expectDelivery) could not be written: its caller left before the
// answer. Only registered ids count: a delivery marker inside a target's
// body cannot speak for another execution.
func (f *Front) notWritten(id string) {
	if !f.takePending(id) {
		return
	}
	f.report(id, recordv1.Delivery_DELIVERY_CALLER_LEFT)
}

// takePending removes id from the results expected to be written and
// reports whether it was there.
func (f *Front) takePending(id string) bool {
	f.pendingMu.Lock()
	defer f.pendingMu.Unlock()
	_, ok := f.pending[id]
	delete(f.pending, id)
	return ok
}

// report queues one report and starts the sender when none runs.
func (f *Front) report(id string, d recordv1.Delivery) {
	r := &controlplanev1.DeliveryReport{ExecutionId: id, Delivery: d, ObservedAt: timestamppb.New(time.Now())}
	f.deliverMu.Lock()
	defer f.deliverMu.Unlock()
	f.queueLocked([]*controlplanev1.DeliveryReport{r}, false)
	if f.onDisk {
		// The control plane is away and the queue is on disk: keep the
		// disk current, so a front killed now loses nothing.
		f.persistLocked()
	}
	f.startSenderLocked()
}

// startSenderLocked starts sendDeliveries unless it runs or the front is
// closing. deliverMu is held.
func (f *Front) startSenderLocked() {
	if f.delivering || len(f.deliverQ) == 0 {
		return
	}
	select {
	case <-f.closing:
		return
	default:
	}
	f.delivering = true
	f.bg.Add(1)
	go f.sendDeliveries()
}

// queueLocked adds rs to the queue (in front when again: a batch sent
// back) and keeps the queue within its bounds, dropping the oldest
// reports, counted and logged. deliverMu is held.
func (f *Front) queueLocked(rs []*controlplanev1.DeliveryReport, again bool) {
	if again {
		f.deliverQ = append(rs, f.deliverQ...)
	} else {
		f.deliverQ = append(f.deliverQ, rs...)
	}
	for _, r := range rs {
		f.queuedBytes += reportSize(r)
	}
	drop := 0
	for len(f.deliverQ)-drop > maxQueued || (f.queuedBytes > maxQueueBytes && drop < len(f.deliverQ)) {
		f.queuedBytes -= reportSize(f.deliverQ[drop])
		drop++
	}
	if drop > 0 {
		f.deliverQ = append(f.deliverQ[:0], f.deliverQ[drop:]...)
		f.log.Warn("too many delivery reports kept while the control plane is away; dropped the oldest: those executions will read 'delivery not recorded'",
			"dropped", drop, "kept", len(f.deliverQ), "max_reports", maxQueued, "max_bytes", maxQueueBytes)
		if m := f.cfg.Metrics; m != nil {
			m.deliveriesDropped.Add(float64(drop))
		}
	}
	f.gaugeLocked()
}

func (f *Front) gaugeLocked() {
	if m := f.cfg.Metrics; m != nil {
		m.deliveriesQueued.Set(float64(len(f.deliverQ)))
	}
}

// takeBatchLocked removes and returns up to maxDeliveryBatch reports.
func (f *Front) takeBatchLocked() []*controlplanev1.DeliveryReport {
	n := min(len(f.deliverQ), maxDeliveryBatch)
	batch := append([]*controlplanev1.DeliveryReport(nil), f.deliverQ[:n]...)
	f.deliverQ = append(f.deliverQ[:0], f.deliverQ[n:]...)
	for _, r := range batch {
		f.queuedBytes -= reportSize(r)
	}
	f.gaugeLocked()
	return batch
}

// deliveryRequest is the MarkDelivered of batch: its reports, and its
// delivered ids in the fields control planes before reports read.
func deliveryRequest(batch []*controlplanev1.DeliveryReport) *controlplanev1.MarkDeliveredRequest {
	req := &controlplanev1.MarkDeliveredRequest{Reports: batch}
	for _, r := range batch {
		if r.GetDelivery() != recordv1.Delivery_DELIVERY_DELIVERED {
			continue
		}
		if req.ExecutionId == "" {
			req.ExecutionId = r.GetExecutionId()
		} else {
			req.MoreExecutionIds = append(req.MoreExecutionIds, r.GetExecutionId())
		}
	}
	return req
}

// sendDeliveries sends the queued reports until none is left: one
// MarkDelivered at a time, each with every report queued while the
// previous one was in flight (one RPC and one group commit for many
// answers under load, one per answer when calls come one by one).
func (f *Front) sendDeliveries() {
	defer f.bg.Done()
	failures := 0 // consecutive failures to reach the control plane
	for {
		f.deliverMu.Lock()
		if len(f.deliverQ) == 0 {
			if f.onDisk {
				f.persistLocked() // all taken: the file goes
			}
			f.delivering = false
			f.deliverMu.Unlock()
			return
		}
		batch := f.takeBatchLocked()
		f.deliverMu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := f.cfg.ControlPlane.MarkDelivered(ctx, deliveryRequest(batch))
		cancel()
		switch {
		case err == nil:
			failures = 0
			f.log.Trace("delivery reports recorded", "first_execution_id", batch[0].GetExecutionId(), "reports", len(batch))
			continue
		case deliveryRetryable(err):
			// The control plane is away (restarting, failing over, or this
			// front is cut off from it): the reports are true, so they are
			// kept, on disk too with a state dir, and sent again once it is
			// back, the whole batch (a report recorded twice is recorded
			// once).
			failures++
			f.deliverMu.Lock()
			f.queueLocked(batch, true)
			kept := len(f.deliverQ)
			f.persistLocked()
			f.deliverMu.Unlock()
			f.log.Warn("cannot record delivery reports now; keeping them to send again", "first_execution_id", batch[0].GetExecutionId(),
				"reports", kept, "failures", failures, "on_disk", f.queue != nil, "error", err)
			if deliveryBackoff.Wait(f.closingCtx, failures, nil) {
				continue
			}
			f.stopSending()
			return
		default:
			// Refused for good (an execution this control plane does not
			// know, or no longer completed): the control plane records
			// every report it can and answers the first failure; the rest
			// read "delivery not recorded" (an attach returns the result).
			f.log.Warn("could not record every delivery report of a batch; those not recorded read 'delivery not recorded'",
				"first_execution_id", batch[0].GetExecutionId(), "reports", len(batch), "error", err)
		}
		select {
		case <-f.closing:
			f.stopSending()
			return
		default:
		}
	}
}

// stopSending ends the sender when the front closes: one failed call at a
// time would hold Close for every batch left, so what is left is kept on
// disk (with a state dir, sent when the front starts again) or dropped.
func (f *Front) stopSending() {
	f.deliverMu.Lock()
	defer f.deliverMu.Unlock()
	f.delivering = false
	left := len(f.deliverQ)
	if left == 0 {
		return
	}
	if f.queue != nil {
		if f.persistLocked() {
			f.log.Warn("front closing with the control plane away: delivery reports kept on disk, sent when the front starts again", "reports", left, "state_dir", f.cfg.StateDir)
			return
		}
	}
	f.deliverQ, f.queuedBytes = nil, 0
	f.gaugeLocked()
	f.log.Warn("front closing with the control plane away: delivery reports dropped; those executions will read 'delivery not recorded' (give the front a --state-dir to keep them)", "reports", left)
}

// deliveryBackoff spaces the re-sends of delivery reports while the control
// plane cannot be reached.
var deliveryBackoff = backoff.Policy{Min: 250 * time.Millisecond, Max: 10 * time.Second, Jitter: true}

// deliveryRetryable reports whether a failed MarkDelivered may succeed when
// sent again: the control plane was not reached, or could not answer.
func deliveryRetryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Canceled:
		return true
	}
	return false
}

// Close stops the front's background work and waits for it: delivery
// reports the control plane takes now are sent; with the control plane
// away they are kept on disk (Config.StateDir) or dropped.
func (f *Front) Close() error {
	f.closeOnce.Do(func() { f.late.close(); close(f.closing); f.cancelClosing() })
	f.bg.Wait()
	f.deliverMu.Lock()
	defer f.deliverMu.Unlock()
	if len(f.deliverQ) > 0 && f.queue != nil {
		f.persistLocked() // reported after the sender stopped
	}
	if f.queue != nil {
		f.queue.close()
		f.queue = nil
	}
	return nil
}
