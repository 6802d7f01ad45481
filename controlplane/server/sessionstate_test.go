package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
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
			id := forgeSession(t, cfg, tt.before, tt.edit)
			srv, err := New(cfg)
			if err == nil {
				defer srv.Store.Close()
				t.Fatalf("New on a store whose session %s was forged succeeded; a call in that run is %s, want New to refuse", id, callIn(t, srv))
			}
			if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), id) {
				t.Errorf("New with a forged session = %v, want ErrStateMismatch naming %s", err, id)
			}
		})
	}
}

// TestForgedSessionWaitsOnALargeStore: on a store large enough that
// start-up serves before the full check (FullStateCheckUpTo -1), a session
// forged into authorized in the stopped store is not honoured: the run's
// next call waits for an operator (the session rule holds the record
// against its journal record first, and reports the mismatch:
// Engine.SessionsFailed), and Run stops naming the session.
func TestForgedSessionWaitsOnALargeStore(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before func(t *testing.T, srv *Server, id string)
	}{
		{name: "revoked flipped to authorized", before: func(t *testing.T, srv *Server, id string) {
			if _, err := srv.Engine.AuthorizeSession(t.Context(), id, "ops"); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.Engine.RevokeSession(t.Context(), id, "ops", "stolen laptop"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "pending set to authorized"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			cfg := stateConfig(t, data, -1)
			cfg.Sessions = engine.SessionConfig{Required: true}
			id := forgeSession(t, cfg, tt.before, func(x *recordv1.Session) *recordv1.Session {
				x.State, x.Reason, x.AuthorizedBy, x.AuthorizedAt = recordv1.SessionState_SESSION_STATE_AUTHORIZED, "", "ops", timestamppb.Now()
				return x
			})
			srv, err := New(cfg)
			if err != nil {
				t.Fatalf("New on a large store: %v (start-up does not check sessions synchronously there)", err)
			}
			if got := callIn(t, srv); got != recordv1.State_STATE_AWAITING_APPROVAL {
				t.Errorf("a call in the run of the forged session %s is %s, want awaiting_approval (not honoured)", id, got)
			}
			select {
			case <-srv.Engine.SessionsFailed():
				if ms := srv.Engine.SessionMismatches(); len(ms) == 0 || ms[0].ExecutionID != id {
					t.Errorf("SessionMismatches() = %v, want one naming %s", ms, id)
				}
			default:
				t.Errorf("SessionsFailed() is not closed after the forged session was read")
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := srv.Run(ctx); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), id) {
				t.Errorf("Run with the background pass = %v, want ErrStateMismatch naming %s", err, id)
			}
		})
	}
}

// forgeSession runs a control plane on cfg's data dir once: a call of
// mallory's run "evil" (its session is new: the call waits), then before
// (nil: nothing); it stops it and replaces the session's stored record by
// edit's (given the stored one, or an empty one when none is stored). It
// returns the session's id.
func forgeSession(t *testing.T, cfg Config, before func(t *testing.T, srv *Server, id string), edit func(x *recordv1.Session) *recordv1.Session) string {
	t.Helper()
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := runSession("mallory", "evil")
	if got := callIn(t, srv); got != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("a call in a new session is %s, want awaiting_approval", got)
	}
	if before != nil {
		before(t, srv, id)
	}
	runAndStop(t, srv)

	kv, err := badgerkv.Open(datadir.DB(cfg.DataDir), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	cur := &recordv1.Session{}
	if v, err := kv.Get([]byte("S/" + id)); err == nil {
		if err := proto.Unmarshal(v, cur); err != nil {
			t.Fatal(err)
		}
	}
	v, err := proto.Marshal(edit(cur))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]store.Write{{Key: []byte("S/" + id), Value: v}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// callIn makes a call in mallory's run "evil" and returns the state it
// went to (unspecified when Submit failed).
func callIn(t *testing.T, srv *Server) recordv1.State {
	t.Helper()
	r, err := srv.Engine.Submit(context.Background(), engine.SubmitInput{Actor: "mallory", Scope: "evil", Tool: "deploy", Arguments: []byte(`{"version":"` + time.Now().Format(time.RFC3339Nano) + `"}`)})
	if err != nil {
		t.Errorf("Submit: %v", err)
		return recordv1.State_STATE_UNSPECIFIED
	}
	return r.Execution.GetState()
}

// TestForgedSessionRecordRefusedByTheCheckpoint: a session planted as
// authorized with a journal record forged in place of a checkpointed one
// (and the session journal index naming it) agrees with the state check,
// which trusts journal leaves as stored: a small store starts. The session
// rule proves the record against the newest signed checkpoint before it
// honours the session, which refuses it: the call waits for an operator,
// and Run stops naming the session.
func TestForgedSessionRecordRefusedByTheCheckpoint(t *testing.T) {
	data := t.TempDir()
	cfg := stateConfig(t, data, 0)
	cfg.Sessions = engine.SessionConfig{Required: true}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runAndStop(t, srv)
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := freeRecord(t, kv)
	id := runSession("mallory", "evil")
	x := &recordv1.Session{Id: id, Actor: "mallory", Key: "run:evil", State: recordv1.SessionState_SESSION_STATE_AUTHORIZED,
		AuthorizedBy: "ops", AuthorizedAt: timestamppb.New(time.Now().Truncate(time.Second)), StartedAt: timestamppb.New(time.Now().Truncate(time.Second))}
	v, err := proto.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Appendf(nil, "j/%016x", at)
	leaf, err := kv.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := journal.EncodeEntry(&recordv1.JournalEntry{Index: uint64(at), Kind: "session_authorized", Actor: "mallory", Session: x})
	if err != nil {
		t.Fatal(err)
	}
	// The stored hashes the leaf completed stay: only the record changes.
	if err := kv.Commit([]store.Write{{Key: []byte("S/" + id), Value: v},
		{Key: key, Value: append(append([]byte(nil), leaf[:1+int(leaf[0])*32]...), rec...)},
		{Key: []byte("sj/" + id), Value: binary.BigEndian.AppendUint64(nil, uint64(at))}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	srv, err = New(cfg)
	if err != nil {
		t.Fatalf("New = %v; the state check trusts journal leaves as stored, so it starts", err)
	}
	if got := callIn(t, srv); got != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Errorf("a call in the session planted with a forged journal record is %s, want awaiting_approval", got)
	}
	if ms := srv.Engine.SessionMismatches(); len(ms) == 0 || ms[0].Kind != store.MismatchProof {
		t.Errorf("SessionMismatches() = %v, want a %s mismatch", ms, store.MismatchProof)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Run(ctx); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("Run = %v, want ErrStateMismatch", err)
	}
}
