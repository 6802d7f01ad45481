package lifecycle

import recordv1 "github.com/latchhq/latch/proto/latch/record/v1"

// The three delivery facts, as every reader tells them (explain, the
// console, `latch exec`). Only a front knows anything about delivery: it
// wrote the answer, or it saw the caller go before it could. Without a
// record nothing is claimed: "not recorded" is never told as a failure.
const (
	// DeliveredName: a front wrote the answer to its caller.
	DeliveredName = "delivered"
	// CallerLeftName: a front saw the caller's connection or stream close
	// before it could write the answer.
	CallerLeftName = "not_delivered_caller_left"
	// NotRecordedName: no front has recorded either (the record may still
	// be on its way).
	NotRecordedName = "not_recorded"
)

// CallerLeftKind is the journal kind of a front's record that the caller
// left before the answer (Execution.delivery becomes caller_left; the state
// does not change).
const CallerLeftKind = recordv1.EntryKind_ENTRY_KIND_CALLER_LEFT

// DeliveryOf is what is known about x's answer reaching its caller. State
// delivered is delivered whatever the field says (records written before
// the field existed, and a retry delivered after the first caller left).
func DeliveryOf(x *recordv1.Execution) recordv1.Delivery {
	if x.GetState() == delivered {
		return recordv1.Delivery_DELIVERY_DELIVERED
	}
	if d := x.GetDelivery(); d == recordv1.Delivery_DELIVERY_CALLER_LEFT {
		return d
	}
	return recordv1.Delivery_DELIVERY_UNSPECIFIED
}

// DeliveryName is d's name in JSON and tables: "delivered",
// "not_delivered_caller_left" or "not_recorded".
func DeliveryName(d recordv1.Delivery) string {
	switch d {
	case recordv1.Delivery_DELIVERY_DELIVERED:
		return DeliveredName
	case recordv1.Delivery_DELIVERY_CALLER_LEFT:
		return CallerLeftName
	}
	return NotRecordedName
}

// DescribeDelivery is d in words: "delivered", "not delivered (the caller
// left before the answer)" or "delivery not recorded".
func DescribeDelivery(d recordv1.Delivery) string {
	switch d {
	case recordv1.Delivery_DELIVERY_DELIVERED:
		return "delivered"
	case recordv1.Delivery_DELIVERY_CALLER_LEFT:
		return "not delivered (the caller left before the answer)"
	}
	return "delivery not recorded"
}
