package mcpfront

import (
	"fmt"
	"strings"
	"time"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// The note is the one paragraph the model reads about an execution. Every
// note comes from noteTable below and from nowhere else: the control plane's
// own Submit note is not appended (it describes the state at Submit time,
// which the wait may have moved past, and two notes that disagree are worse
// than one).
//
// A row matches on four axes; the first matching row wins, so specific rows
// come before general ones:
//
//   - state (with the outcome for completed and delivered),
//   - disposition: whether this call made the execution or attached to an
//     earlier identical one (attached and recovered read the same),
//   - replay class: read-only tools take no repeat_of, so their notes never
//     mention it; side-effecting tools do,
//   - answer: the kind of answer the channel observed (recordv1.AnswerKind,
//     on the execution and its stored result): an HTTP target "answered with
//     status N", a process "exited with status N", an upstream MCP tool
//     "returned its result" (or an error result: there is no status), a
//     migration script's marker "says the script completed" (or failed).
//     The front knows no channel by name.
//
// Placeholders: {id}, {status}, {at} (dispatch time), {reason} (": why", or
// empty), {tool}, {pushed} (pushedTail when the front will push the outcome
// to the caller's session, late.go; else empty). TestNoteTableCoversEverything
// walks every combination.

// noteDisp is the disposition axis.
type noteDisp int

const (
	anyDisp noteDisp = iota
	// dispNew: this call made the execution, or reads it (status, cancel).
	dispNew
	// dispAttached: this call attached to an identical earlier call's.
	dispAttached
)

// noteReplay is the replay-class axis.
type noteReplay int

const (
	anyReplay noteReplay = iota
	replayReadOnly
	replaySideEffecting
)

// noteAnswer is the answer axis (recordv1.AnswerKind).
type noteAnswer int

const (
	anyAnswer noteAnswer = iota
	answerStatus
	answerProcess
	answerTool
	answerMarker
)

// noteRow is one line of the table.
type noteRow struct {
	states  []recordv1.State
	outcome recordv1.Outcome // OUTCOME_UNSPECIFIED: any
	disp    noteDisp
	replay  noteReplay
	answer  noteAnswer
	isError bool
	text    string
}

var (
	observedStates = []recordv1.State{recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED}
	failed         = recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
)

// Shared tails, so rows that mean the same say it the same way.
const (
	checkStatus = "check latch_execution_status with execution_id {id}{pushed}"
	attachedTo  = "This call attached to the execution of an identical earlier call; nothing was sent twice. "
)

var noteTable = []noteRow{
	// Observed outcome: a failure reported by the target. A read-only call
	// attaches to an identical one only within the tool's attach window.
	{states: observedStates, outcome: failed, disp: dispAttached, replay: replayReadOnly, answer: answerStatus, isError: true,
		text: "execution {id}, the stored answer of an identical earlier call: the target answered with status {status}, a failure. The tool is read-only, so nothing changed; fix the cause and call the tool again once its attach window has passed."},
	{states: observedStates, outcome: failed, disp: dispAttached, replay: replayReadOnly, answer: answerProcess, isError: true,
		text: "execution {id}, the stored answer of an identical earlier call: the command exited with status {status}, a failure. The tool is read-only, so nothing changed; fix the cause and call the tool again once its attach window has passed."},
	{states: observedStates, outcome: failed, replay: replayReadOnly, answer: answerStatus, isError: true,
		text: "execution {id}: the target answered with status {status}, a failure. The tool is read-only, so nothing changed; fix the cause and call the tool again."},
	{states: observedStates, outcome: failed, replay: replayReadOnly, answer: answerProcess, isError: true,
		text: "execution {id}: the command exited with status {status}, a failure. The tool is read-only, so nothing changed; fix the cause and call the tool again."},
	{states: observedStates, outcome: failed, disp: dispAttached, answer: answerStatus, isError: true,
		text: attachedTo + "Execution {id} reached the target, which answered with status {status}, a failure; it is not re-sent. To try again after fixing the cause, call the tool with repeat_of={id}."},
	{states: observedStates, outcome: failed, disp: dispAttached, answer: answerProcess, isError: true,
		text: attachedTo + "Execution {id} ran and the command exited with status {status}, a failure; it is not re-run. To try again after fixing the cause, call the tool with repeat_of={id}."},
	{states: observedStates, outcome: failed, answer: answerStatus, isError: true,
		text: "execution {id} reached the target, which answered with status {status}, a failure; it will not be re-sent. To try again after fixing the cause, call the tool with repeat_of={id}."},
	{states: observedStates, outcome: failed, answer: answerProcess, isError: true,
		text: "execution {id} ran and the command exited with status {status}, a failure; it will not be re-run. To try again after fixing the cause, call the tool with repeat_of={id}."},

	{states: observedStates, outcome: failed, disp: dispAttached, replay: replayReadOnly, answer: answerTool, isError: true,
		text: "execution {id}, the stored answer of an identical earlier call: the upstream tool returned an error result. The tool is read-only, so nothing changed; fix the cause and call the tool again once its attach window has passed."},
	{states: observedStates, outcome: failed, replay: replayReadOnly, answer: answerTool, isError: true,
		text: "execution {id}: the upstream tool returned an error result. The tool is read-only, so nothing changed; fix the cause and call the tool again."},
	{states: observedStates, outcome: failed, disp: dispAttached, answer: answerTool, isError: true,
		text: attachedTo + "Execution {id} reached the upstream tool, which returned an error result; it is not re-sent. To try again after fixing the cause, call the tool with repeat_of={id}."},
	{states: observedStates, outcome: failed, answer: answerTool, isError: true,
		text: "execution {id} reached the upstream tool, which returned an error result; it will not be re-sent. To try again after fixing the cause, call the tool with repeat_of={id}."},
	{states: observedStates, outcome: failed, disp: dispAttached, replay: replayReadOnly, answer: answerMarker, isError: true,
		text: "execution {id}, the stored answer of an identical earlier call: its script's marker says it failed. The tool is read-only, so nothing changed; fix the cause and call the tool again once its attach window has passed."},
	{states: observedStates, outcome: failed, replay: replayReadOnly, answer: answerMarker, isError: true,
		text: "execution {id}: its script's marker says it failed. The tool is read-only, so nothing changed; fix the cause and call the tool again."},
	{states: observedStates, outcome: failed, disp: dispAttached, answer: answerMarker, isError: true,
		text: attachedTo + "Execution {id} ran and its script's marker says it failed; it is not re-run. To try again after fixing the cause, call the tool with repeat_of={id}."},
	{states: observedStates, outcome: failed, answer: answerMarker, isError: true,
		text: "execution {id} ran and its script's marker says it failed; it will not be re-run. To try again after fixing the cause, call the tool with repeat_of={id}."},

	// Observed outcome: success.
	{states: observedStates, disp: dispAttached, replay: replayReadOnly, answer: answerStatus,
		text: "execution {id} completed; the target answered with status {status}. This is the stored answer of an identical earlier call (read-only calls attach within the tool's attach window)."},
	{states: observedStates, disp: dispAttached, replay: replayReadOnly, answer: answerProcess,
		text: "execution {id} completed; the command exited with status {status}. This is the stored answer of an identical earlier call (read-only calls attach within the tool's attach window)."},
	{states: observedStates, disp: dispAttached, answer: answerStatus,
		text: attachedTo + "Execution {id} completed; the target answered with status {status}, and this is its stored result. To repeat the action on purpose, call the tool with repeat_of={id}."},
	{states: observedStates, disp: dispAttached, answer: answerProcess,
		text: attachedTo + "Execution {id} completed; the command exited with status {status}, and this is its stored result. To repeat the action on purpose, call the tool with repeat_of={id}."},
	{states: observedStates, answer: answerStatus,
		text: "execution {id} completed; the target answered with status {status}."},
	{states: observedStates, answer: answerProcess,
		text: "execution {id} completed; the command exited with status {status}."},

	{states: observedStates, disp: dispAttached, replay: replayReadOnly, answer: answerTool,
		text: "execution {id} completed; the upstream tool returned its result. This is the stored answer of an identical earlier call (read-only calls attach within the tool's attach window)."},
	{states: observedStates, disp: dispAttached, answer: answerTool,
		text: attachedTo + "Execution {id} completed; the upstream tool returned its result, and this is its stored result. To repeat the action on purpose, call the tool with repeat_of={id}."},
	{states: observedStates, answer: answerTool,
		text: "execution {id} completed; the upstream tool returned its result."},
	{states: observedStates, disp: dispAttached, replay: replayReadOnly, answer: answerMarker,
		text: "execution {id} completed; its script's marker says it completed. This is the stored answer of an identical earlier call (read-only calls attach within the tool's attach window)."},
	{states: observedStates, disp: dispAttached, answer: answerMarker,
		text: attachedTo + "Execution {id} completed; its script's marker says it completed, and this is its stored result. To repeat the action on purpose, call the tool with repeat_of={id}."},
	{states: observedStates, answer: answerMarker,
		text: "execution {id} completed; its script's marker says it completed."},

	// Sent, outcome still to come.
	{states: []recordv1.State{recordv1.State_STATE_DISPATCHED}, disp: dispAttached,
		text: attachedTo + "Execution {id} was dispatched at {at} and is still running; outcome not yet known; do not retry; " + checkStatus + "."},
	{states: []recordv1.State{recordv1.State_STATE_DISPATCHED},
		text: "execution {id} was dispatched at {at} and is still running; outcome not yet known; do not retry; " + checkStatus + "."},
	{states: []recordv1.State{recordv1.State_STATE_OUTCOME_UNKNOWN},
		text: "execution {id} was dispatched at {at} and its outcome is not yet known; Latch is establishing it from the target; do not retry; " + checkStatus + "."},
	{states: []recordv1.State{recordv1.State_STATE_NEEDS_REVIEW},
		text: "execution {id} was dispatched at {at} and its outcome is unknown; an operator must review it. Do not retry; later, " + checkStatus + "."},

	// Not sent yet.
	{states: []recordv1.State{recordv1.State_STATE_AWAITING_APPROVAL}, disp: dispAttached,
		text: "awaiting approval, execution {id}{reason}; nothing has been sent yet and no second approval request was made. Call the tool again later with the same arguments (it attaches to this execution) or " + checkStatus + "."},
	{states: []recordv1.State{recordv1.State_STATE_AWAITING_APPROVAL},
		text: "awaiting approval, execution {id}{reason}; nothing has been sent yet. Call the tool again later with the same arguments (it attaches to this execution, no second request is made) or " + checkStatus + "."},
	{states: []recordv1.State{recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED},
		text: "execution {id} is accepted and not yet dispatched; do not retry; " + checkStatus + "."},

	// Nothing happened at the target.
	//
	// not_executed is reached only from evidence: nothing left Latch (seen
	// before the request was written), the target's own "no record" after
	// its settle point, the host agent's not_started marker, or an
	// operator's decision. The reason says which.
	{states: []recordv1.State{recordv1.State_STATE_NOT_EXECUTED}, isError: true,
		text: "execution {id} was not executed{reason}. That is established from evidence, not from a lost connection, so calling the tool again is safe: it starts a new execution."},
	{states: []recordv1.State{recordv1.State_STATE_REJECTED}, disp: dispAttached, isError: true,
		text: "execution {id} of an identical earlier call was rejected{reason}; nothing was sent to the target, and the same call gets the same answer."},
	{states: []recordv1.State{recordv1.State_STATE_REJECTED}, isError: true,
		text: "execution {id} was rejected{reason}; nothing was sent to the target."},
	{states: []recordv1.State{recordv1.State_STATE_CANCELLED}, isError: true,
		text: "execution {id} was cancelled before dispatch{reason}; nothing was sent to the target."},
}

// pushedTail ends the "check latch_execution_status" of an answer whose
// execution the front watches for the caller's open session (late.go): the
// model learns the outcome will come to it, and how to read it sooner.
const pushedTail = "; Latch also sends the outcome to this session when execution %s resolves (a notifications/message naming it, or the task's status notification), as long as the session stays open"

// observedUnknownNote is the note of an execution in observe mode whose
// outcome is unknown.
var observedUnknownNote = noteRow{text: "execution {id} was dispatched at {at} and its outcome is not known: the tool is in observe mode, so Latch forwarded the call as it came and does not establish the outcome from the target; " + checkStatus + "."}

// noteFor is the note for exec as answered with disposition axis d; pushed
// says the front will push the outcome to the caller's session (late.go).
// A state the table does not know (a newer schema) gets a neutral note.
func noteFor(e *recordv1.Execution, d noteDisp, dispatchedAt string, v *ResultView, pushed bool) (note string, isError bool) {
	tail := ""
	if pushed {
		tail = fmt.Sprintf(pushedTail, e.GetId())
	}
	row, ok := lookupNote(e.GetState(), e.GetOutcome(), d, axisReplay(e.GetReplay()), axisAnswer(e, v))
	if e.GetObservation() != nil && e.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN {
		// Observe mode: nothing establishes the outcome, so the table's
		// "Latch is establishing it" would be untrue.
		row, ok = observedUnknownNote, true
	}
	if !ok {
		return strings.NewReplacer("{id}", e.GetId(), "{state}", lifecycle.Name(e.GetState()), "{pushed}", tail).
			Replace("execution {id} is in state {state}; " + checkStatus + "."), false
	}
	reason := ""
	if r := e.GetReason(); r != "" {
		reason = ": " + strings.TrimSuffix(r, ".")
	}
	if dispatchedAt == "" {
		dispatchedAt = "(time not recorded)"
	}
	return strings.NewReplacer(
		"{id}", e.GetId(),
		"{status}", fmt.Sprint(e.GetTargetStatus()),
		"{at}", dispatchedAt,
		"{reason}", reason,
		"{pushed}", tail,
	).Replace(row.text), row.isError
}

// lateNote is the text of the notification that tells a session an
// execution it was answered about earlier has resolved (late.go): the note
// of its end state, and where the full result is.
func lateNote(e *recordv1.Execution) (note string, isError bool) {
	at := ""
	if t := e.GetDispatchedAt(); t != nil {
		at = t.AsTime().UTC().Format(time.RFC3339)
	}
	n, isErr := noteFor(e, dispNew, at, nil, false)
	return fmt.Sprintf("Latch: execution %s, left unresolved by an earlier answer in this session, has resolved (%s): %s Its full result and receipt: call %s with execution_id %s.",
		e.GetId(), lifecycle.Name(e.GetState()), n, ToolExecutionStatus, e.GetId()), isErr
}

func lookupNote(s recordv1.State, o recordv1.Outcome, d noteDisp, r noteReplay, c noteAnswer) (noteRow, bool) {
	for _, row := range noteTable {
		if !stateIn(s, row.states) ||
			(row.outcome != recordv1.Outcome_OUTCOME_UNSPECIFIED && row.outcome != o) ||
			(row.disp != anyDisp && row.disp != d) ||
			(row.replay != anyReplay && row.replay != r) ||
			(row.answer != anyAnswer && row.answer != c) {
			continue
		}
		return row, true
	}
	return noteRow{}, false
}

func stateIn(s recordv1.State, set []recordv1.State) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func axisDisp(d recordv1.Disposition) noteDisp {
	switch d {
	case recordv1.Disposition_DISPOSITION_ATTACHED, recordv1.Disposition_DISPOSITION_RECOVERED:
		return dispAttached
	}
	return dispNew // new, and rejected (the call itself was refused)
}

func axisReplay(r string) noteReplay {
	if tools.Replay(r) == tools.ReplayReadOnly {
		return replayReadOnly
	}
	return replaySideEffecting
}

// axisAnswer reads the answer axis off the execution (the kind its
// completed record copied from the result) or, for an execution completed
// before executions carried it, off the result view.
func axisAnswer(e *recordv1.Execution, v *ResultView) noteAnswer {
	k := e.GetAnswer()
	if k == recordv1.AnswerKind_ANSWER_KIND_UNSPECIFIED && v != nil {
		k = v.answerKind()
	}
	switch k {
	case recordv1.AnswerKind_ANSWER_KIND_PROCESS:
		return answerProcess
	case recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT:
		return answerTool
	case recordv1.AnswerKind_ANSWER_KIND_MARKER:
		return answerMarker
	}
	return answerStatus
}

// Bad arguments are answered as a tool error (isError), so the model can
// correct the call (MCP 2025-11-25, SEP-1303). The problem names the
// argument and what is expected; it comes from the control plane's
// ErrorInfo metadata (errinfo.Problem) without package prefixes.
func argumentNote(tool, problem string) string {
	return fmt.Sprintf("%s was not called: %s. Nothing was sent; correct the arguments and call the tool again.", tool, strings.TrimSuffix(problem, "."))
}
