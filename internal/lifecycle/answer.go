package lifecycle

import (
	"strconv"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// AnswerOf is the kind of answer a stored result holds: the kind its
// channel recorded, or, on a result stored before channels recorded one,
// a process's exit when it says a process exited and a status otherwise.
func AnswerOf(r *recordv1.Result) recordv1.AnswerKind {
	if k := r.GetAnswer(); k != recordv1.AnswerKind_ANSWER_KIND_UNSPECIFIED {
		return k
	}
	if r.GetExited() || r.GetSignal() != "" {
		return recordv1.AnswerKind_ANSWER_KIND_PROCESS
	}
	return recordv1.AnswerKind_ANSWER_KIND_STATUS
}

// ExecutionAnswer is the kind of answer an execution's target_status
// describes: the kind its completed record copied from the result, or, on
// an execution completed before that, a status.
func ExecutionAnswer(x *recordv1.Execution) recordv1.AnswerKind {
	if k := x.GetAnswer(); k != recordv1.AnswerKind_ANSWER_KIND_UNSPECIFIED {
		return k
	}
	return recordv1.AnswerKind_ANSWER_KIND_STATUS
}

// DescribeAnswer is one phrase for an observed answer, the way its kind of
// target gives it: "target status 201", "exit status 3", "killed by
// signal KILL", "an upstream tool result", "an upstream tool error
// result", "a completed script marker". status is target_status; failed
// says whether the outcome was a failure at the target.
func DescribeAnswer(k recordv1.AnswerKind, status int32, signal string, failed bool) string {
	switch k {
	case recordv1.AnswerKind_ANSWER_KIND_PROCESS:
		if signal != "" {
			return "killed by signal " + signal
		}
		if status == -1 {
			return "killed by a signal"
		}
		return "exit status " + strconv.Itoa(int(status))
	case recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT:
		if failed {
			return "an upstream tool error result"
		}
		return "an upstream tool result"
	case recordv1.AnswerKind_ANSWER_KIND_MARKER:
		if failed {
			return "a failed script marker"
		}
		return "a completed script marker"
	}
	return "target status " + strconv.Itoa(int(status))
}

// DescribeExecutionAnswer is DescribeAnswer for an execution's observed
// answer (its answer kind, target_status and outcome).
func DescribeExecutionAnswer(x *recordv1.Execution) string {
	return DescribeAnswer(ExecutionAnswer(x), x.GetTargetStatus(), "", x.GetOutcome() == recordv1.Outcome_OUTCOME_FAILED_AT_TARGET)
}
