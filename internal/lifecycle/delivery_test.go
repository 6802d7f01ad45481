package lifecycle

import (
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func TestDeliveryOf(t *testing.T) {
	tests := []struct {
		name string
		x    *recordv1.Execution
		want string
		text string
	}{
		{"delivered state, older record", &recordv1.Execution{State: delivered}, "delivered", "delivered"},
		{"delivered to a retry after the caller left", &recordv1.Execution{State: delivered, Delivery: recordv1.Delivery_DELIVERY_CALLER_LEFT}, "delivered", "delivered"},
		{"caller left", &recordv1.Execution{State: completed, Delivery: recordv1.Delivery_DELIVERY_CALLER_LEFT}, "not_delivered_caller_left", "not delivered (the caller left before the answer)"},
		{"completed, nothing recorded", &recordv1.Execution{State: completed}, "not_recorded", "delivery not recorded"},
		{"delivered field without the state is not believed", &recordv1.Execution{State: completed, Delivery: recordv1.Delivery_DELIVERY_DELIVERED}, "not_recorded", "delivery not recorded"},
		{"nil", nil, "not_recorded", "delivery not recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DeliveryOf(tt.x)
			if got := DeliveryName(d); got != tt.want {
				t.Errorf("DeliveryName(DeliveryOf(%v)) = %q, want %q", tt.x, got, tt.want)
			}
			if got := DescribeDelivery(d); got != tt.text {
				t.Errorf("DescribeDelivery(DeliveryOf(%v)) = %q, want %q", tt.x, got, tt.text)
			}
		})
	}
}
