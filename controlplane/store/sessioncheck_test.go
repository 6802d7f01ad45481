package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// putSession stores x and journals it as kind, as the engine does
// (engine touchSession, setSession).
func putSession(tx *store.Tx, x *recordv1.Session, kind string) (int64, error) {
	if err := tx.PutSession(x); err != nil {
		return 0, err
	}
	return tx.Append(&recordv1.JournalEntry{Kind: kind, Actor: x.GetActor(), Session: proto.Clone(x).(*recordv1.Session)})
}

// sessionStore writes executions and three agent sessions as the engine
// does: ses_pending (started, waits for an operator), ses_authorized
// (authorized by ops, then seen again: last_seen_at moved without a
// journal record) and ses_revoked (authorized, then revoked).
func sessionStore(t *testing.T, s *store.Store) {
	t.Helper()
	at := func(m int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 12, 1, 10, m, 0, 0, time.UTC))
	}
	build(t, s, 5, 2)
	err := s.Update(context.Background(), func(tx *store.Tx) error {
		for _, id := range []string{"ses_pending", "ses_authorized", "ses_revoked"} {
			x := &recordv1.Session{Id: id, Actor: "agent", Key: "run:" + id, State: recordv1.SessionState_SESSION_STATE_PENDING, StartedAt: at(0), LastSeenAt: at(0)}
			if _, err := putSession(tx, x, "session_started"); err != nil {
				return err
			}
			if id == "ses_pending" {
				continue
			}
			x.State, x.AuthorizedAt, x.AuthorizedBy = recordv1.SessionState_SESSION_STATE_AUTHORIZED, at(1), "ops"
			if _, err := putSession(tx, x, "session_authorized"); err != nil {
				return err
			}
			if id == "ses_revoked" {
				x.State, x.Reason = recordv1.SessionState_SESSION_STATE_REVOKED, "revoked by ops: stolen laptop"
				if _, err := putSession(tx, x, "session_revoked"); err != nil {
					return err
				}
				continue
			}
			x.LastSeenAt = at(5)
			if err := tx.PutSession(x); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func editSession(kv store.KV, id string, edit func(x *recordv1.Session)) error {
	v, err := kv.Get([]byte("S/" + id))
	if err != nil {
		return err
	}
	x := &recordv1.Session{}
	if err := proto.Unmarshal(v, x); err != nil {
		return err
	}
	edit(x)
	return storetest.Put(kv, "S/"+id, x)
}

// TestCheckStateFindsForgedSessions forges a stopped store (Badger and
// PostgreSQL) once per kind of session forgery: the full check (start-up
// of a small store, latch audit verify) names the session.
func TestCheckStateFindsForgedSessions(t *testing.T) {
	tests := []struct {
		name  string
		forge func(kv store.KV) error
		want  []found
	}{
		{name: "planted authorized session", forge: func(kv store.KV) error {
			return storetest.Put(kv, "S/ses_planted", &recordv1.Session{Id: "ses_planted", Actor: "mallory", Key: "run:x",
				State: recordv1.SessionState_SESSION_STATE_AUTHORIZED, AuthorizedBy: "ops", AuthorizedAt: timestamppb.Now()})
		}, want: []found{{"ses_planted", store.MismatchUnjournaled}}},
		{name: "revoked session flipped to authorized", forge: func(kv store.KV) error {
			return editSession(kv, "ses_revoked", func(x *recordv1.Session) {
				x.State, x.Reason = recordv1.SessionState_SESSION_STATE_AUTHORIZED, ""
			})
		}, want: []found{{"ses_revoked", store.MismatchRecord}}},
		{name: "pending session set to authorized", forge: func(kv store.KV) error {
			return editSession(kv, "ses_pending", func(x *recordv1.Session) {
				x.State, x.AuthorizedBy, x.AuthorizedAt = recordv1.SessionState_SESSION_STATE_AUTHORIZED, "ops", timestamppb.Now()
			})
		}, want: []found{{"ses_pending", store.MismatchRecord}}},
		{name: "authorizer renamed", forge: func(kv store.KV) error {
			return editSession(kv, "ses_authorized", func(x *recordv1.Session) { x.AuthorizedBy = "cfo" })
		}, want: []found{{"ses_authorized", store.MismatchRecord}}},
		{name: "session deleted", forge: func(kv store.KV) error {
			return kv.Commit([]store.Write{{Key: []byte("S/ses_revoked"), Delete: true}})
		}, want: []found{{"ses_revoked", store.MismatchMissing}}},
	}
	for _, b := range storetest.Backends {
		for _, tt := range tests {
			t.Run(b.Name+"/"+tt.name, func(t *testing.T) {
				open := b.New(t)
				s := storetest.OpenStore(t, open())
				sessionStore(t, s)
				rep, err := s.CheckState(t.Context(), store.CheckAll)
				if err != nil || !rep.OK() || rep.Sessions != 3 {
					t.Fatalf("CheckState of an untouched store = %v, %v (sessions %d); want ok over 3 sessions", rep, err, rep.Sessions)
				}
				s = storetest.Reopen(t, s, open, tt.forge)
				rep, err = s.CheckState(t.Context(), store.CheckAll)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, summary(rep.Mismatches)); diff != "" {
					t.Errorf("CheckState(CheckAll) mismatches (-want +got):\n%s\n%s", diff, rep)
				}
				if err := rep.Err(); err == nil {
					t.Errorf("Err() = nil, want store.ErrStateMismatch")
				}
			})
		}
	}
}

// TestCheckSessionAgainstItsIndexedRecord: CheckSession (the session
// rule's check of an authorized session, through sj/) passes the sessions
// the store made and refuses each forgery; a store written before the
// index gets it from IndexSessions.
func TestCheckSessionAgainstItsIndexedRecord(t *testing.T) {
	for _, b := range storetest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			open := b.New(t)
			s := storetest.OpenStore(t, open())
			sessionStore(t, s)
			for _, id := range []string{"ses_pending", "ses_authorized", "ses_revoked"} {
				x, err := s.Session(id)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.CheckSession(x, nil); err != nil {
					t.Errorf("CheckSession(%s) = %v, want nil", id, err)
				}
			}
			revoked, err := s.Session("ses_revoked")
			if err != nil {
				t.Fatal(err)
			}
			flipped := proto.Clone(revoked).(*recordv1.Session)
			flipped.State, flipped.Reason = recordv1.SessionState_SESSION_STATE_AUTHORIZED, ""
			planted := &recordv1.Session{Id: "ses_planted", Actor: "mallory", State: recordv1.SessionState_SESSION_STATE_AUTHORIZED, AuthorizedBy: "ops"}
			s.Close()

			kv := open()
			authorizedAt, err := kv.Get([]byte("sj/ses_authorized"))
			if err != nil {
				t.Fatal(err)
			}
			if err := storetest.Put(kv, "S/ses_revoked", flipped); err != nil {
				t.Fatal(err)
			}
			if err := storetest.Put(kv, "S/ses_planted", planted); err != nil {
				t.Fatal(err)
			}
			kv.Close()
			s = storetest.OpenStore(t, open())
			for _, tt := range []struct {
				name string
				x    *recordv1.Session
				want []found
			}{
				{"revoked flipped to authorized", flipped, []found{{"ses_revoked", store.MismatchRecord}}},
				{"planted, no index entry", planted, []found{{"ses_planted", store.MismatchUnjournaled}}},
			} {
				err := s.CheckSession(tt.x, nil)
				var se *store.StateError
				if !errors.As(err, &se) {
					t.Errorf("CheckSession(%s) = %v, want a *store.StateError", tt.name, err)
					continue
				}
				if diff := cmp.Diff(tt.want, summary(se.Mismatches)); diff != "" {
					t.Errorf("CheckSession(%s) mismatches (-want +got):\n%s", tt.name, diff)
				}
			}
			s.Close()

			// The planted session's index entry names another session's
			// record.
			kv = open()
			if err := kv.Commit([]store.Write{{Key: []byte("sj/ses_planted"), Value: authorizedAt}}); err != nil {
				t.Fatal(err)
			}
			kv.Close()
			s = storetest.OpenStore(t, open())
			var se *store.StateError
			if err := s.CheckSession(planted, nil); !errors.As(err, &se) || se.Mismatches[0].Kind != store.MismatchUnjournaled {
				t.Errorf("CheckSession(planted, index naming another session's record) = %v, want unjournaled", err)
			}
			s.Close()

			// A store written before the index: no sj/, no marker.
			kv = open()
			var ws []store.Write
			for _, k := range []string{"sj/ses_pending", "sj/ses_authorized", "sj/ses_revoked", "sj/ses_planted", "m/sessions_indexed", "S/ses_planted"} {
				ws = append(ws, store.Write{Key: []byte(k), Delete: true})
			}
			if err := storetest.Put(kv, "S/ses_revoked", revoked); err != nil {
				t.Fatal(err)
			}
			if err := kv.Commit(ws); err != nil {
				t.Fatal(err)
			}
			kv.Close()
			s = storetest.OpenStore(t, open())
			defer s.Close()
			auth, err := s.Session("ses_authorized")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.CheckSession(auth, nil); !errors.Is(err, store.ErrSessionsNotIndexed) {
				t.Errorf("CheckSession before IndexSessions = %v, want ErrSessionsNotIndexed", err)
			}
			if n, err := s.IndexSessions(t.Context()); err != nil || n != 3 {
				t.Fatalf("IndexSessions = %d, %v, want 3 sessions", n, err)
			}
			if err := s.CheckSession(auth, nil); err != nil {
				t.Errorf("CheckSession after IndexSessions = %v, want nil", err)
			}
			if rep, err := s.CheckState(t.Context(), store.CheckAll); err != nil || !rep.OK() {
				t.Errorf("CheckState after IndexSessions = %v, %v, want ok", rep, err)
			}
		})
	}
}

