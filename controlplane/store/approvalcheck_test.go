package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestCheckStateFindsAForgedApproval: an approval is a journaled
// transition of its execution (awaiting_approval -> authorized), so an
// execution awaiting approval edited into authorized (or approved with the
// approver renamed) in a stopped store (Badger and PostgreSQL) is an
// execution record that disagrees with its journal: both the full check
// and the start-up scope of a large store (which checks every unsettled
// execution) report it.
func TestCheckStateFindsAForgedApproval(t *testing.T) {
	const waiting, approved = "act_waiting_for_an_operator00", "act_approved_by_ops000000000"
	stateKey := func(s recordv1.State, id string) string { return fmt.Sprintf("s/%d/%s", int(s), id) }
	tests := []struct {
		name  string
		forge func(kv store.KV) error
		want  []found
	}{
		{name: "awaiting approval set to authorized", forge: func(kv store.KV) error {
			if err := storetest.Rewrite(kv, waiting, func(x *recordv1.Execution) {
				x.State, x.Reason = recordv1.State_STATE_AUTHORIZED, "approved by ops: looks fine"
			}); err != nil {
				return err
			}
			return kv.Commit([]store.Write{{Key: []byte(stateKey(recordv1.State_STATE_AWAITING_APPROVAL, waiting)), Delete: true},
				{Key: []byte(stateKey(recordv1.State_STATE_AUTHORIZED, waiting))}})
		}, want: []found{{waiting, store.MismatchRecord}}},
		{name: "approver renamed", forge: func(kv store.KV) error {
			return storetest.Rewrite(kv, approved, func(x *recordv1.Execution) { x.Reason = "approved by cfo: ok" })
		}, want: []found{{approved, store.MismatchRecord}}},
	}
	for _, b := range storetest.Backends {
		for _, tt := range tests {
			t.Run(b.Name+"/"+tt.name, func(t *testing.T) {
				open := b.New(t)
				s := storetest.OpenStore(t, open())
				build(t, s, 3, 0)
				err := s.Update(context.Background(), func(tx *store.Tx) error {
					for _, id := range []string{waiting, approved} {
						x := &recordv1.Execution{Id: id, Fingerprint: "hmac-sha256:" + id, Actor: "agent", IntentScope: "actor:agent", Tool: "deploy",
							CanonicalIntent: []byte(`{}`), AcceptedAt: timestamppb.New(time.Unix(1_800_000_000, 0))}
						tx.Fresh(id)
						if err := step(tx, x, recordv1.State_STATE_ACCEPTED, true); err != nil {
							return err
						}
						x.Reason = "the tool requires approval for every call"
						if err := step(tx, x, recordv1.State_STATE_AWAITING_APPROVAL, true); err != nil {
							return err
						}
						if id == approved {
							x.Reason = "approved by ops: ok"
							if err := step(tx, x, recordv1.State_STATE_AUTHORIZED, true); err != nil {
								return err
							}
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				rep, err := s.CheckState(t.Context(), store.CheckAll)
				if err != nil || !rep.OK() {
					t.Fatalf("CheckState of an untouched store = %v, %v; want ok", rep, err)
				}
				s = storetest.Reopen(t, s, open, tt.forge)
				for _, scope := range []store.CheckScope{store.CheckAll, store.CheckUnsettled} {
					rep, err = s.CheckState(t.Context(), scope)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(tt.want, summary(rep.Mismatches)); diff != "" {
						t.Errorf("CheckState(%d) mismatches (-want +got):\n%s\n%s", scope, diff, rep)
					}
				}
			})
		}
	}
}
