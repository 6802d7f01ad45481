package lifecycle

import (
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func TestReasonOf(t *testing.T) {
	const (
		unspecified = recordv1.ReasonCode_REASON_CODE_UNSPECIFIED
		other       = recordv1.ReasonCode_REASON_CODE_OTHER
		session     = recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION
		integrity   = recordv1.ReasonCode_REASON_CODE_RESULT_INTEGRITY
	)
	tests := []struct {
		name   string
		code   recordv1.ReasonCode
		reason string
		want   recordv1.ReasonCode
	}{
		{"recorded code wins over the text", other, "session_authorization: looks like one", other},
		{"recorded code", session, "agent session ses_1 is new", session},
		{"older record: code in the text", unspecified, "session_authorization: agent session ses_1 is new", session},
		{"older record: integrity", unspecified, "result_integrity: the stored result does not hash", integrity},
		{"older record: free text", unspecified, "approved by alice: ok", other},
		{"older record: a colon after an unknown word", unspecified, "nothing was sent: dial refused", other},
		{"older record: the prefix must be exact", unspecified, "Session_Authorization: x", other},
		{"older record: other is never read from text", unspecified, "other: x", other},
		{"no reason", unspecified, "", unspecified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &recordv1.Execution{ReasonCode: tt.code, Reason: tt.reason}
			if got := ReasonOf(x); got != tt.want {
				t.Errorf("ReasonOf(%v, %q) = %v, want %v", tt.code, tt.reason, got, tt.want)
			}
			e := &recordv1.JournalEntry{ReasonCode: tt.code, Reason: tt.reason}
			if got := EntryReasonOf(e); got != tt.want {
				t.Errorf("EntryReasonOf(%v, %q) = %v, want %v", tt.code, tt.reason, got, tt.want)
			}
		})
	}
}

// TestReasonRoundTrip: the text Reason writes for every code reads back as
// that code on a record without one (what an older reader of the text, and
// ReasonOf on such a record, rely on).
func TestReasonRoundTrip(t *testing.T) {
	for v := range recordv1.ReasonCode_name {
		c := recordv1.ReasonCode(v)
		if c == recordv1.ReasonCode_REASON_CODE_UNSPECIFIED {
			continue
		}
		text := Reason(c, "why")
		want := c
		if got := ReasonOf(&recordv1.Execution{Reason: text}); got != want {
			t.Errorf("ReasonOf(%q) = %v, want %v", text, got, want)
		}
	}
}
