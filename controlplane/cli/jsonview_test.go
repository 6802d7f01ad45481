package cli

import (
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestJSONViewTellsDelivery: an execution's --json carries delivery whole:
// "not_recorded" too (the zero value, left out otherwise), and "delivered"
// for a record written before the field existed.
func TestJSONViewTellsDelivery(t *testing.T) {
	tests := []struct {
		name string
		x    *recordv1.Execution
		want string
	}{
		{"completed, nothing recorded", &recordv1.Execution{State: recordv1.State_STATE_COMPLETED}, "not_recorded"},
		{"caller left", &recordv1.Execution{State: recordv1.State_STATE_COMPLETED, Delivery: recordv1.Delivery_DELIVERY_CALLER_LEFT}, "not_delivered_caller_left"},
		{"delivered, older record", &recordv1.Execution{State: recordv1.State_STATE_DELIVERED}, "delivered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jsonView(tt.x)["delivery"]; got != tt.want {
				t.Errorf("jsonView(%v)[delivery] = %v, want %q", tt.x, got, tt.want)
			}
		})
	}
	if _, ok := jsonView(&recordv1.JournalEntry{Kind: "attach"})["delivery"]; ok {
		t.Error("jsonView(journal entry) has a delivery field; only executions do")
	}
}
