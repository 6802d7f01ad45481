package store

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/latchhq/latch/controlplane/store/memkv"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestUpstreamToolPin: a pin written in a group reads back from the group
// and from the store after the commit; an absent one is ErrNotFound.
func TestUpstreamToolPin(t *testing.T) {
	s := newStore(t, memkv.New())
	if _, err := s.UpstreamToolPin("counter.add_note"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("UpstreamToolPin(absent) = %v, want ErrNotFound", err)
	}
	p := &recordv1.UpstreamToolPin{Tool: "counter.add_note", Hash: "sha256:ab", Description: "Add a note.", InputSchema: []byte(`{"type":"object"}`), AcceptedBy: "first_seen"}
	err := s.Update(context.Background(), func(tx *Tx) error {
		if err := tx.PutUpstreamToolPin(p); err != nil {
			return err
		}
		got, err := tx.UpstreamToolPin(p.GetTool())
		if err != nil {
			return err
		}
		if d := cmp.Diff(p, got, protocmp.Transform()); d != "" {
			t.Errorf("Tx.UpstreamToolPin diff (-want +got):\n%s", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.UpstreamToolPin(p.GetTool())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(p, got, protocmp.Transform()); d != "" {
		t.Errorf("Store.UpstreamToolPin diff (-want +got):\n%s", d)
	}
}
