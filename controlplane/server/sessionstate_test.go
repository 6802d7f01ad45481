package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// runSession is the id of the agent session of actor's run (engine sessionOf).
func runSession(actor, run string) string {
	sum := sha256.Sum256([]byte(actor + "\x00run:" + run))
	return "ses_" + hex.EncodeToString(sum[:10])
}

// TestForgedSessionRefusedAtStart: with sessions required, an agent
// session edited in the stopped store into authorized (planted with no
// journal record, or revoked through the API and flipped back, or its
// authorizer renamed) stops New, naming the session, instead of letting
// the run's calls go to dispatch without an operator.
func TestForgedSessionRefusedAtStart(t *testing.T) {
	authorize := func(x *recordv1.Session) {
		x.State, x.Reason, x.AuthorizedBy, x.AuthorizedAt = recordv1.SessionState_SESSION_STATE_AUTHORIZED, "", "ops", timestamppb.Now()
	}
	tests := []struct {
		name string
		// before runs in the first run (nil: nothing); edit changes the
		// stopped store's record of the session (nil record: none stored).
		before func(t *testing.T, srv *Server, id string)
		edit   func(x *recordv1.Session) *recordv1.Session
	}{
		{name: "planted authorized", edit: func(*recordv1.Session) *recordv1.Session {
			x := &recordv1.Session{Id: runSession("mallory", "evil"), Actor: "mallory", Key: "run:evil", StartedAt: timestamppb.Now()}
			authorize(x)
			return x
		}},
		{name: "revoked flipped to authorized", before: func(t *testing.T, srv *Server, id string) {
			if _, err := srv.Engine.AuthorizeSession(t.Context(), id, "ops"); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.Engine.RevokeSession(t.Context(), id, "ops", "stolen laptop"); err != nil {
				t.Fatal(err)
			}
		}, edit: func(x *recordv1.Session) *recordv1.Session { authorize(x); return x }},
		{name: "authorizer renamed", before: func(t *testing.T, srv *Server, id string) {
			if _, err := srv.Engine.AuthorizeSession(t.Context(), id, "ops"); err != nil {
				t.Fatal(err)
			}
		}, edit: func(x *recordv1.Session) *recordv1.Session { x.AuthorizedBy = "cfo"; return x }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			cfg := stateConfig(t, data, 0)
			cfg.Sessions = engine.SessionConfig{Required: true}
			srv, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			id := runSession("mallory", "evil")
			r, err := srv.Engine.Submit(t.Context(), engine.SubmitInput{Actor: "mallory", Scope: "evil", Tool: "deploy", Arguments: []byte(`{"version":"1"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Execution.GetState(); got != recordv1.State_STATE_AWAITING_APPROVAL {
				t.Fatalf("a call in a new session is %s, want awaiting_approval", got)
			}
			if tt.before != nil {
				tt.before(t, srv, id)
			}
			runAndStop(t, srv)

			kv, err := store.OpenBadger(DBDir(data), store.BadgerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur := &recordv1.Session{}
			if v, err := kv.Get([]byte("S/" + id)); err == nil {
				if err := proto.Unmarshal(v, cur); err != nil {
					t.Fatal(err)
				}
			}
			v, err := proto.Marshal(tt.edit(cur))
			if err != nil {
				t.Fatal(err)
			}
			if err := kv.Commit([]store.Write{{Key: []byte("S/" + id), Value: v}}); err != nil {
				t.Fatal(err)
			}
			kv.Close()

			srv, err = New(cfg)
			if err == nil {
				defer srv.Store.Close()
				r, err := srv.Engine.Submit(context.Background(), engine.SubmitInput{Actor: "mallory", Scope: "evil", Tool: "deploy", Arguments: []byte(`{"version":"2"}`)})
				var state recordv1.State
				if err == nil {
					state = r.Execution.GetState()
				}
				t.Fatalf("New on a store whose session %s was forged succeeded; a call in that run is %s (%v), want New to refuse", id, state, err)
			}
			if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), id) {
				t.Errorf("New with a forged session = %v, want ErrStateMismatch naming %s", err, id)
			}
		})
	}
}
