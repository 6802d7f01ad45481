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

// Policy is the decision order.
type Policy struct {
	Vault VaultStatus
}

var _ engine.Authorizer = (*Policy)(nil)

// Authorize returns the verdict for a new execution.
func (p *Policy) Authorize(_ context.Context, _ *recordv1.Execution, tool *tools.Tool) engine.Decision {
	if p.Vault != nil && p.Vault.Status().Locked {
		return engine.Decision{Reject: true, Reason: ReasonVaultLocked + ": the vault is locked; an operator must run `latch vault unlock` before any action runs", Transient: true}
	}
	if tool.Approval == tools.ApprovalEveryCall {
		return engine.Decision{NeedApproval: true, Reason: "the tool requires approval for every call (latch approvals approve ID)"}
	}
	return engine.Decision{}
}
