package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/internal/testing/storetest"
	"github.com/latchhq/latch/internal/testing/testbin"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const stateCatalog = `
targets:
  api: {channel: http, base_url: "http://127.0.0.1:1", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  deploy:
    description: Deploy.
    input_schema: {type: object, required: [version], properties: {version: {type: string}}}
    target: api
    request: {method: POST, path: /deploy, body: {version: "{{version}}"}}
    replay: idempotency_key
    attach_window: 1h
`

// answering is a channel whose target always answers 201.
type answering struct{}

func (answering) Dispatch(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED,
		Result: &recordv1.Result{Status: 201, Body: []byte(`{"ok":true}`)}, Reason: "201"}
}

func (answering) Query(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Unsupported, Reason: "no status endpoint"}
}

func (answering) Identity(_ *tools.Tool, t *tools.Target) engine.Identity {
	return engine.Identity{Target: t.BaseURL}
}

func stateConfig(t testing.TB, data string, fullUpTo int64) Config {
	if _, err := tools.Parse("c.yaml", []byte(stateCatalog)); err != nil {
		t.Fatal(err)
	}
	return Config{DataDir: data, CatalogSource: catalog.Bytes("c.yaml", []byte(stateCatalog)), Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: answering{}},
		FullStateCheckUpTo: fullUpTo}
}

