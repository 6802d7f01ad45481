package engine

import (
	"context"
	"fmt"

	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// decide applies the decision order to a new execution: the state it moves
// to after accepted (authorized, awaiting_approval or rejected) and why.
func (e *Engine) decide(ctx context.Context, x *recordv1.Execution, tool *tools.Tool) (st recordv1.State, reason string, transient bool) {
	d := Decision{NeedApproval: tool.Approval == tools.ApprovalEveryCall}
	if e.cfg.Authorizer != nil {
		d = e.cfg.Authorizer.Authorize(ctx, x, tool)
	}
	if d.Reject {
		return recordv1.State_STATE_REJECTED, orDefault(d.Reason, "rejected by policy"), d.Transient
	}
	if reject, wait, why := e.sessionVerdict(x.GetActor(), x.GetSessionId(), tool.Approval == tools.ApprovalSession); reject {
		return recordv1.State_STATE_REJECTED, why, false
	} else if wait {
		return recordv1.State_STATE_AWAITING_APPROVAL, why, false
	}
	switch {
	case d.NeedApproval:
		return recordv1.State_STATE_AWAITING_APPROVAL, orDefault(d.Reason, "the tool requires approval for every call"), false
	}
	return recordv1.State_STATE_AUTHORIZED, "authorized: " + orDefault(d.Reason, "no approval required by the tool contract"), false
}

// Approve moves an execution awaiting approval to authorized and dispatches it.
func (e *Engine) Approve(ctx context.Context, id, operator, reason string) (*recordv1.Execution, error) {
	x, err := e.transition(ctx, id, recordv1.State_STATE_AUTHORIZED, "approval", "approved by "+operator+": "+reason, requireState(recordv1.State_STATE_AWAITING_APPROVAL))
	if err != nil {
		return nil, err
	}
	e.startDispatch(id)
	return x, nil
}

// Deny rejects an execution awaiting approval.
func (e *Engine) Deny(ctx context.Context, id, operator, reason string) (*recordv1.Execution, error) {
	defer e.dropSecrets(id)
	return e.transition(ctx, id, recordv1.State_STATE_REJECTED, "approval", "denied by "+operator+": "+reason, requireState(recordv1.State_STATE_AWAITING_APPROVAL))
}

// expireApprovals rejects executions that awaited approval longer than
// ApprovalTTL.
func (e *Engine) expireApprovals(ctx context.Context) {
	now := e.cfg.Clock()
	e.rejectPending(ctx, func(x *recordv1.Execution) bool {
		return now.Sub(x.GetAcceptedAt().AsTime()) >= e.cfg.ApprovalTTL
	}, fmt.Sprintf("approval expired: nobody approved it within %s; call the tool again to request a new approval", e.cfg.ApprovalTTL))
}

// VoidApprovals rejects every execution awaiting approval, because what the
// approvals were asked under changed (the vault was locked or unlocked).
func (e *Engine) VoidApprovals(ctx context.Context, why string) {
	e.rejectPending(ctx, func(*recordv1.Execution) bool { return true }, "approval voided: "+why+"; call the tool again to request a new approval")
}

// rejectPending rejects the executions awaiting approval that match, and
// takes them out of the fingerprint index: the cause is gone with them, so a
// retry asks for a fresh approval instead of getting this rejection.
func (e *Engine) rejectPending(ctx context.Context, match func(*recordv1.Execution) bool, reason string) {
	xs, err := e.st.List(store.Filter{State: recordv1.State_STATE_AWAITING_APPROVAL, Limit: 1000})
	if err != nil {
		e.log.Error("approval scan failed", "error", err)
		return
	}
	for _, x := range xs {
		if !match(x) {
			continue
		}
		now := e.cfg.Clock()
		err := e.st.Update(ctx, func(tx *store.Tx) error {
			cur, err := tx.Execution(x.GetId())
			if err != nil {
				return err
			}
			if err := requireState(recordv1.State_STATE_AWAITING_APPROVAL)(cur); err != nil {
				return err
			}
			if err := e.step(tx, cur, recordv1.State_STATE_REJECTED, now, "approval", reason, false); err != nil {
				return err
			}
			tx.Unindex(cur.GetFingerprint(), cur.GetId())
			return nil
		})
		if err == nil {
			e.dropSecrets(x.GetId())
		} else {
			e.log.Debug("pending approval not rejected", "execution_id", x.GetId(), "error", err)
		}
	}
}
