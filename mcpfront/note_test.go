package mcpfront

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/errinfo"
	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// TestNotExecutedNoteRestsOnEvidence: the model is told a retry is safe only
// with the evidence that made the execution not_executed, never the bare
// claim that nothing reached the target.
func TestNotExecutedNoteRestsOnEvidence(t *testing.T) {
	reason := "the target has no record of it: status endpoint answered 404 (absent); asked after the settle point"
	note, isError := noteFor(&recordv1.Execution{Id: "act_1", State: recordv1.State_STATE_NOT_EXECUTED, Reason: reason}, dispNew, "", nil, false)
	if strings.Contains(note, "nothing reached the target") {
		t.Errorf("noteFor(not_executed) = %q, claims nothing reached the target", note)
	}
	if !strings.Contains(note, reason) || !strings.Contains(note, "evidence") || !isError {
		t.Errorf("noteFor(not_executed) = %q, %v; want the evidence (%q) and isError", note, isError, reason)
	}
}

// TestNoteTableCoversEverything walks state × outcome × disposition × replay
// class × channel: every combination has a row, no row is shadowed by an
// earlier one, and no note says something another axis contradicts.
func TestNoteTableCoversEverything(t *testing.T) {
	var states []recordv1.State
	for v := range recordv1.State_name {
		if s := recordv1.State(v); s != recordv1.State_STATE_UNSPECIFIED {
			states = append(states, s)
		}
	}
	used := make(map[int]bool)
	replays := []tools.Replay{tools.ReplayReadOnly, tools.ReplayIdempotencyKey, tools.ReplayStatusQuery, tools.ReplayReview}
	seven := int32(7)
	answers := map[string]*ResultView{"status": {Status: 7}, "exit": {ExitCode: &seven}, "signal": {Signal: "KILL"}, "none": nil,
		"tool": {kind: recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT}, "marker": {kind: recordv1.AnswerKind_ANSWER_KIND_MARKER}}
	for _, s := range states {
		outcomes := []recordv1.Outcome{recordv1.Outcome_OUTCOME_UNSPECIFIED}
		if lifecycle.Observed(s) {
			outcomes = []recordv1.Outcome{recordv1.Outcome_OUTCOME_SUCCEEDED, recordv1.Outcome_OUTCOME_FAILED_AT_TARGET}
		}
		for _, o := range outcomes {
			for _, d := range []noteDisp{dispNew, dispAttached} {
				for _, r := range replays {
					for an, v := range answers {
						name := fmt.Sprintf("%s/%s/disp%d/%s/%s", lifecycle.Name(s), o, d, r, an)
						e := &recordv1.Execution{Id: "act_X", State: s, Outcome: o, Replay: string(r), TargetStatus: 7, Reason: "why"}
						if v != nil {
							e.Answer = v.kind
						}
						for i, row := range noteTable {
							if _, ok := lookupNote(s, o, d, axisReplay(string(r)), axisAnswer(e, v)); ok && rowMatches(row, s, o, d, axisReplay(string(r)), axisAnswer(e, v)) {
								used[i] = true
								break
							}
						}
						if _, ok := lookupNote(s, o, d, axisReplay(string(r)), axisAnswer(e, v)); !ok {
							t.Errorf("%s: no row in noteTable", name)
							continue
						}
						note, isErr := noteFor(e, d, "2026-01-01T00:00:00Z", v, false)
						checkNote(t, name, e, d, v, note, isErr)
						// The same answer when the front pushes the outcome to
						// the session (late.go): every rule still holds, and an
						// unresolved execution's note says it will be pushed.
						pushed, pushedErr := noteFor(e, d, "2026-01-01T00:00:00Z", v, true)
						checkNote(t, name+"/pushed", e, d, v, pushed, pushedErr)
						if !resolved(s) {
							if !strings.Contains(pushed, "sends the outcome to this session when execution act_X resolves") {
								t.Errorf("%s/pushed: note %q does not say the outcome will be pushed", name, pushed)
							}
						} else if pushed != note {
							t.Errorf("%s/pushed: note %q differs from %q for a resolved execution, which nothing follows", name, pushed, note)
						}
					}
				}
			}
		}
	}
	for i, row := range noteTable {
		if !used[i] {
			t.Errorf("noteTable[%d] (%q) is never chosen: an earlier row shadows it", i, row.text)
		}
	}
}

