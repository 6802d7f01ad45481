package engine

import (
	"context"
	"fmt"

	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Names of the engine's own rules of the decision order.
const (
	RuleSession  = "session"
	RuleApproval = "approval"
)

// decisionOrder is the one ordered list of docs/design §9: the Authorizer's rules
// (vault, then actor), then the session rule, then the tool's every_call
// approval rule. The first rule that does not pass decides.
func decisionOrder(a Authorizer, e *Engine) []Rule {
	var rules []Rule
	if a != nil {
		rules = append(rules, a.Rules()...)
	}
	return append(rules,
		Rule{Name: RuleSession, Decide: e.sessionRule},
		Rule{Name: RuleApproval, Decide: approvalRule},
	)
}

// approvalRule is the tool contract's approval: every_call waits for an
// operator, whatever else allowed the execution.
func approvalRule(_ context.Context, x *recordv1.Execution, tool *tools.Tool) Decision {
	if tool.Approval != tools.ApprovalEveryCall {
		return Decision{}
	}
	id := x.GetId()
	if id == "" { // a new execution: its ID is minted with its first record
		id = "ID"
	}
	return Decision{NeedApproval: true, Reason: "the tool requires approval for every call (latch approvals approve " + id + ")"}
}

// verdict runs rules in order and returns the first that does not pass, or
// ("", zero Decision) when all pass.
func verdict(ctx context.Context, rules []Rule, x *recordv1.Execution, tool *tools.Tool) (string, Decision) {
	for _, r := range rules {
		if d := r.Decide(ctx, x, tool); d.Reject || d.NeedApproval {
			return r.Name, d
		}
	}
	return "", Decision{}
}

// code is what d's reason is about: Code, or REASON_CODE_OTHER.
func (d Decision) code() recordv1.ReasonCode {
	if d.Code == recordv1.ReasonCode_REASON_CODE_UNSPECIFIED {
		return recordv1.ReasonCode_REASON_CODE_OTHER
	}
	return d.Code
}

// decide applies the decision order to a new execution: the state it moves
// to after accepted (authorized, awaiting_approval or rejected) and why. The
// reason is journaled with that transition.
func (e *Engine) decide(ctx context.Context, x *recordv1.Execution, tool *tools.Tool) (st recordv1.State, code recordv1.ReasonCode, reason string, transient bool) {
	rule, d := verdict(ctx, e.rules, x, tool)
	e.log.Trace("decided", "tool", tool.Name, "actor", x.GetActor(), "rule", rule, "reject", d.Reject, "approval", d.NeedApproval)
	code = d.code()
	switch {
	case d.Reject:
		return recordv1.State_STATE_REJECTED, code, orDefault(d.Reason, "rejected by the "+rule+" rule"), d.Transient
	case d.NeedApproval:
		return recordv1.State_STATE_AWAITING_APPROVAL, code, orDefault(d.Reason, "the "+rule+" rule requires approval"), false
	}
	return recordv1.State_STATE_AUTHORIZED, recordv1.ReasonCode_REASON_CODE_OTHER, "authorized: no approval required by the tool contract", false
}

// rulesAfter is the part of the decision order after the named rule: what is
// still to decide once that rule's condition was met (a session authorized).
func (e *Engine) rulesAfter(name string) []Rule {
	for i, r := range e.rules {
		if r.Name == name {
			return e.rules[i+1:]
		}
	}
	return nil
}

// Approve moves an execution awaiting approval to authorized and dispatches it.
func (e *Engine) Approve(ctx context.Context, id, operator, reason string) (*recordv1.Execution, error) {
	x, err := e.transition(ctx, id, recordv1.State_STATE_AUTHORIZED, recordv1.EntryKind_ENTRY_KIND_APPROVAL, "approved by "+operator+": "+reason, requireState(recordv1.State_STATE_AWAITING_APPROVAL))
	if err != nil {
		return nil, err
	}
	e.startDispatch(id)
	return x, nil
}

// Deny rejects an execution awaiting approval.
func (e *Engine) Deny(ctx context.Context, id, operator, reason string) (*recordv1.Execution, error) {
	defer e.dropSecrets(id)
	return e.transition(ctx, id, recordv1.State_STATE_REJECTED, recordv1.EntryKind_ENTRY_KIND_APPROVAL, "denied by "+operator+": "+reason, requireState(recordv1.State_STATE_AWAITING_APPROVAL))
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
			if err := e.step(tx, cur, recordv1.State_STATE_REJECTED, now, recordv1.EntryKind_ENTRY_KIND_APPROVAL, reason, false); err != nil {
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
