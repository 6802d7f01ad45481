// Package policy decides whether a new execution may proceed, in the fixed
// order of DESIGN §9: a locked vault denies everything; then the tool's
// approval contract. It implements engine.Authorizer.
package policy

import (
	"context"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/vault"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// ReasonVaultLocked prefixes the reason of executions refused because the
// vault is locked.
const ReasonVaultLocked = "vault_locked"

// VaultStatus reports whether the vault is locked. Implemented by *vault.Vault.
type VaultStatus interface {
	Status() vault.Status
}

// Actors tells whether an actor may act: it has a live token, or is
// configured (stdio actors, the dev actor).
type Actors interface {
	Known(actor string) bool
}

// ReasonUnknownActor prefixes the reason of executions refused because the
// actor is unknown or its tokens were revoked.
const ReasonUnknownActor = "unknown_actor"

// Policy is the decision order. The session rule and the tool's approval
// rule follow it in the engine.
type Policy struct {
	Vault VaultStatus
	// Actors, when set, rejects actors it does not know.
	Actors Actors
}

var _ engine.Authorizer = (*Policy)(nil)

// Authorize returns the verdict for a new execution.
func (p *Policy) Authorize(_ context.Context, x *recordv1.Execution, tool *tools.Tool) engine.Decision {
	if p.Vault != nil && p.Vault.Status().Locked {
		return engine.Decision{Reject: true, Reason: ReasonVaultLocked + ": the vault is locked; an operator must run `latch vault unlock` before any action runs", Transient: true}
	}
	if p.Actors != nil && !p.Actors.Known(x.GetActor()) {
		return engine.Decision{Reject: true, Transient: true, Reason: ReasonUnknownActor + ": actor " + x.GetActor() + " has no live token (revoked or never created: latch token create)"}
	}
	if tool.Approval == tools.ApprovalEveryCall {
		return engine.Decision{NeedApproval: true, Reason: "the tool requires approval for every call (latch approvals approve ID)"}
	}
	return engine.Decision{}
}
