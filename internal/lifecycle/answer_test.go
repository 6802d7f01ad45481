package lifecycle

import (
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func TestAnswerOf(t *testing.T) {
	tests := []struct {
		name string
		r    *recordv1.Result
		want recordv1.AnswerKind
	}{
		{"recorded kind wins", &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT, Status: 200}, recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT},
		{"older process result", &recordv1.Result{Exited: true}, recordv1.AnswerKind_ANSWER_KIND_PROCESS},
		{"older signal result", &recordv1.Result{Signal: "KILL"}, recordv1.AnswerKind_ANSWER_KIND_PROCESS},
		{"older status result", &recordv1.Result{Status: 201}, recordv1.AnswerKind_ANSWER_KIND_STATUS},
		{"none", nil, recordv1.AnswerKind_ANSWER_KIND_STATUS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AnswerOf(tt.r); got != tt.want {
				t.Errorf("AnswerOf(%v) = %v, want %v", tt.r, got, tt.want)
			}
		})
	}
}

func TestDescribeAnswer(t *testing.T) {
	tests := []struct {
		k      recordv1.AnswerKind
		status int32
		signal string
		failed bool
		want   string
	}{
		{recordv1.AnswerKind_ANSWER_KIND_STATUS, 201, "", false, "target status 201"},
		{recordv1.AnswerKind_ANSWER_KIND_UNSPECIFIED, 500, "", true, "target status 500"},
		{recordv1.AnswerKind_ANSWER_KIND_PROCESS, 3, "", true, "exit status 3"},
		{recordv1.AnswerKind_ANSWER_KIND_PROCESS, -1, "", true, "killed by a signal"},
		{recordv1.AnswerKind_ANSWER_KIND_PROCESS, -1, "KILL", true, "killed by signal KILL"},
		{recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT, 0, "", false, "an upstream tool result"},
		{recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT, 0, "", true, "an upstream tool error result"},
		{recordv1.AnswerKind_ANSWER_KIND_MARKER, 0, "", false, "a completed script marker"},
		{recordv1.AnswerKind_ANSWER_KIND_MARKER, 0, "", true, "a failed script marker"},
	}
	for _, tt := range tests {
		if got := DescribeAnswer(tt.k, tt.status, tt.signal, tt.failed); got != tt.want {
			t.Errorf("DescribeAnswer(%v, %d, %q, %v) = %q, want %q", tt.k, tt.status, tt.signal, tt.failed, got, tt.want)
		}
	}
}
