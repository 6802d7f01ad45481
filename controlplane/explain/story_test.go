package explain

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestTellDerivesTheSteps: the story of an execution that was sent, had
// its outcome become unknown, was asked by recovery and re-sent, names
// each send with what came of it, each query with its verdict, the calls
// that reached Latch, every record, the decision evidence (with the key
// only when the contract is known) and what can be done: resolve it.
func TestTellDerivesTheSteps(t *testing.T) {
	now := timestamppb.Now()
	ev := &recordv1.Evidence{Transport: "streamable-http", ClientName: "agent", PeerAddress: "10.0.0.1:5000", JsonrpcId: "1"}
	x := &recordv1.Execution{Id: "act_1", Tool: "deploy", Actor: "a", Target: "ci", State: recordv1.State_STATE_OUTCOME_UNKNOWN,
		DispatchedAt: now, LastSentAt: now, Attempts: 2, Reason: "timeout", Evidence: ev}
	hist := []*recordv1.JournalEntry{
		{Index: 1, Time: now, To: recordv1.State_STATE_ACCEPTED, Kind: "transition", Execution: &recordv1.Execution{Evidence: ev}},
		{Index: 2, Time: now, From: recordv1.State_STATE_ACCEPTED, To: recordv1.State_STATE_DISPATCHED, Kind: "transition"},
		{Index: 3, Time: now, From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Kind: "transition", Reason: "timeout"},
		{Index: 4, Time: now, Kind: "attach", From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Evidence: ev, Reason: "retry"},
		{Index: 5, Time: now, Kind: "recovery_query", From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Reason: "absent, not evidence"},
		{Index: 6, Time: now, Kind: "recovery_replay", From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Reason: "re-sent"},
	}
	r := Tell(x, hist, Contract{Known: true, Key: "act_1", Carriers: "Idempotency-Key header"})
	var sends []string
	for _, s := range r.Sends {
		sends = append(sends, s.Kind+"|"+s.AnswerState+"|"+s.Key)
	}
	if diff := cmp.Diff([]string{"dispatch|outcome_unknown|act_1", "re-send by recovery||act_1"}, sends); diff != "" {
		t.Errorf("Tell sends (kind|answer state|key) (-want +got):\n%s", diff)
	}
	if len(r.Queries) != 1 || r.Queries[0].Evidence || !strings.HasPrefix(r.Queries[0].Verdict, "not evidence") {
		t.Errorf("Tell queries = %+v, want one that is not evidence", r.Queries)
	}
	if len(r.Calls) != 2 || r.Calls[0].Call != "first call" || r.Calls[1].Call != "call 2 (attached)" || r.Calls[1].JSONRPC != "1" {
		t.Errorf("Tell calls = %+v, want the first call and one attached", r.Calls)
	}
	if len(r.Steps) != len(hist) || r.Steps[4].Step != "recovery_query (outcome_unknown)" || r.Steps[1].Step != "dispatched" {
		t.Errorf("Tell steps = %+v, want one per record, named", r.Steps)
	}
	if !strings.Contains(r.Sent, "carrying act_1 as its key (Idempotency-Key header)") || !strings.Contains(r.LastQuery, "Last recovery query at") {
		t.Errorf("Tell evidence = %q / %q", r.Sent, r.LastQuery)
	}
	// Each source its own sentence: the target's answer never runs on
	// into the recovery query's.
	if strings.Contains(r.Answered, "recovery query") || !strings.HasSuffix(r.Answered, ".") || !strings.HasSuffix(r.LastQuery, ".") {
		t.Errorf("Tell answered = %q, last query = %q: want two sentences, each ending in a full stop", r.Answered, r.LastQuery)
	}
	if !strings.Contains(r.Retries, "1 retry of the agent attached") || !strings.Contains(r.Retries, "recovery's") {
		t.Errorf("Tell retries = %q, want the attached retry and that the re-send was recovery's", r.Retries)
	}
	if !r.Can(DoResolve) || r.Can(DoApprove) || r.Can(DoCancel) {
		t.Errorf("Tell next = %+v, want resolve alone", r.Next)
	}
	if unknown := Tell(x, hist, Contract{}); strings.Contains(unknown.Sent, "key") || unknown.Sends[0].Key != "" {
		t.Errorf("Tell without the contract says a key: %q, %+v", unknown.Sent, unknown.Sends[0])
	}
}

