package policy

import (
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

type fakeVault struct{ locked bool }

func (f fakeVault) Status() vault.Status { return vault.Status{Locked: f.locked} }

type actors map[string]bool

func (a actors) Known(name string) bool { return a[name] }

func TestDecisionOrder(t *testing.T) {
	every := &tools.Tool{Approval: tools.ApprovalEveryCall}
	none := &tools.Tool{Approval: tools.ApprovalNone}
	tests := []struct {
		name     string
		locked   bool
		actor    string
		tool     *tools.Tool
		reject   bool
		approval bool
		code     recordv1.ReasonCode
	}{
		{"locked vault first, even for an unknown actor", true, "mallory", every, true, false, recordv1.ReasonCode_REASON_CODE_VAULT_LOCKED},
		{"unknown actor", false, "mallory", none, true, false, recordv1.ReasonCode_REASON_CODE_UNKNOWN_ACTOR},
		// every_call is the engine's approval rule, after the session rule
		// (engine.TestDecisionOrderTable): the policy passes it.
		{"every_call is not the policy's", false, "alice", every, false, false, 0},
		{"nothing required", false, "alice", none, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Policy{Vault: fakeVault{tt.locked}, Actors: actors{"alice": true}}
			d := first(t, p.Rules(), &recordv1.Execution{Actor: tt.actor}, tt.tool)
			reasonHas := lifecycle.ReasonName(tt.code)
			if d.Reject != tt.reject || d.NeedApproval != tt.approval || d.Code != tt.code || !strings.Contains(d.Reason, reasonHas) {
				t.Errorf("Authorize = %+v, want reject=%v approval=%v code %v, reason containing %q", d, tt.reject, tt.approval, tt.code, reasonHas)
			}
			if d.Reject && !d.Transient {
				t.Errorf("a %s rejection must be transient: it passes when the cause is fixed", reasonHas)
			}
		})
	}
}

// first runs the rules in order, as the engine does, and returns the first
// verdict that does not pass.
func first(t *testing.T, rules []engine.Rule, x *recordv1.Execution, tool *tools.Tool) engine.Decision {
	t.Helper()
	if len(rules) != 2 || rules[0].Name != RuleVault || rules[1].Name != RuleActor {
		t.Fatalf("Rules() = %v, want the vault rule then the actor rule", rules)
	}
	for _, r := range rules {
		if d := r.Decide(t.Context(), x, tool); d.Reject || d.NeedApproval {
			return d
		}
	}
	return engine.Decision{}
}