func rowMatches(row noteRow, s recordv1.State, o recordv1.Outcome, d noteDisp, r noteReplay, c noteAnswer) bool {
	return stateIn(s, row.states) &&
		(row.outcome == recordv1.Outcome_OUTCOME_UNSPECIFIED || row.outcome == o) &&
		(row.disp == anyDisp || row.disp == d) &&
		(row.replay == anyReplay || row.replay == r) &&
		(row.answer == anyAnswer || row.answer == c)
}

// checkNote holds the rules no note may break.
func checkNote(t *testing.T, name string, e *recordv1.Execution, d noteDisp, v *ResultView, note string, isErr bool) {
	t.Helper()
	s := e.GetState()
	answer := axisAnswer(e, v)
	host := answer == answerProcess
	noStatus := answer == answerTool || answer == answerMarker
	readOnly := tools.Replay(e.GetReplay()) == tools.ReplayReadOnly
	failedAtTarget := lifecycle.Observed(s) && e.GetOutcome() == recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
	rule := func(ok bool, what string) {
		t.Helper()
		if !ok {
			t.Errorf("%s: note %q: %s", name, note, what)
		}
	}
	rule(!strings.ContainsAny(note, "{}"), "a placeholder is left")
	rule(strings.Contains(note, "act_X"), "does not name the execution")
	rule(!readOnly || !strings.Contains(note, "repeat_of"), "a read-only tool takes no repeat_of")
	rule(!readOnly || !strings.Contains(note, "re-sent"), "a read-only tool has nothing to re-send")
	rule(!strings.Contains(note, "answered with status") || !host, "a command does not answer with a status")
	rule(!strings.Contains(note, "exited with status") || host, "an HTTP target does not exit")
	rule(answer != answerTool || !lifecycle.Observed(s) || strings.Contains(note, "upstream tool"), "an upstream tool's answer is described as an upstream tool's")
	rule(answer != answerMarker || !lifecycle.Observed(s) || strings.Contains(note, "script's marker"), "a script marker's answer is described as a marker's")
	rule(!noStatus || !strings.Contains(note, "status 7"), "an answer without a status code names none")
	if lifecycle.Observed(s) {
		rule(noStatus || strings.Contains(note, "with status 7"), "an observed outcome names the status")
		rule(!strings.Contains(note, "still running") && !strings.Contains(note, "in flight") && !strings.Contains(note, "not yet known"), "an observed outcome is not still running")
	} else {
		rule(!strings.Contains(note, "completed"), "only an observed outcome completed")
	}
	if d == dispAttached && (lifecycle.Observed(s) || s == recordv1.State_STATE_DISPATCHED || s == recordv1.State_STATE_REJECTED) {
		rule(strings.Contains(note, "identical earlier call"), "an attached call says it got an earlier call's execution")
	}
	if d == dispNew {
		rule(!strings.Contains(note, "identical earlier call"), "a new call did not attach")
	}
	sentNothing := s == recordv1.State_STATE_REJECTED || s == recordv1.State_STATE_CANCELLED || s == recordv1.State_STATE_AWAITING_APPROVAL
	rule(sentNothing == (strings.Contains(note, "nothing was sent to the target") || strings.Contains(note, "nothing has been sent yet")), "says nothing was sent exactly when nothing was sent")
	wantErr := failedAtTarget || s == recordv1.State_STATE_NOT_EXECUTED || s == recordv1.State_STATE_REJECTED || s == recordv1.State_STATE_CANCELLED
	if isErr != wantErr {
		t.Errorf("%s: isError = %v, want %v", name, isErr, wantErr)
	}
	if lifecycle.Pending(s) || s == recordv1.State_STATE_OUTCOME_UNKNOWN || s == recordv1.State_STATE_NEEDS_REVIEW {
		rule(strings.Contains(note, "latch_execution_status") || s == recordv1.State_STATE_AWAITING_APPROVAL && strings.Contains(note, "same arguments"), "an open execution says how to follow it")
	}
}

