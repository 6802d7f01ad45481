package lifecycle

import (
	"strings"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const reasonPrefix = "REASON_CODE_"

// ReasonName is the code's lowercase name, the way a reason's text starts
// with it ("session_authorization"); "" for unspecified and other, which
// no text starts with.
func ReasonName(c recordv1.ReasonCode) string {
	switch c {
	case recordv1.ReasonCode_REASON_CODE_UNSPECIFIED, recordv1.ReasonCode_REASON_CODE_OTHER:
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(c.String(), reasonPrefix))
}

// Reason is the text of a reason of code c: its name, then what the
// people reading it need ("session_revoked: session ses_1 was revoked: ...").
func Reason(c recordv1.ReasonCode, text string) string {
	if n := ReasonName(c); n != "" {
		return n + ": " + text
	}
	return text
}

// ReasonOf is what x's reason is about: the code its step recorded, or, on
// a record written before steps recorded one, the code its reason's text
// starts with (those versions wrote the name and a colon first).
func ReasonOf(x *recordv1.Execution) recordv1.ReasonCode {
	return codeOf(x.GetReasonCode(), x.GetReason())
}

// EntryReasonOf is ReasonOf for a journal record's reason.
func EntryReasonOf(e *recordv1.JournalEntry) recordv1.ReasonCode {
	return codeOf(e.GetReasonCode(), e.GetReason())
}

func codeOf(c recordv1.ReasonCode, reason string) recordv1.ReasonCode {
	if c != recordv1.ReasonCode_REASON_CODE_UNSPECIFIED || reason == "" {
		return c
	}
	name, _, ok := strings.Cut(reason, ":")
	if !ok {
		return recordv1.ReasonCode_REASON_CODE_OTHER
	}
	if v, known := recordv1.ReasonCode_value[reasonPrefix+strings.ToUpper(name)]; known && ReasonName(recordv1.ReasonCode(v)) == name {
		return recordv1.ReasonCode(v)
	}
	return recordv1.ReasonCode_REASON_CODE_OTHER
}
