// Package policy holds the first rules of the decision order of docs/design §9:
// a locked vault rejects everything, then an actor the control plane does
// not know is rejected. The engine runs them before its own session rule
// and the tool's approval rule (engine.decisionOrder); *Policy implements
// engine.Authorizer by returning them in that order.
package policy

import (
	"context"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// VaultStatus reports whether the vault is locked. Implemented by *vault.Vault.
type VaultStatus interface {
	Status() vault.Status
}

// Actors tells whether an actor may act: it has a live token, or is
// configured (stdio actors, the dev actor).
type Actors interface {
	Known(actor string) bool
}

// Names of the policy's rules in the decision order.
const (
	RuleVault = "vault"
	RuleActor = "actor"
)

// Policy is the start of the decision order. The session rule and the
// tool's approval rule follow it in the engine.
type Policy struct {
	Vault VaultStatus
	// Actors, when set, rejects actors it does not know.
	Actors Actors
}

var _ engine.Authorizer = (*Policy)(nil)

// Rules returns the vault rule, then the actor rule.
func (p *Policy) Rules() []engine.Rule {
	return []engine.Rule{
		{Name: RuleVault, Decide: p.vault},
		{Name: RuleActor, Decide: p.actor},
	}
}

func (p *Policy) vault(context.Context, *recordv1.Execution, *tools.Tool) engine.Decision {
	if p.Vault != nil && p.Vault.Status().Locked {
		const code = recordv1.ReasonCode_REASON_CODE_VAULT_LOCKED
		return engine.Decision{Reject: true, Code: code, Reason: lifecycle.Reason(code, "the vault is locked; an operator must run `latch vault unlock` before any action runs"), Transient: true}
	}
	return engine.Decision{}
}

func (p *Policy) actor(_ context.Context, x *recordv1.Execution, _ *tools.Tool) engine.Decision {
	if p.Actors != nil && !p.Actors.Known(x.GetActor()) {
		const code = recordv1.ReasonCode_REASON_CODE_UNKNOWN_ACTOR
		return engine.Decision{Reject: true, Transient: true, Code: code, Reason: lifecycle.Reason(code, "actor "+x.GetActor()+" has no live token (revoked or never created: latch token create)")}
	}
	return engine.Decision{}
}
