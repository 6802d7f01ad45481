package errinfo

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// TestWireNames pins the reasons as they travel: clients of older and newer
// builds branch on these strings, so a renamed enum value must not change them.
func TestWireNames(t *testing.T) {
	want := map[controlplanev1.ErrorReason]string{
		controlplanev1.ErrorReason_ERROR_REASON_UNKNOWN_TOOL:            "UNKNOWN_TOOL",
		controlplanev1.ErrorReason_ERROR_REASON_INVALID_ARGUMENTS:       "INVALID_ARGUMENTS",
		controlplanev1.ErrorReason_ERROR_REASON_BAD_REPEAT_OF:           "BAD_REPEAT_OF",
		controlplanev1.ErrorReason_ERROR_REASON_ALREADY_DISPATCHED:      "ALREADY_DISPATCHED",
		controlplanev1.ErrorReason_ERROR_REASON_NOT_AWAITING_DECISION:   "NOT_AWAITING_DECISION",
		controlplanev1.ErrorReason_ERROR_REASON_STATE_MISMATCH:          "STATE_MISMATCH",
		controlplanev1.ErrorReason_ERROR_REASON_ACCESS_DENIED:           "ACCESS_DENIED",
		controlplanev1.ErrorReason_ERROR_REASON_NOT_ACTIVE:              "NOT_ACTIVE",
		controlplanev1.ErrorReason_ERROR_REASON_OPERATOR_NAME_NOT_BOUND: "OPERATOR_NAME_NOT_BOUND",
	}
	if len(want) != len(controlplanev1.ErrorReason_name)-1 {
		t.Errorf("ErrorReason has %d values, this test pins %d: pin the new one's wire name", len(controlplanev1.ErrorReason_name)-1, len(want))
	}
	for r, name := range want {
		if got := Name(r); got != name {
			t.Errorf("Name(%v) = %q, want %q", r, got, name)
		}
	}
}

func TestOf(t *testing.T) {
	err := Error(codes.InvalidArgument, "bad", controlplanev1.ErrorReason_ERROR_REASON_INVALID_ARGUMENTS, "problem", "x must be a string", "empty", "")
	r, md, ok := Of(err)
	if !ok || r != controlplanev1.ErrorReason_ERROR_REASON_INVALID_ARGUMENTS || md["problem"] != "x must be a string" {
		t.Errorf("Of(%v) = %v, %v, %v", err, r, md, ok)
	}
	if _, present := md["empty"]; present {
		t.Errorf("Of(%v) metadata %v keeps an empty value", err, md)
	}
	if !Is(err, controlplanev1.ErrorReason_ERROR_REASON_INVALID_ARGUMENTS) || Is(err, controlplanev1.ErrorReason_ERROR_REASON_UNKNOWN_TOOL) {
		t.Errorf("Is(%v) answers for the wrong reason", err)
	}
	foreign, _ := status.New(codes.FailedPrecondition, "x").WithDetails(&errdetails.ErrorInfo{Reason: "UNKNOWN_TOOL", Domain: "elsewhere"})
	if _, _, ok := Of(foreign.Err()); ok {
		t.Errorf("Of(another domain's ErrorInfo) = ok, want not ours")
	}
	if _, _, ok := Of(errors.New("plain")); ok {
		t.Errorf("Of(a plain error) = ok")
	}
	newer, _ := status.New(codes.FailedPrecondition, "x").WithDetails(&errdetails.ErrorInfo{Reason: "SOMETHING_NEWER", Domain: Domain})
	if r, _, ok := Of(newer.Err()); !ok || r != controlplanev1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		t.Errorf("Of(a newer reason) = %v, %v; want unspecified, ok", r, ok)
	}
}