// TestNoteExamples pins the notes of the cases users reported as wrong.
func TestNoteExamples(t *testing.T) {
	tests := []struct {
		name    string
		exec    *recordv1.Execution
		disp    noteDisp
		want    string
		wantNot []string
		wantErr bool
	}{
		{
			name: "attach to a completed execution",
			exec: &recordv1.Execution{Id: "act_1", State: recordv1.State_STATE_COMPLETED, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 201, Replay: "idempotency_key", Channel: "http"},
			disp: dispAttached,
			want: "This call attached to the execution of an identical earlier call; nothing was sent twice. Execution act_1 completed; the target answered with status 201, and this is its stored result. To repeat the action on purpose, call the tool with repeat_of=act_1.",
		},
		{
			name:    "read-only 404",
			exec:    &recordv1.Execution{Id: "act_2", State: recordv1.State_STATE_COMPLETED, Outcome: recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, TargetStatus: 404, Replay: "read_only", Channel: "http"},
			disp:    dispNew,
			want:    "execution act_2: the target answered with status 404, a failure. The tool is read-only, so nothing changed; fix the cause and call the tool again.",
			wantErr: true,
		},
		{
			name: "SSH command exit 0",
			exec: &recordv1.Execution{Id: "act_3", State: recordv1.State_STATE_COMPLETED, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 0, Replay: "status_query", Channel: "ssh"},
			disp: dispNew,
			want: "execution act_3 completed; the command exited with status 0.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The answer axis comes from the stored result: an exit code
			// for the command, a status for the HTTP targets.
			var v *ResultView
			if tt.exec.GetChannel() == "ssh" {
				code := tt.exec.GetTargetStatus()
				v = &ResultView{ExitCode: &code}
			} else {
				v = &ResultView{Status: tt.exec.GetTargetStatus()}
			}
			got, isErr := noteFor(tt.exec, tt.disp, "", v, false)
			if got != tt.want || isErr != tt.wantErr {
				t.Errorf("noteFor(%v) = %q, %v; want %q, %v", tt.exec, got, isErr, tt.want, tt.wantErr)
			}
		})
	}
}

// TestPushedNotes pins what the model reads when the outcome will be pushed
// and when it must ask, and the note of the notification itself.
func TestPushedNotes(t *testing.T) {
	exec := &recordv1.Execution{Id: "act_9", State: recordv1.State_STATE_DISPATCHED, Replay: "idempotency_key"}
	got, _ := noteFor(exec, dispNew, "2026-01-01T00:00:00Z", nil, true)
	want := "execution act_9 was dispatched at 2026-01-01T00:00:00Z and is still running; outcome not yet known; do not retry; check latch_execution_status with execution_id act_9; Latch also sends the outcome to this session when execution act_9 resolves (a notifications/message naming it, or the task's status notification), as long as the session stays open."
	if got != want {
		t.Errorf("noteFor(dispatched, pushed) = %q, want %q", got, want)
	}
	got, _ = noteFor(exec, dispNew, "2026-01-01T00:00:00Z", nil, false)
	want = "execution act_9 was dispatched at 2026-01-01T00:00:00Z and is still running; outcome not yet known; do not retry; check latch_execution_status with execution_id act_9."
	if got != want {
		t.Errorf("noteFor(dispatched, not pushed) = %q, want %q", got, want)
	}
	done := &recordv1.Execution{Id: "act_9", State: recordv1.State_STATE_COMPLETED, Outcome: recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, TargetStatus: 500, Replay: "idempotency_key"}
	note, isErr := lateNote(done)
	want = "Latch: execution act_9, left unresolved by an earlier answer in this session, has resolved (completed): execution act_9 reached the target, which answered with status 500, a failure; it will not be re-sent. To try again after fixing the cause, call the tool with repeat_of=act_9. Its full result and receipt: call latch_execution_status with execution_id act_9."
	if note != want || !isErr {
		t.Errorf("lateNote(failed at target) = %q, %v; want %q, true", note, isErr, want)
	}
}

