package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestServeOwnsTokensAndCatalog runs `latch serve` as a process: a
// tokens.json left by an earlier version is imported once; tokens are
// created, listed and revoked through the API and authenticate agents
// (Submit takes the actor from the token); the catalog is versioned, a bad
// reload changes nothing and names file:line, a good one (latch catalog
// reload, SIGHUP) is served at once; every step is in the journal, no token
// or token hash is.
func TestServeOwnsTokensAndCatalog(t *testing.T) {
	_, url := newTarget(t)
	data := t.TempDir()
	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	both := fmt.Sprintf(e2eCatalog, url, url)
	deployOnly := both[:strings.Index(both, "  create_ticket:")]
	deployOnly = strings.Replace(deployOnly, "  tickets:\n    channel: http\n    base_url: "+url+"\n    allow_private: true\n    idempotency_header: Idempotency-Key\n    status: {method: GET, path: \"/v1/tickets/by-key/{execution_id}\"}\n", "", 1)
	writeCatalog := func(s string) {
		t.Helper()
		if err := os.WriteFile(catalog, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCatalog(deployOnly)

	// A tokens.json of the file-based store, with one token an agent holds.
	const legacy = "latch_legacyTokenHeldByAnAgentOfTheOldVersion0123"
	sum := sha256.Sum256([]byte(legacy))
	hexSum := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	tj := fmt.Sprintf(`{"tokens": [{"id": "tok_%s", "actor": "olda", "sha256": "%s", "created_at": "2026-01-02T03:04:05Z"}]}`, hexSum[:12], hexSum)
	if err := os.WriteFile(filepath.Join(data, "tokens.json"), []byte(tj), 0o600); err != nil {
		t.Fatal(err)
	}

	p := startServe(t, data, catalog)
	c := client(t, data)
	ctx := t.Context()
	if _, err := os.Stat(filepath.Join(data, "tokens.json")); !os.IsNotExist(err) {
		t.Errorf("tokens.json still there after start (stat: %v), want it renamed", err)
	}
	if _, err := os.Stat(filepath.Join(data, "tokens.json.migrated")); err != nil {
		t.Errorf("tokens.json.migrated: %v", err)
	}
	if a, err := c.AuthenticateAgent(ctx, &controlplanev1.AuthenticateAgentRequest{Credential: legacy}); err != nil || a.GetActor() != "olda" {
		t.Fatalf("AuthenticateAgent(migrated token) = %v, %v; want actor olda", a, err)
	}

	out, code := runCLI(t, "token", "create", "bob", "--ttl", "1h", "--data", data)
	if code != 0 {
		t.Fatalf("token create = %d: %s", code, out)
	}
	bob := strings.TrimSpace(strings.Split(out, "\n")[0])
	if !strings.HasPrefix(bob, "latch_") || !strings.Contains(out, "expires ") {
		t.Fatalf("token create printed %q; want the token on the first line and its expiry", out)
	}
	out, code = runCLI(t, "token", "list", "--data", data)
	if code != 0 || !strings.Contains(out, "bob") || !strings.Contains(out, "olda") || !strings.Contains(out, "tokens.json") {
		t.Fatalf("token list = %d:\n%s\nwant bob and the migrated olda", code, out)
	}
	if strings.Contains(out, bob) || strings.Contains(out, hexSum) {
		t.Errorf("token list shows a token or its hash:\n%s", out)
	}
	// An operator token made on the socket says a local operator made it.
	if out, code := runCLI(t, "operator", "token", "create", "root", "--data", data); code != 0 {
		t.Fatalf("operator token create root on the socket = %d:\n%s", code, out)
	}
	out, code = runCLI(t, "operator", "token", "list", "--data", data)
	if code != 0 || !strings.Contains(out, "CREATED BY") || !strings.Contains(out, "local operator uid:") || !strings.Contains(out, "(unix)") {
		t.Errorf("operator token list = %d:\n%s\nwant root's token created by a local operator over unix", code, out)
	}
	out, code = runCLI(t, "token", "list", "--json", "--data", data)
	if code != 0 || !strings.Contains(out, `"actor":"bob"`) || strings.Contains(out, bob) || strings.Contains(out, hexSum) {
		t.Errorf("token list --json = %d:\n%s\nwant a JSON line with actor bob and neither the token nor its hash", code, out)
	}

	tools, err := c.ListTools(ctx, &controlplanev1.ListToolsRequest{})
	if err != nil || len(tools.GetTools()) != 1 || !strings.HasPrefix(tools.GetCatalogVersion(), "sha256:") {
		t.Fatalf("ListTools = %v, %v; want deploy_release under a sha256 version", tools, err)
	}
	v1 := tools.GetCatalogVersion()

	// Submit: the actor is the token's, whatever the request says.
	sub, err := c.Submit(ctx, &controlplanev1.SubmitRequest{Credential: bob, Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"1"}`)})
	if err != nil {
		t.Fatalf("Submit with bob's token: %v", err)
	}
	if x := sub.GetExecution(); x.GetActor() != "bob" || x.GetCatalogVersion() != v1 || x.GetEvidence().GetTokenId() == "" {
		t.Errorf("execution actor %q catalog %q token %q; want bob, %s and bob's token id", x.GetActor(), x.GetCatalogVersion(), x.GetEvidence().GetTokenId(), v1)
	}
	if _, err := c.Submit(ctx, &controlplanev1.SubmitRequest{Credential: bob, Actor: "alice", Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"2"}`)}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Submit with bob's token as alice = %v, want PermissionDenied", err)
	}

	out, code = runCLI(t, "token", "revoke", "bob", "--data", data)
	if code != 0 || !strings.Contains(out, "revoked 1 token") {
		t.Fatalf("token revoke = %d: %s", code, out)
	}
	if _, err := c.AuthenticateAgent(ctx, &controlplanev1.AuthenticateAgentRequest{Credential: bob}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("AuthenticateAgent(revoked) = %v, want Unauthenticated", err)
	}
	if _, err := c.Submit(ctx, &controlplanev1.SubmitRequest{Credential: bob, Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"3"}`)}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Submit with a revoked token = %v, want Unauthenticated", err)
	}

	// A bad catalog changes nothing and says where it is wrong.
	writeCatalog(both + "  broken_tool:\n    target: nowhere\n    replay: sometimes\n")
	out, code = runCLI(t, "catalog", "reload", "--data", data)
	if code == 0 || !strings.Contains(out, catalog+":") || !strings.Contains(out, "nothing changed") {
		t.Errorf("catalog reload of a bad catalog = %d:\n%s\nwant a failure listing %s:LINE problems", code, out, catalog)
	}
	if now, err := c.ListTools(ctx, &controlplanev1.ListToolsRequest{}); err != nil || now.GetCatalogVersion() != v1 || len(now.GetTools()) != 1 {
		t.Errorf("after a refused reload ListTools = %v, %v; want version %s unchanged", now, err, v1)
	}

	writeCatalog(both)
	out, code = runCLI(t, "catalog", "reload", "--data", data)
	if code != 0 || !strings.Contains(out, "in force") {
		t.Fatalf("catalog reload = %d: %s", code, out)
	}
	now, err := c.ListTools(ctx, &controlplanev1.ListToolsRequest{KnownVersion: v1})
	if err != nil || now.GetUnchanged() || len(now.GetTools()) != 2 {
		t.Fatalf("after reload ListTools = %v, %v; want both tools under a new version", now, err)
	}
	v2 := now.GetCatalogVersion()
	out, _ = runCLI(t, "catalog", "reload", "--data", data)
	if !strings.Contains(out, "unchanged") {
		t.Errorf("reload of the same file = %q, want unchanged", out)
	}

	writeCatalog(deployOnly)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the SIGHUP reload", func() bool {
		r, err := c.ListTools(ctx, &controlplanev1.ListToolsRequest{})
		return err == nil && r.GetCatalogVersion() == v1
	})

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("latch serve exit: %v", err)
	}
	kinds := journalKinds(t, data, func(raw []byte) {
		if strings.Contains(string(raw), bob) || strings.Contains(string(raw), legacy) || strings.Contains(string(raw), hexSum) {
			t.Error("a journal record holds a token or a token hash")
		}
	})
	want := map[string]int{"token_migrated": 1, "token_created": 2, "token_revoked": 1, "catalog_loaded": 3}
	for k, n := range want {
		if len(kinds[k]) != n {
			t.Errorf("journal has %d %s records, want %d", len(kinds[k]), k, n)
		}
	}
	triggers := []string{}
	for _, e := range kinds["catalog_loaded"] {
		triggers = append(triggers, e.GetCatalog().GetTrigger()+":"+e.GetCatalog().GetVersion())
	}
	if w := []string{"start:" + v1, "reload:" + v2, "sighup:" + v1}; strings.Join(triggers, " ") != strings.Join(w, " ") {
		t.Errorf("catalog_loaded records %v, want %v", triggers, w)
	}
	for _, e := range kinds["token_created"] {
		tk := e.GetToken()
		if tk.GetOperator() {
			// root's console token, made on the socket: the record says a
			// local operator made it.
			if tk.GetActor() != "root" || !strings.HasPrefix(tk.GetCreatedBy(), "local operator uid:") || tk.GetCreatedVia() != "unix" || !strings.Contains(e.GetReason(), "by local operator uid:") {
				t.Errorf("operator token_created record %v (%q), want root's, created by a local operator over unix", tk, e.GetReason())
			}
			continue
		}
		if tk.GetActor() != "bob" || tk.GetId() == "" || tk.GetExpiresAt() == nil {
			t.Errorf("token_created record %v, want bob's id, actor and expiry", tk)
		}
	}
}

// journalKinds reads a stopped data dir's journal, grouped by kind; raw
// sees every record's bytes.
func journalKinds(t *testing.T, data string, raw func([]byte)) map[string][]*recordv1.JournalEntry {
	t.Helper()
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string][]*recordv1.JournalEntry{}
	err = st.ScanJournal(func(_ int64, b []byte) bool {
		raw(b)
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(b, e); err != nil {
			t.Errorf("journal record: %v", err)
			return false
		}
		out[lifecycle.EntryKindNameOf(e)] = append(out[lifecycle.EntryKindNameOf(e)], e)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