// TestStateCheckAtStartAndInTheBackground: a forged result of a settled
// execution stops New when start-up checks all state, and, when start-up
// checks only the unsettled executions (a large store), stops Run through
// the background pass; both name the execution and the command to run.
func TestStateCheckAtStartAndInTheBackground(t *testing.T) {
	data := t.TempDir()
	srv, err := New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	r, err := srv.Engine.Submit(ctx, engine.SubmitInput{Actor: "alice", Tool: "deploy", Arguments: []byte(`{"version":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Execution.GetId()
	testbin.Eventually(t, "execution "+id+" to complete", func() bool {
		x, err := srv.Store.Execution(id)
		return err == nil && x.GetState() == recordv1.State_STATE_COMPLETED
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.Forge(kv, storetest.ResultBody, id, ""); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	wantIn := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "latch audit verify "+data) {
			t.Errorf("%s = %v, want ErrStateMismatch naming %s and `latch audit verify %s`", what, err, id, data)
		}
	}
	_, err = New(stateConfig(t, data, 0))
	wantIn("New on a forged small store", err)

	srv, err = New(stateConfig(t, data, -1))
	if err != nil {
		t.Fatalf("New with the unsettled start-up scope: %v (the forged execution is settled: the background pass finds it)", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wantIn("Run with the background pass", srv.Run(ctx))
}

// TestPlantedTokenRefusedAtStart: a token written into a stopped store by
// hand (record and hash index, no journal record) stops New, naming the
// token; a token the control plane made passes.
func TestPlantedTokenRefusedAtStart(t *testing.T) {
	data := t.TempDir()
	srv, err := New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Tokens.Create(context.Background(), "alice", 0); err != nil {
		t.Fatal(err)
	}
	runAndStop(t, srv)
	srv, err = New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatalf("New with a token the control plane made: %v", err)
	}
	srv.Store.Close()

	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	planted := "tok_" + sum[:12]
	v, err := proto.Marshal(&recordv1.AgentToken{Id: planted, Actor: "mallory", Sha256: sum, Origin: "api", CreatedAt: timestamppb.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]store.Write{{Key: []byte("t/" + planted), Value: v}, {Key: []byte("h/" + sum), Value: []byte(planted)}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()
	_, err = New(stateConfig(t, data, 0))
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), planted) {
		t.Errorf("New with a planted token = %v, want ErrStateMismatch naming %s", err, planted)
	}
}

// plantToken writes a token of secret into the stopped store of data by
// hand: its record and hash index, and, with forgeAt >= 0, a journal
// record carrying it in place of journal record forgeAt (one no state
// depends on) and the token journal index entry naming it. It returns the
// token's id.
func plantToken(t *testing.T, kv store.KV, secret string, forgeAt int64) string {
	t.Helper()
	sum := tokens.Hash(secret)
	id := "tok_" + sum[:12]
	tk := &recordv1.AgentToken{Id: id, Actor: "mallory", Sha256: sum, Origin: "api", CreatedAt: timestamppb.New(time.Now().Truncate(time.Second))}
	v, err := proto.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	ws := []store.Write{{Key: []byte("t/" + id), Value: v}, {Key: []byte("h/" + sum), Value: []byte(id)}}
	if forgeAt >= 0 {
		key := fmt.Appendf(nil, "j/%016x", forgeAt)
		leaf, err := kv.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		j := proto.Clone(tk).(*recordv1.AgentToken)
		j.Sha256 = ""
		data, err := journal.EncodeEntry(&recordv1.JournalEntry{Index: uint64(forgeAt), EntryKind: tokens.KindCreated, Actor: "mallory", Token: j})
		if err != nil {
			t.Fatal(err)
		}
		// The stored hashes the leaf completed stay: only the record changes.
		ws = append(ws, store.Write{Key: key, Value: append(append([]byte(nil), leaf[:1+int(leaf[0])*32]...), data...)},
			store.Write{Key: []byte("tj/" + id), Value: binary.BigEndian.AppendUint64(nil, uint64(forgeAt))})
	}
	if err := kv.Commit(ws); err != nil {
		t.Fatal(err)
	}
	return id
}

// madeToken runs a control plane on a new data dir once, creating alice's
// token, and stops it (signing its final checkpoint); it returns the token.
func madeToken(t *testing.T, data string) string {
	t.Helper()
	srv, err := New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := srv.Tokens.Create(context.Background(), "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	runAndStop(t, srv)
	return secret
}

// TestPlantedTokenRefusedAtFirstUseOnALargeStore: on a store large enough
// that start-up serves before the full check (FullStateCheckUpTo -1, as
// past store.SmallStore journal records), a token written by hand into the
// stopped store stops New (the start-up index check finds a stored token
// no journal record vouches for: not served from), naming it; a token
// written into the running store (another writer of its database) is
// refused at its first use, before the background pass reaches it, and Run
// stops with ErrStateMismatch naming it, while the token the control plane
// made authenticates at once. The offline full check (what `latch audit
// verify` runs) reports the planted token.
func TestPlantedTokenRefusedAtFirstUseOnALargeStore(t *testing.T) {
	data := t.TempDir()
	sound := madeToken(t, data)
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const stopped = tokens.Prefix + "planted-in-a-stopped-store"
	sid := plantToken(t, kv, stopped, -1)
	kv.Close()
	if srv, err := New(stateConfig(t, data, -1)); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), sid) {
		if err == nil {
			srv.Close()
		}
		t.Fatalf("New with a token planted in the stopped store = %v; want ErrStateMismatch naming %s", err, sid)
	}
	kv, err = badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]store.Write{{Key: []byte("t/" + sid), Delete: true}, {Key: []byte("h/" + tokens.Hash(stopped)), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	srv, err := New(stateConfig(t, data, -1))
	if err != nil {
		t.Fatalf("New on a large store = %v; it serves first and checks while serving", err)
	}
	const planted = tokens.Prefix + "planted-in-the-running-store"
	id := plantToken(t, srv.kv, planted, -1)
	if tk, err := srv.Tokens.Authenticate(context.Background(), sound); err != nil || tk.GetActor() != "alice" {
		t.Errorf("Authenticate(the token the control plane made) = %v, %v; want alice", tk, err)
	}
	if tk, err := srv.Tokens.Authenticate(context.Background(), planted); !errors.Is(err, store.ErrStateMismatch) || tk != nil {
		t.Errorf("Authenticate(planted) = %v, %v; want no token and a state mismatch", tk, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Run(ctx); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), id) {
		t.Errorf("Run = %v, want ErrStateMismatch naming %s", err, id)
	}

	kv, err = badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := st.CheckState(context.Background(), store.CheckAll)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Mismatches) != 1 || rep.Mismatches[0].ExecutionID != id || rep.Mismatches[0].Kind != store.MismatchUnjournaled {
		t.Errorf("the full check = %s; want one mismatch: %s unjournaled", rep, id)
	}
}

// TestStoreBeforeTheTokenIndexServesAtOnce: a data dir written before the
// token journal index (no tj/, no marker) starts without reading its
// journal first; until the index is built while serving, a stored token
// is not authenticated (its first use waits, here with a context already
// done, and no mismatch is reported); once Run has built it, the token
// authenticates, and the next start finds the index built.
func TestStoreBeforeTheTokenIndexServesAtOnce(t *testing.T) {
	data := t.TempDir()
	sound := madeToken(t, data)
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws := []store.Write{{Key: []byte("m/tokens_indexed"), Delete: true}}
	if err := kv.Scan([]byte("tj/"), false, func(k, _ []byte) bool {
		ws = append(ws, store.Write{Key: append([]byte(nil), k...), Delete: true})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(ws) < 2 {
		t.Fatalf("the store holds no token journal index entry to remove")
	}
	if err := kv.Commit(ws); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	srv, err := New(stateConfig(t, data, -1))
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if tk, err := srv.Tokens.Authenticate(done, sound); err == nil || errors.Is(err, store.ErrStateMismatch) || tk != nil {
		t.Errorf("Authenticate before the index is built = %v, %v; want it not authenticated, and no mismatch", tk, err)
	}
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	if tk, err := srv.Tokens.Authenticate(ctx, sound); err != nil || tk.GetActor() != "alice" {
		t.Errorf("Authenticate while serving = %v, %v; want alice once the index is built", tk, err)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	srv, err = New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Store.Close()
	if srv.tokenIndexReady != nil {
		t.Errorf("the next start found the token index not built")
	}
}

// TestForgedTokenRecordRefusedByTheCheckpoint: a token planted with a
// journal record forged in place of a checkpointed one (and the index
// naming it) agrees with the state check, which trusts journal leaves as
// stored: a small store starts. Its first use proves the record against
// the newest signed checkpoint, which refuses it, and Run stops.
func TestForgedTokenRecordRefusedByTheCheckpoint(t *testing.T) {
	data := t.TempDir()
	sound := madeToken(t, data)
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := freeRecord(t, kv)
	const planted = tokens.Prefix + "planted-with-a-forged-record"
	id := plantToken(t, kv, planted, at)
	kv.Close()

	srv, err := New(stateConfig(t, data, 0))
	if err != nil {
		t.Fatalf("New = %v; the state check trusts journal leaves as stored, so it starts", err)
	}
	if _, err := srv.Tokens.Authenticate(context.Background(), sound); err != nil {
		t.Errorf("Authenticate(the token the control plane made) = %v", err)
	}
	tk, err := srv.Tokens.Authenticate(context.Background(), planted)
	if !errors.Is(err, store.ErrStateMismatch) || tk != nil || !strings.Contains(err.Error(), string(store.MismatchProof)) {
		t.Errorf("Authenticate(planted with a forged record) = %v, %v; want a %s state mismatch", tk, err, store.MismatchProof)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Run(ctx); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "the token was refused") {
		t.Errorf("Run = %v, want ErrStateMismatch naming %s, the token refused", err, id)
	}
}

// TestCheckpointCopyAnchorsTheTokenCheck: a token planted with a journal
// record forged in place of a checkpointed one, and every checkpoint
// deleted from the store, leaves the first-use check nothing in the store
// to prove the record against: with a checkpoint copy kept outside the
// data dir, the copy's newest checkpoint refuses it; without one it
// authenticates (the gap docs/how-to/audit.md names, which `latch audit verify`
// closes with the copy).
func TestCheckpointCopyAnchorsTheTokenCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		copied  bool
		refused bool
	}{{"with a checkpoint copy", true, true}, {"without one", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			data, cfg, srv := runWithCopy(t)
			kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ws := []store.Write{}
			if err := kv.Scan([]byte("c/"), false, func(k, _ []byte) bool {
				ws = append(ws, store.Write{Key: append([]byte(nil), k...), Delete: true})
				return true
			}); err != nil {
				t.Fatal(err)
			}
			at := freeRecord(t, kv)
			if len(ws) == 0 {
				t.Fatal("no checkpoint to delete")
			}
			if err := kv.Commit(ws); err != nil {
				t.Fatal(err)
			}
			const planted = tokens.Prefix + "planted-checkpoints-deleted"
			plantToken(t, kv, planted, at)
			kv.Close()

			copyPath := srv.cfg.CheckpointCopy
			cfg = stateConfig(t, data, 0)
			if tc.copied {
				cfg.CheckpointCopy = copyPath
			}
			srv, err = New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Store.Close()
			tk, err := srv.Tokens.Authenticate(context.Background(), planted)
			switch {
			case tc.refused && (!errors.Is(err, store.ErrStateMismatch) || !strings.Contains(err.Error(), string(store.MismatchProof))):
				t.Errorf("Authenticate(planted) = %v, %v; want a %s state mismatch against the copy's checkpoint", tk, err, store.MismatchProof)
			case !tc.refused && (err != nil || tk.GetActor() != "mallory"):
				t.Errorf("Authenticate(planted) without a copy = %v, %v; want mallory (the gap this test shows the copy closes)", tk, err)
			}
		})
	}
}

// TestCheckpointCopyFailsClosed: a checkpoint copy that the journal does
// not agree with stops New (ErrCheckpointCopy, naming the copy and what to
// do) instead of being ignored: one signed with another key (the data
// dir's key swapped), one covering more than the journal holds (truncated),
// and one whose last lines are not checkpoints. A torn last line (a crash
// mid-append) is skipped for the line before it.
func TestCheckpointCopyFailsClosed(t *testing.T) {
	other, _, err := journal.GenerateKey("latch.test/other")
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := journal.NewSigner(other)
	if err != nil {
		t.Fatal(err)
	}
	line := func(note []byte) string {
		b, _ := json.Marshal(map[string]string{"type": "checkpoint", "note": string(note)})
		return string(b) + "\n"
	}
	tests := []struct {
		name  string
		extra func(srv *Server) string // appended to the copy after a clean run
		ok    bool
		want  string
	}{
		{name: "sound", extra: func(*Server) string { return "" }, ok: true},
		{name: "a torn last line", extra: func(*Server) string { return `{"type":"checkpoint","no` }, ok: true},
		{name: "signed with another key", extra: func(srv *Server) string {
			note, err := otherSigner.Sign(1, tlog.Hash{}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return line(note)
		}, want: "does not verify with the journal's key"},
		{name: "covers more than the journal", extra: func(srv *Server) string {
			note, err := srv.signer.Sign(srv.Store.JournalSize()+100, tlog.Hash{}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return line(note)
		}, want: "the store holds"},
		{name: "not checkpoints", extra: func(*Server) string { return "{}\n{}\n" }, want: "are not checkpoints"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, cfg, srv := runWithCopy(t)
			// The clean shutdown copied its final checkpoint.
			if b, err := os.ReadFile(cfg.CheckpointCopy); err != nil || !strings.Contains(string(b), `"checkpoint"`) {
				t.Fatalf("checkpoint copy after a clean run = %q, %v; want a checkpoint", b, err)
			}
			f, err := os.OpenFile(cfg.CheckpointCopy, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(tc.extra(srv)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			again := stateConfig(t, data, 0)
			again.CheckpointCopy = cfg.CheckpointCopy
			srv2, err := New(again)
			if tc.ok {
				if err != nil {
					t.Fatalf("New = %v, want it to start", err)
				}
				srv2.Close()
				return
			}
			if err == nil {
				srv2.Close()
				t.Fatal("New started with a checkpoint copy the journal disagrees with")
			}
			if !errors.Is(err, ErrCheckpointCopy) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), cfg.CheckpointCopy) || !strings.Contains(err.Error(), "latch audit verify") {
				t.Errorf("New = %v; want ErrCheckpointCopy naming the copy, %q and `latch audit verify`", err, tc.want)
			}
		})
	}
}

// runAndStop runs srv and stops it at once (a clean shutdown: the final
// checkpoint is signed and copied), failing the test if Run fails.
func runAndStop(t *testing.T, srv *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// runWithCopy runs a control plane on a fresh data dir with a checkpoint
// copy and stops it cleanly; it returns the data dir, the config and the
// stopped server.
func runWithCopy(t *testing.T) (string, Config, *Server) {
	t.Helper()
	data := t.TempDir()
	cfg := stateConfig(t, data, 0)
	cfg.CheckpointCopy = filepath.Join(t.TempDir(), "checkpoints.jsonl")
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runAndStop(t, srv)
	return data, cfg, srv
}

// freeRecord is the index of a journal record no state depends on (no
// execution, token or session): one a test can forge a token record in
// place of. A catalog_loaded record is made free first: the record of the
// catalog in force and its source, which the state check holds against it,
// are deleted (the next start records the catalog again).
func freeRecord(t *testing.T, kv store.KV) int64 {
	t.Helper()
	at := int64(-1)
	var cat *recordv1.CatalogVersion
	if err := kv.Scan([]byte("j/"), false, func(k, v []byte) bool {
		e := &recordv1.JournalEntry{}
		if proto.Unmarshal(v[1+int(v[0])*32:], e) == nil && e.GetExecutionId() == "" && e.GetToken() == nil && e.GetSession() == nil && e.GetSecret() == nil {
			at, cat = int64(e.GetIndex()), e.GetCatalog()
			return false
		}
		return true
	}); err != nil || at < 0 {
		t.Fatalf("no journal record without execution, token, session and secret row to forge (%v)", err)
	}
	if cat != nil {
		if err := kv.Commit([]store.Write{{Key: []byte("m/catalog"), Delete: true}, {Key: []byte("k/" + cat.GetVersion()), Delete: true}}); err != nil {
			t.Fatal(err)
		}
	}
	return at
}