// TestCheckAllLiveKeepsUpWithSessionsAndCatalogs: sessions started,
// authorized, revoked and seen, and catalogs loaded, while the live pass
// runs are not reported (they are looked at again with the journal records
// appended since).
func TestCheckAllLiveKeepsUpWithSessionsAndCatalogs(t *testing.T) {
	_, s := openBadger(t, t.TempDir())
	defer s.Close()
	build(t, s, 200, 7)
	done := make(chan error, 1)
	go func() {
		for i := range 300 {
			err := s.Update(context.Background(), func(tx *store.Tx) error {
				id := fmt.Sprintf("ses_%04d", i/3)
				x, err := tx.Session(id)
				switch {
				case err != nil:
					x = &recordv1.Session{Id: id, Actor: "agent", State: recordv1.SessionState_SESSION_STATE_PENDING}
					_, err = putSession(tx, x, "session_started")
				case i%3 == 1:
					x.State, x.AuthorizedBy = recordv1.SessionState_SESSION_STATE_AUTHORIZED, "ops"
					_, err = putSession(tx, x, "session_authorized")
				default:
					x.LastSeenAt = timestamppb.New(time.Unix(int64(i), 0))
					err = tx.PutSession(x)
				}
				if err != nil || i%50 != 0 {
					return err
				}
				_, err = putCatalog(tx, []byte(fmt.Sprintf("tools: {t%d: {}}", i)), "")
				return err
			})
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var werr error
	for n, writing := 0, true; writing || n < 5; n++ {
		select {
		case werr = <-done:
			writing = false
		default:
		}
		rep, err := s.CheckState(t.Context(), store.CheckAllLive)
		if err != nil || !rep.OK() {
			t.Fatalf("CheckState(CheckAllLive) while writing = %v, %v; want ok", rep, err)
		}
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if rep, err := s.CheckState(t.Context(), store.CheckAll); err != nil || !rep.OK() || rep.Sessions != 100 {
		t.Errorf("CheckState(CheckAll) after the writes = %v, %v (sessions %d); want ok over 100 sessions", rep, err, rep.Sessions)
	}
}
