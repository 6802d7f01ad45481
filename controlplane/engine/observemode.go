package engine

import (
	"fmt"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Observe mode
//
// A tool in observe mode (tools.ModeObserve) is forwarded as it comes: every
// call becomes a new execution with its own ID, fingerprint and journal
// records, and is dispatched at once. What enforcement would have done is
// not a second copy of the rules: Submit runs the same decision order
// (decide) and the same matching rule (matches, attachResult) it runs for an
// enforced tool, and records their verdicts in the execution's Observation
// instead of applying them:
//
//   - a prior execution the call would have attached to (its ID, its state
//     then, the disposition an enforced retry would have been told);
//   - a wait for a person (approval or session authorization) the decision
//     order would have imposed: the call is authorized regardless;
//   - an unknown outcome (a dispatch cut after the request may have left):
//     the execution rests at outcome_unknown with WouldHoldUncertain set,
//     and recovery leaves it alone; the target never saw an execution ID
//     to be asked about, and re-sending is what observe mode must not do.
//
// A rejection is not lifted (a denied actor, a revoked session, a locked
// vault still refuse the call): observe mode relaxes the replay contract,
// not authorization. Channels send only what the tool's request says (no
// idempotency key, no execution ID in _meta or an idempotency argument;
// Call.Observed), so a team sees the duplicates its target really gets.

// observation is what enforcement would have decided for a new call of an
// observed tool: decided, code and reason are the decision order's verdict.
// It returns the verdict to apply (authorized unless rejected) and the
// Observation to record (its prior fields are filled in the atomic step by
// observePrior).
func observation(tool *tools.Tool, decided recordv1.State, code recordv1.ReasonCode, reason string) (recordv1.State, recordv1.ReasonCode, string, *recordv1.Observation) {
	obs := &recordv1.Observation{Replay: string(tool.Replay)}
	if decided == recordv1.State_STATE_AWAITING_APPROVAL {
		obs.WouldNeedApproval, obs.WouldWaitReason = true, reason
		return recordv1.State_STATE_AUTHORIZED, recordv1.ReasonCode_REASON_CODE_OTHER, "", obs
	}
	return decided, code, reason, obs
}

// observePrior records the prior execution an enforced call would have
// attached to (matches held for it).
func observePrior(obs *recordv1.Observation, prior *recordv1.Execution) {
	obs.PriorExecutionId = prior.GetId()
	obs.PriorState = prior.GetState()
	obs.PriorAcceptedAt = prior.GetAcceptedAt()
	obs.WouldDisposition = attachResult(prior).Disposition
}

// observedReason is the reason of an observed execution's authorized
// transition: that it was forwarded, and what enforcement would have done.
func observedReason(obs *recordv1.Observation) string {
	r := "observe mode: forwarded as it came"
	if id := obs.GetPriorExecutionId(); id != "" {
		r += fmt.Sprintf("; enforcement would have attached it to %s (%s) and not sent it again", id, lifecycle.Name(obs.GetPriorState()))
	}
	if obs.GetWouldNeedApproval() {
		r += "; enforcement would have waited: " + obs.GetWouldWaitReason()
	}
	return r
}

// Observed reports whether the call is of an execution in observe mode: the
// channel then sends only what the tool's request says, adding no
// idempotency key and no execution ID the target did not see before Latch.
func (c Call) Observed() bool { return c.Execution.GetObservation() != nil }
