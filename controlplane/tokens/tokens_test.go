package tokens

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newService(t *testing.T) (*Service, *store.Store, *clock) { return newServiceTB(t) }

func newServiceTB(t testing.TB) (*Service, *store.Store, *clock) {
	t.Helper()
	kv, err := badgerkv.Open(t.TempDir(), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	s, err := New(Config{Store: st, Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, st, c
}

// journalOf returns every journal entry, oldest first, and fails when one
// holds any of the secrets.
func journalOf(t *testing.T, st *store.Store, secrets ...string) []*recordv1.JournalEntry {
	t.Helper()
	var out []*recordv1.JournalEntry
	for i := range st.JournalSize() {
		b, err := st.JournalEntry(i)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("journal entry %d holds a secret", i)
			}
		}
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestCreateListRevokeAreJournaled(t *testing.T) {
	s, st, c := newService(t)
	ctx := t.Context()
	alice, ta, err := s.Create(ctx, "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	bob1, tb1, err := s.Create(ctx, "bob", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bob2, _, err := s.Create(ctx, "bob", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(alice, Prefix) || len(alice) != len(Prefix)+43 || ta.GetId() != "tok_"+Hash(alice)[:12] {
		t.Errorf("Create(alice) = %q, id %s; want latch_ + 43 base64url characters, id from the hash", alice, ta.GetId())
	}
	if got, want := tb1.GetExpiresAt().AsTime(), c.Now().Add(time.Hour); !got.Equal(want) {
		t.Errorf("Create(bob, 1h) expires %s, want %s", got, want)
	}
	for _, tt := range []struct {
		actor string
		ttl   time.Duration
		want  error
	}{{"", 0, ErrBadActor}, {"has space", 0, ErrBadActor}, {"-dash", 0, ErrBadActor}, {"ok", -time.Second, ErrBadTTL}, {"ok", MaxTTL + time.Hour, ErrBadTTL}} {
		if _, _, err := s.Create(ctx, tt.actor, tt.ttl); !errors.Is(err, tt.want) {
			t.Errorf("Create(%q, %s) = %v, want %v", tt.actor, tt.ttl, err, tt.want)
		}
	}

	ts, err := s.List(false)
	if err != nil || len(ts) != 3 {
		t.Fatalf("List = %d tokens, %v; want 3", len(ts), err)
	}
	for _, tk := range ts {
		if tk.GetSha256() == "" || tk.GetOrigin() != OriginAPI {
			t.Errorf("stored token %s has hash %q origin %q", tk.GetId(), tk.GetSha256(), tk.GetOrigin())
		}
	}

	revoked, err := s.Revoke(ctx, "bob", "ops")
	if err != nil || len(revoked) != 2 {
		t.Fatalf("Revoke(bob) = %d, %v; want both of bob's tokens", len(revoked), err)
	}
	if _, err := s.Revoke(ctx, "bob", "ops"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Revoke(bob) again = %v, want ErrNotFound", err)
	}
	if _, err := s.Revoke(ctx, ta.GetId(), ""); err != nil {
		t.Errorf("Revoke(alice's id) = %v", err)
	}
	if live, _ := s.List(false); len(live) != 0 {
		t.Errorf("List(live) after revoking all = %d tokens", len(live))
	}
	if all, _ := s.List(true); len(all) != 3 {
		t.Errorf("List(all) = %d tokens, want the 3 revoked ones kept", len(all))
	}

	type rec struct {
		Kind            recordv1.EntryKind
		Actor, ID, Hash string
	}
	var got []rec
	// The records carry the hashes of these generated tokens (they bind
	// each record to its token's whole hash), never the secrets.
	for _, e := range journalOf(t, st, alice, bob1, bob2) {
		got = append(got, rec{lifecycle.EntryKindOf(e), e.GetToken().GetActor(), e.GetToken().GetId(), e.GetToken().GetSha256()})
	}
	hashOf := map[string]string{}
	for _, secret := range []string{alice, bob1, bob2} {
		hashOf[idOf(Hash(secret))] = Hash(secret)
	}
	want := []rec{
		{KindCreated, "alice", ta.GetId(), Hash(alice)}, {KindCreated, "bob", tb1.GetId(), Hash(bob1)}, {KindCreated, "bob", got[2].ID, Hash(bob2)},
		{KindRevoked, "bob", got[3].ID, hashOf[got[3].ID]}, {KindRevoked, "bob", got[4].ID, hashOf[got[4].ID]}, {KindRevoked, "alice", ta.GetId(), Hash(alice)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
}

func TestAuthenticate(t *testing.T) {
	s, st, c := newService(t)
	ctx := t.Context()
	forever, tf, _ := s.Create(ctx, "alice", 0)
	hour, _, _ := s.Create(ctx, "bob", time.Hour)
	gone, _, _ := s.Create(ctx, "carol", 0)
	if _, err := s.Revoke(ctx, "carol", "ops"); err != nil {
		t.Fatal(err)
	}
	c.Add(2 * time.Hour)
	tests := []struct {
		name, cred, actor string
		err               error
	}{
		{"live", forever, "alice", nil},
		{"expired", hour, "", ErrExpired},
		{"revoked", gone, "", ErrRevoked},
		{"unknown", Prefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "", ErrInvalid},
		{"not a latch token", "eyJhbGciOi.x.y", "", ErrInvalid},
		{"empty", "", "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk, err := s.Authenticate(ctx, tt.cred)
			if !errors.Is(err, tt.err) || tk.GetActor() != tt.actor {
				t.Errorf("Authenticate = %v, %v; want actor %q, error %v", tk.GetActor(), err, tt.actor, tt.err)
			}
			if err != nil && (strings.Contains(err.Error(), tt.cred) && tt.cred != "") {
				t.Errorf("error %q repeats the credential", err)
			}
		})
	}
	if s.HasActor("bob") || s.HasActor("carol") || !s.HasActor("alice") {
		t.Errorf("HasActor: bob %v carol %v alice %v; want only alice (bob expired, carol revoked)", s.HasActor("bob"), s.HasActor("carol"), s.HasActor("alice"))
	}

	// last_used_at is coarse: set on first use, kept for a minute.
	first, _ := st.Token(tf.GetId())
	c.Add(30 * time.Second)
	if _, err := s.Authenticate(ctx, forever); err != nil {
		t.Fatal(err)
	}
	same, _ := st.Token(tf.GetId())
	if first.GetLastUsedAt() == nil || !same.GetLastUsedAt().AsTime().Equal(first.GetLastUsedAt().AsTime()) {
		t.Errorf("last_used_at %v then %v; want set on first use and unchanged 30s later", first.GetLastUsedAt(), same.GetLastUsedAt())
	}
	c.Add(time.Minute)
	if _, err := s.Authenticate(ctx, forever); err != nil {
		t.Fatal(err)
	}
	later, _ := st.Token(tf.GetId())
	if !later.GetLastUsedAt().AsTime().After(first.GetLastUsedAt().AsTime()) {
		t.Errorf("last_used_at %v after a minute and a half, want it moved past %v", later.GetLastUsedAt(), first.GetLastUsedAt())
	}
	size := st.JournalSize()
	for range 5 {
		s.Authenticate(ctx, forever)
	}
	if st.JournalSize() != size {
		t.Error("authenticating wrote journal entries")
	}
}

func TestMigrate(t *testing.T) {
	s, st, _ := newService(t)
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	const held = "latch_aTokenAnAgentStillHoldsFromTheFileStore0"
	sum := Hash(held)
	legacy := map[string]any{"tokens": []map[string]string{{"id": "tok_" + sum[:12], "actor": "alice", "sha256": sum, "created_at": "2026-01-02T03:04:05Z"}}}
	b, _ := json.Marshal(legacy)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := s.Migrate(ctx, path)
	if err != nil || n != 1 {
		t.Fatalf("Migrate = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(path + MigratedSuffix); err != nil {
		t.Errorf("the file was not renamed: %v", err)
	}
	tk, err := s.Authenticate(ctx, held)
	if err != nil || tk.GetActor() != "alice" || tk.GetId() != "tok_"+sum[:12] || tk.GetOrigin() != OriginTokensJSON {
		t.Errorf("Authenticate(migrated) = %v, %v; want alice with the same id, origin tokens.json", tk, err)
	}
	if n, err := s.Migrate(ctx, path); n != 0 || err != nil {
		t.Errorf("Migrate without the file = %d, %v; want nothing to do", n, err)
	}
	// A crash between the commit and the rename: the file comes back; the
	// token is not imported twice.
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Migrate(ctx, path); n != 0 || err != nil {
		t.Errorf("Migrate of an already imported file = %d, %v; want 0 imported, no error", n, err)
	}
	var kinds []string
	for _, e := range journalOf(t, st, held, sum) {
		kinds = append(kinds, lifecycle.EntryKindNameOf(e)+":"+e.GetToken().GetActor())
	}
	if diff := cmp.Diff([]string{lifecycle.EntryKindName(KindMigrated) + ":alice"}, kinds); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}

	for name, body := range map[string]string{
		"not json":       "{",
		"unknown field":  `{"tokens": [], "extra": 1}`,
		"bad hash":       `{"tokens": [{"id": "tok_x", "actor": "a", "sha256": "zz"}]}`,
		"bad actor name": `{"tokens": [{"id": "tok_x", "actor": "a b", "sha256": "` + sum + `"}]}`,
	} {
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := s.Migrate(ctx, p); !errors.Is(err, ErrBadFile) {
			t.Errorf("Migrate(%s) = %v, want ErrBadFile", name, err)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Migrate(%s) moved the bad file: %v", name, err)
		}
	}
}

// TestOperatorTokensAreTheirOwnKind: an operator token signs an operator in
// and never authenticates an agent, an agent token never signs an operator
// in, and listing, revoking and HasActor keep the kinds apart even when an
// agent and an operator share a name.
func TestOperatorTokensAreTheirOwnKind(t *testing.T) {
	s, st, _ := newService(t)
	ctx := t.Context()
	agentTok, _, err := s.Create(ctx, "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	opTok, op, err := s.CreateOperator(ctx, "alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(opTok, OperatorPrefix) || !op.GetOperator() {
		t.Fatalf("CreateOperator = %q, %v; want a %s token marked operator", opTok, op, OperatorPrefix)
	}
	if _, err := s.Authenticate(ctx, opTok); !errors.Is(err, ErrInvalid) {
		t.Errorf("Authenticate(operator token) = %v, want ErrInvalid", err)
	}
	if _, err := s.AuthenticateOperator(ctx, agentTok); !errors.Is(err, ErrInvalid) {
		t.Errorf("AuthenticateOperator(agent token) = %v, want ErrInvalid", err)
	}
	got, err := s.AuthenticateOperator(ctx, opTok)
	if err != nil || got.GetActor() != "alice" || !got.GetOperator() {
		t.Fatalf("AuthenticateOperator = %v, %v; want operator alice", got, err)
	}
	agents, _ := s.List(false)
	ops, _ := s.ListOperators(false)
	if len(agents) != 1 || agents[0].GetOperator() || len(ops) != 1 || ops[0].GetId() != op.GetId() {
		t.Errorf("List = %v, ListOperators = %v; want one of each kind", agents, ops)
	}
	if revoked, err := s.RevokeOperator(ctx, "alice", "test"); err != nil || len(revoked) != 1 || revoked[0].GetId() != op.GetId() {
		t.Fatalf("RevokeOperator(alice) = %v, %v; want only the operator token", revoked, err)
	}
	if _, err := s.Authenticate(ctx, agentTok); err != nil {
		t.Errorf("the agent token stopped working after its namesake operator's was revoked: %v", err)
	}
	if _, err := s.AuthenticateOperator(ctx, opTok); !errors.Is(err, ErrRevoked) {
		t.Errorf("AuthenticateOperator(revoked) = %v, want ErrRevoked", err)
	}
	s2, _ := New(Config{Store: st})
	if _, _, err := s2.CreateOperator(ctx, "bob", 0); err != nil {
		t.Fatal(err)
	}
	if s2.HasActor("bob") {
		t.Error("HasActor(bob) = true for an operator token, want false: operators are not agents")
	}
	var kinds []string
	for _, e := range journalOf(t, st, agentTok, opTok) {
		if e.GetToken().GetOperator() {
			kinds = append(kinds, lifecycle.EntryKindNameOf(e)+" "+e.GetToken().GetActor())
		}
	}
	if diff := cmp.Diff([]string{"token_created alice", "token_revoked alice", "token_created bob"}, kinds); diff != "" {
		t.Errorf("operator token journal records (-want +got):\n%s", diff)
	}
}

// TestStoredTokenCheckedAtFirstUse: a control plane restarted on a store
// holding a token written by hand (record and hash index, no journal
// record) refuses it at its first use with a state mismatch (not "invalid
// credential": the store disagrees with its journal) and reports it
// (Failed, Mismatches); the tokens it made before authenticate at once,
// the operator token too, and a refused token stays refused.
func TestStoredTokenCheckedAtFirstUse(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Service, *store.Store) {
		t.Helper()
		kv, err := badgerkv.Open(dir, badgerkv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.New(store.Config{KV: kv})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		return s, st
	}
	s, st := open()
	agent, _, err := s.Create(t.Context(), "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := s.CreateOperator(t.Context(), "olga", 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	const planted = Prefix + "planted-by-hand"
	sum := Hash(planted)
	kv, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := proto.Marshal(&recordv1.AgentToken{Id: idOf(sum), Actor: "mallory", Sha256: sum, Origin: OriginAPI})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]store.Write{{Key: []byte("t/" + idOf(sum)), Value: v}, {Key: []byte("h/" + sum), Value: []byte(idOf(sum))}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	s, st = open()
	defer st.Close()
	if tk, err := s.Authenticate(t.Context(), agent); err != nil || tk.GetActor() != "alice" {
		t.Errorf("Authenticate(alice's token, made before the restart) = %v, %v; want alice", tk, err)
	}
	if tk, err := s.AuthenticateOperator(t.Context(), op); err != nil || tk.GetActor() != "olga" {
		t.Errorf("AuthenticateOperator(olga's token) = %v, %v; want olga", tk, err)
	}
	select {
	case <-s.Failed():
		t.Fatalf("Failed closed on sound tokens: %v", s.Mismatches())
	default:
	}
	for range 2 {
		tk, err := s.Authenticate(t.Context(), planted)
		if !errors.Is(err, store.ErrStateMismatch) || tk != nil {
			t.Errorf("Authenticate(planted) = %v, %v; want no token and an error matching store.ErrStateMismatch", tk, err)
		}
	}
	select {
	case <-s.Failed():
	default:
		t.Errorf("Failed not closed after a planted token was refused")
	}
	ms := s.Mismatches()
	if len(ms) == 0 || ms[0].ExecutionID != idOf(sum) || ms[0].Kind != store.MismatchUnjournaled {
		t.Errorf("Mismatches = %v, want the planted token %s, unjournaled", ms, idOf(sum))
	}
	// A planted token makes no actor known to the policy either (checking
	// it there reports it the same way).
	if s.HasActor("mallory") {
		t.Errorf("HasActor(mallory) = true on a planted token alone, want false")
	}
	if !s.HasActor("alice") {
		t.Errorf("HasActor(alice) = false, want true (her token agrees with its journal record)")
	}
}

// TestInvisibleActorNames: a token (agent or operator), an imported
// tokens.json token and a static credential cannot carry an actor name
// with invisible characters or in a non-NFC form; the error says why.
func TestInvisibleActorNames(t *testing.T) {
	s, _, _ := newService(t)
	ctx := t.Context()
	dir := t.TempDir()
	sum := Hash("latch_x")
	for i, tt := range []struct{ name, why string }{
		{"dev\u200b", "U+200B"}, {"dev\u00a0", "U+00A0"}, {"a\u202eb", "U+202E"}, {"\u0085x", "U+0085"}, {"e\u0301", "NFC"},
	} {
		if _, _, err := s.Create(ctx, tt.name, 0); !errors.Is(err, ErrBadActor) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("Create(%q) = %v, want ErrBadActor naming %s", tt.name, err, tt.why)
		}
		if _, _, err := s.CreateOperator(ctx, tt.name, 0); !errors.Is(err, ErrBadActor) {
			t.Errorf("CreateOperator(%q) = %v, want ErrBadActor", tt.name, err)
		}
		b, _ := json.Marshal(map[string]any{"tokens": []map[string]string{{"id": "tok_x", "actor": tt.name, "sha256": sum}}})
		p := filepath.Join(dir, fmt.Sprintf("t%d.json", i))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Migrate(ctx, p); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("Migrate(actor %q) = %v, want ErrBadFile naming %s", tt.name, err, tt.why)
		}
		if _, err := New(Config{Store: s.st, Static: []Static{{Credential: "latch_s", Actor: tt.name, ID: "dev"}}}); !errors.Is(err, ErrBadActor) {
			t.Errorf("New(static actor %q) = %v, want ErrBadActor", tt.name, err)
		}
	}
}
