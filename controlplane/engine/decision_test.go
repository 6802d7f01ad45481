package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// gates is a stand-in for *policy.Policy: a vault rule and an actor rule,
// switched by the test.
type gates struct {
	locked  bool
	unknown string
}

func (g *gates) Rules() []Rule {
	return []Rule{
		{Name: "vault", Decide: func(context.Context, *recordv1.Execution, *tools.Tool) Decision {
			if g.locked {
				return Decision{Reject: true, Transient: true, Code: recordv1.ReasonCode_REASON_CODE_VAULT_LOCKED, Reason: "vault_locked: test"}
			}
			return Decision{}
		}},
		{Name: "actor", Decide: func(_ context.Context, x *recordv1.Execution, _ *tools.Tool) Decision {
			if x.GetActor() == g.unknown {
				return Decision{Reject: true, Transient: true, Code: recordv1.ReasonCode_REASON_CODE_UNKNOWN_ACTOR, Reason: "unknown_actor: " + g.unknown}
			}
			return Decision{}
		}},
	}
}

// TestDecisionOrderTable walks the order vault → actor → session →
// every_call approval: each case turns on every condition from a rule on,
// and the earliest rule that does not pass must decide. The verdict's reason
// is what Submit journals with the state it decides.
func TestDecisionOrderTable(t *testing.T) {
	type want struct {
		Rule      string
		State     recordv1.State
		Code      recordv1.ReasonCode
		Reason    string
		Transient bool
	}
	tests := []struct {
		name                  string
		locked, unknownActor  bool
		sessionNew, everyCall bool
		want                  want
	}{
		{"vault first, over everything", true, true, true, true,
			want{"vault", recordv1.State_STATE_REJECTED, recordv1.ReasonCode_REASON_CODE_VAULT_LOCKED, "vault_locked", true}},
		{"then the actor", false, true, true, true,
			want{"actor", recordv1.State_STATE_REJECTED, recordv1.ReasonCode_REASON_CODE_UNKNOWN_ACTOR, "unknown_actor", true}},
		{"then the session", false, false, true, true,
			want{RuleSession, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION, "session_authorization", false}},
		{"then every_call approval", false, false, false, true,
			want{RuleApproval, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.ReasonCode_REASON_CODE_OTHER, "the tool requires approval for every call", false}},
		{"nothing required", false, false, false, false,
			want{"", recordv1.State_STATE_AUTHORIZED, recordv1.ReasonCode_REASON_CODE_OTHER, "authorized: no approval required by the tool contract", false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &gates{locked: tt.locked}
			if tt.unknownActor {
				g.unknown = "alice"
			}
			h := newHarnessWith(t, "", nil, func(c *Config) {
				c.Authorizer = g
				c.Sessions = SessionConfig{Required: tt.sessionNew}
			})
			if got, want := ruleNames(h.e.rules), []string{"vault", "actor", RuleSession, RuleApproval}; !cmp.Equal(got, want) {
				t.Fatalf("decision order = %v, want %v", got, want)
			}
			tool := h.e.cfg.Catalog.Tools["deploy"]
			if tt.everyCall {
				tool = h.e.cfg.Catalog.Tools["rotate"]
			}
			x := &recordv1.Execution{Actor: "alice", Tool: tool.Name, SessionId: "ses_new"}
			rule, _ := verdict(t.Context(), h.e.rules, x, tool)
			st, code, reason, transient := h.e.decide(t.Context(), x, tool)
			got := want{rule, st, code, reason, transient}
			if !strings.HasPrefix(got.Reason, tt.want.Reason) {
				t.Errorf("decide reason = %q, want it to start with %q", got.Reason, tt.want.Reason)
			}
			got.Reason = tt.want.Reason
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
			// Submit journals the same verdict with the state it decides.
			args := `{"service":"a","version":"1"}`
			if tt.everyCall {
				args = `{"name":"db","new_secret":"0123456789abcdef"}`
			}
			r, err := h.e.Submit(t.Context(), SubmitInput{Actor: "alice", Tool: tool.Name, Arguments: json.RawMessage(args)})
			if err != nil {
				t.Fatal(err)
			}
			j, err := h.st.History(r.Execution.GetId())
			if err != nil {
				t.Fatal(err)
			}
			if !journaled(j, tt.want.State, tt.want.Code, tt.want.Reason) {
				t.Errorf("journal of %s has no %s record with code %v and a reason starting %q: %v", r.Execution.GetId(), tt.want.State, tt.want.Code, tt.want.Reason, j)
			}
			if got := r.Execution.GetReasonCode(); got != tt.want.Code {
				t.Errorf("Submit: execution reason_code = %v, want %v", got, tt.want.Code)
			}
		})
	}
}

func ruleNames(rs []Rule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func journaled(j []*recordv1.JournalEntry, st recordv1.State, code recordv1.ReasonCode, reasonPrefix string) bool {
	for _, e := range j {
		if e.GetTo() == st && e.GetReasonCode() == code && strings.HasPrefix(e.GetReason(), reasonPrefix) {
			return true
		}
	}
	return false
}

// syncBuffer is a log sink safe for the engine's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPendingIsLoggedWithTheCommand: a new session waiting for
// authorization and an execution waiting for approval are logged at info
// with the exact command that lets them proceed.
func TestPendingIsLoggedWithTheCommand(t *testing.T) {
	var logs syncBuffer
	h := newHarnessWith(t, "", nil, func(c *Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
		c.Sessions = SessionConfig{Required: true, Trusted: func(a string) bool { return a == "robot" }, CommandArgs: "--data /srv/latch"}
	})
	ev := &recordv1.Evidence{McpSessionId: "mcp-1"}
	s, err := h.e.Submit(t.Context(), SubmitInput{Actor: "alice", Tool: "deploy", Arguments: json.RawMessage(`{"service":"a","version":"1"}`), Evidence: ev})
	if err != nil {
		t.Fatal(err)
	}
	a, err := h.e.Submit(t.Context(), SubmitInput{Actor: "robot", Tool: "rotate", Arguments: json.RawMessage(`{"name":"db","new_secret":"hunter2hunter2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[INFO]  engine: agent session awaits authorization: execution_id=" + s.Execution.GetId(),
		`run="latch session authorize ` + s.Execution.GetSessionId() + ` --data /srv/latch"`,
		"[INFO]  engine: execution awaits approval: execution_id=" + a.Execution.GetId(),
		`run="latch approvals approve ` + a.Execution.GetId() + ` --data /srv/latch"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Errorf("log holds a secret argument:\n%s", logs.String())
	}
}
