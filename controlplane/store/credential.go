package store

import (
	"context"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

type credentialKey struct{}

// WithCredential returns ctx carrying the credential that authenticated an
// operator's decision (the console session's). Every journal record an
// Update or UpdateLazy under that context appends carries it
// (JournalEntry.credential) unless the record sets its own: the decision's
// records, and the ones it sets off in the same call (a session authorized
// approves its waiting executions), are tied to the credential without each
// writer having to pass it along. The store only copies what it is given.
func WithCredential(ctx context.Context, c *recordv1.OperatorCredential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

func credentialFrom(ctx context.Context) *recordv1.OperatorCredential {
	c, _ := ctx.Value(credentialKey{}).(*recordv1.OperatorCredential)
	return c
}
