package store

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestWithCredential: the records an update under WithCredential appends
// carry the credential, unless they set their own; updates without it
// append none.
func TestWithCredential(t *testing.T) {
	s := newStore(t, memkv.New())
	cred := &recordv1.OperatorCredential{Operator: "root", Kind: "operator_token", TokenId: "tok_1", TokenCreatedBy: "local operator uid:0", TokenCreatedVia: "unix"}
	own := &recordv1.OperatorCredential{Operator: "bob", Kind: "sign_in_link"}
	ctx := WithCredential(t.Context(), cred)
	appendOne := func(update func(context.Context, func(*Tx) error) error, ctx context.Context, e *recordv1.JournalEntry) {
		t.Helper()
		if err := update(ctx, func(tx *Tx) error { _, err := tx.Append(e); return err }); err != nil {
			t.Fatal(err)
		}
	}
	appendOne(s.Update, ctx, &recordv1.JournalEntry{Kind: "a"})
	appendOne(s.UpdateLazy, ctx, &recordv1.JournalEntry{Kind: "b"})
	appendOne(s.Update, ctx, &recordv1.JournalEntry{Kind: "c", Credential: own})
	appendOne(s.Update, t.Context(), &recordv1.JournalEntry{Kind: "d"})
	want := []*recordv1.OperatorCredential{cred, cred, own, nil}
	for i, w := range want {
		b, err := s.JournalEntry(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, e.GetCredential(), protocmp.Transform()); diff != "" {
			t.Errorf("record %d (%s) credential (-want +got):\n%s", i, lifecycle.EntryKindNameOf(e), diff)
		}
	}
}
