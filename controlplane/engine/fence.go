package engine

import "context"

// Holder tells whether this replica certainly still holds the store's lease
// (*lease.Keeper).
type Holder interface{ Holds() bool }

// Fenced wraps ch so that it refuses to send once h no longer certainly
// holds the lease: checked before every dispatch, so a replica that could
// not renew sends nothing a standby might send again after taking over.
// Queries only ask and pass through. The server wraps every channel of a
// replica that shares its store (PostgreSQL); the simulator wraps its own.
func Fenced(ch Channel, h Holder) Channel { return fenced{Channel: ch, lease: h} }

type fenced struct {
	Channel
	lease Holder
}

func (c fenced) Dispatch(ctx context.Context, call Call) Attempt {
	if !mutantSendAfterFence && !c.lease.Holds() {
		return Attempt{Class: NotSent, Reason: "this replica's store lease could not be renewed in time: nothing was sent (the active replica dispatches it)"}
	}
	return c.Channel.Dispatch(ctx, call)
}