// TestTellRetriesNothingResent: retries that attached to an execution
// sent once are said to have re-sent nothing.
func TestTellRetriesNothingResent(t *testing.T) {
	now := timestamppb.Now()
	x := &recordv1.Execution{Id: "act_1", State: recordv1.State_STATE_DELIVERED, DispatchedAt: now, LastSentAt: now, Attempts: 1}
	hist := []*recordv1.JournalEntry{
		{Index: 1, Time: now, To: recordv1.State_STATE_ACCEPTED, Kind: "transition"},
		{Index: 2, Time: now, From: recordv1.State_STATE_ACCEPTED, To: recordv1.State_STATE_DISPATCHED, Kind: "transition"},
		{Index: 3, Time: now, Kind: "attach", From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_DISPATCHED},
		{Index: 4, Time: now, Kind: "attach", From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_DISPATCHED},
		{Index: 5, Time: now, From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_COMPLETED, Kind: "transition", Reason: "200"},
	}
	r := Tell(x, hist, Contract{})
	if want := "2 retries of the agent attached to this execution; nothing was re-sent"; !strings.HasPrefix(r.Retries, want) {
		t.Errorf("Tell retries = %q, want it to start %q", r.Retries, want)
	}
	if r.Sends[0].AnswerTime == "" || r.Steps[2].Kind != "attach" || r.Steps[4].State != "completed" {
		t.Errorf("Tell sends %+v / steps %+v: want the answer's time and each step's kind and state", r.Sends, r.Steps)
	}
	if none := Tell(x, hist[:2], Contract{}); none.Retries != "" {
		t.Errorf("Tell without attached calls: retries = %q, want none", none.Retries)
	}
}

// TestTellNext: what can be done follows the state: an approval card
// (waiting for its session: authorize it too) is approved or denied, and
// cancelled before dispatch; a settled execution offers nothing.
func TestTellNext(t *testing.T) {
	tests := []struct {
		name string
		x    *recordv1.Execution
		want []string
	}{
		{"approval card", &recordv1.Execution{Id: "act_1", State: recordv1.State_STATE_AWAITING_APPROVAL, Reason: "rule"},
			[]string{DoApprove, DoDeny, DoCancel}},
		{"waits for its session", &recordv1.Execution{Id: "act_2", State: recordv1.State_STATE_AWAITING_APPROVAL, SessionId: "ses_1", ReasonCode: recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION, Reason: "session_authorization: new session"},
			[]string{DoAuthorizeSession, DoApprove, DoDeny, DoCancel}},
		{"waits for its session (a record written before reason codes)", &recordv1.Execution{Id: "act_2", State: recordv1.State_STATE_AWAITING_APPROVAL, SessionId: "ses_1", Reason: "session_authorization: new session"},
			[]string{DoAuthorizeSession, DoApprove, DoDeny, DoCancel}},
		{"the reason's text alone decides nothing", &recordv1.Execution{Id: "act_5", State: recordv1.State_STATE_AWAITING_APPROVAL, SessionId: "ses_1", ReasonCode: recordv1.ReasonCode_REASON_CODE_OTHER, Reason: "session_authorization: looks like one"},
			[]string{DoApprove, DoDeny, DoCancel}},
		{"needs review", &recordv1.Execution{Id: "act_3", State: recordv1.State_STATE_NEEDS_REVIEW}, []string{DoResolve}},
		{"delivered", &recordv1.Execution{Id: "act_4", State: recordv1.State_STATE_DELIVERED}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, a := range Tell(tt.x, nil, Contract{}).Next {
				got = append(got, a.Do)
				if !strings.Contains(a.Says, tt.x.GetId()) && a.Do != DoCancel && a.Do != DoAuthorizeSession {
					t.Errorf("Tell(%s) action %s = %q, want it to name the execution", tt.name, a.Do, a.Says)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Tell(%s) next (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}