// TestStatusProblem: the problem a refusal gives the model is the one the
// control plane's ErrorInfo carries, built as its API builds it from the
// engine's and the catalog's errors (api.withReason: engine.Problem), never
// text cut from the message; a status without it is answered as it is.
func TestStatusProblem(t *testing.T) {
	refusal := func(c codes.Code, r controlplanev1.ErrorReason, err error) error {
		return errinfo.Error(c, err.Error(), r, errinfo.MetaProblem, engine.Problem(err))
	}
	badRepeat := &engine.Refusal{Err: engine.ErrBadRepeatOf, Problem: "repeat_of does not cite a settled execution of this actor and tool: act_1 is still dispatched"}
	foreign, _ := status.New(codes.InvalidArgument, "engine: invalid arguments: x").WithDetails(&errdetails.ErrorInfo{Domain: "example.com", Reason: "X", Metadata: map[string]string{errinfo.MetaProblem: "not ours"}})
	tests := []struct {
		name      string
		err       error
		msg, want string
	}{
		{"invalid arguments", refusal(codes.InvalidArgument, controlplanev1.ErrorReason_ERROR_REASON_INVALID_ARGUMENTS, fmt.Errorf("%w: %w", engine.ErrInvalidArguments, &tools.ArgumentError{Problem: `missing required argument "version" (string)`})),
			`engine: invalid arguments: tools: invalid arguments: missing required argument "version" (string)`, `missing required argument "version" (string)`},
		{"no problem: the message as it is", status.Error(codes.InvalidArgument, `argument service: pattern: "API" does not match`),
			`argument service: pattern: "API" does not match`, `argument service: pattern: "API" does not match`},
		{"bad repeat_of", refusal(codes.InvalidArgument, controlplanev1.ErrorReason_ERROR_REASON_BAD_REPEAT_OF, badRepeat),
			`engine: bad repeat_of: repeat_of does not cite a settled execution of this actor and tool: act_1 is still dispatched`, `repeat_of does not cite a settled execution of this actor and tool: act_1 is still dispatched`},
		{"unknown tool", refusal(codes.NotFound, controlplanev1.ErrorReason_ERROR_REASON_UNKNOWN_TOOL, &engine.Refusal{Err: engine.ErrUnknownTool, Problem: `"x" is not in the catalog`}),
			`engine: unknown tool: "x" is not in the catalog`, `"x" is not in the catalog`},
		{"another domain's ErrorInfo is not read", foreign.Err(), "engine: invalid arguments: x", "engine: invalid arguments: x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := status.FromError(tt.err)
			if st.Message() != tt.msg {
				t.Errorf("status message = %q, want %q", st.Message(), tt.msg)
			}
			if got := statusProblem(tt.err, st); got != tt.want {
				t.Errorf("statusProblem(%q) = %q, want %q", tt.msg, got, tt.want)
			}
		})
	}
}

// TestObservedNotes: an observed execution whose outcome is unknown is not
// told as being established (nothing recovers it), and an observed tool's
// description does not promise that an identical call attaches.
func TestObservedNotes(t *testing.T) {
	x := &recordv1.Execution{Id: "act_1", State: recordv1.State_STATE_OUTCOME_UNKNOWN, Replay: "review", Observation: &recordv1.Observation{WouldHoldUncertain: true}}
	note, _ := noteFor(x, dispNew, "2026-01-01T00:00:00Z", nil, false)
	if strings.Contains(note, "establishing") || !strings.Contains(note, "observe mode") || !strings.Contains(note, "act_1") {
		t.Errorf("noteFor(observed outcome_unknown) = %q, want it to say observe mode does not establish the outcome", note)
	}
	x.Observation = nil
	if note, _ := noteFor(x, dispNew, "2026-01-01T00:00:00Z", nil, false); !strings.Contains(note, "establishing") {
		t.Errorf("noteFor(enforced outcome_unknown) = %q, want the enforced note", note)
	}
	for _, observed := range []bool{false, true} {
		mt, err := mcpTool(&controlplanev1.Tool{Name: "create", Description: "Create.", InputSchema: []byte(`{"type":"object"}`), Replay: "review", SideEffecting: true, Observed: observed})
		if err != nil {
			t.Fatal(err)
		}
		if promises := strings.Contains(mt.Description, "attaches to the same execution"); promises == observed {
			t.Errorf("mcpTool(observed=%v).Description = %q", observed, mt.Description)
		}
	}
}
