package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/pgtest"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// readOnlyRole creates a login role that may only SELECT the database's
// tables and returns the database's URL for it.
func readOnlyRole(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var db string
	if err := c.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	role := "ro_" + db
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT CONNECT ON DATABASE " + db + " TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ro := strings.Replace(url, "://latch@", "://"+role+"@", 1)
	// The role is really read-only.
	rc, err := pgx.Connect(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	if _, err := rc.Exec(ctx, "DELETE FROM latch_kv WHERE false"); err == nil {
		t.Fatal("the read-only role may DELETE")
	}
	return ro
}

// TestAuditOnPostgres: `latch audit verify|export|prove --store` read a
// live PostgreSQL store under a role that may only SELECT, while a
// replica (started from an empty data dir with only the vault's key
// file) keeps committing: verify passes, the export verifies with the
// store's verifier key, prove's inclusion proof verifies offline against
// the export's record; a journal row forged in the database is caught.
func TestAuditOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	_, target := newTarget(t)
	catalog := writeCatalog(t, target)
	dataA := t.TempDir()
	a := startServe(t, dataA, catalog, "--store", url, "--replica", "a")
	c := client(t, dataA)
	var ids []string
	for i := range 3 {
		r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "create_ticket", Arguments: fmt.Appendf(nil, `{"title":"audit %d"}`, i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.GetExecution().GetId())
		waitFor(t, c, ids[i], recordv1.State_STATE_COMPLETED)
	}
	a.cmd.Process.Signal(syscall.SIGTERM) // a clean stop signs a final checkpoint
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("latch serve exited with %v after SIGTERM", err)
	}

	// A replica with an empty data dir and the vault key file only.
	dataB := t.TempDir()
	copyKeys(t, dataA, dataB)
	startServe(t, dataB, catalog, "--store", url, "--replica", "b")
	cb := client(t, dataB)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { // the live writer: bounded in count, stopped with the test
		for i := 0; i < 500 && ctx.Err() == nil; i++ {
			cb.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "create_ticket", Arguments: fmt.Appendf(nil, `{"title":"live %d"}`, i)}) //nolint:errcheck // load only
		}
	})
	defer func() { stop(); wg.Wait() }()

	ro := readOnlyRole(t, url)
	checkStoreStatus(t, ro)
	out, code := runCLI(t, "audit", "verify", "--store", ro)
	if code != ExitOK || !strings.Contains(out, "journal ok") {
		t.Fatalf("audit verify --store on a live store = %d:\n%s", code, out)
	}

	export := filepath.Join(t.TempDir(), "journal.jsonl")
	if out, code := runCLI(t, "audit", "export", "--store", ro, "-o", export); code != ExitOK {
		t.Fatalf("audit export --store = %d:\n%s", code, out)
	}
	rc, err := pgx.Connect(context.Background(), ro)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(context.Background())
	var verifier string
	if err := rc.QueryRow(context.Background(), "SELECT public FROM latch_keys WHERE name = 'journal'").Scan(&verifier); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "journal.pub")
	if err := os.WriteFile(keyFile, []byte(verifier+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, "audit", "verify", "--export", export, "--key", keyFile); code != ExitOK {
		t.Fatalf("audit verify --export of the store's export = %d:\n%s", code, out)
	}
	if out, code := runCLI(t, "audit", "verify", "--export", export, "--store", ro); code != ExitOK {
		t.Fatalf("audit verify --export with the store's verifier = %d:\n%s", code, out)
	}

	out, code = runCLI(t, "audit", "prove", "--store", ro, ids[1])
	if code != ExitOK {
		t.Fatalf("audit prove --store = %d:\n%s", code, out)
	}
	checkProofOffline(t, out, verifier, export)

	// A forged journal row (by someone who can write the database).
	su, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(context.Background())
	tag, err := su.Exec(context.Background(), `UPDATE latch_kv SET v = overlay(v PLACING '\xff'::bytea FROM length(v) FOR 1)
		WHERE k = (SELECT k FROM latch_kv WHERE k >= 'j/'::bytea AND k < 'j0'::bytea ORDER BY k LIMIT 1 OFFSET 2)`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("forge a journal row: %v, %v", tag, err)
	}
	out, code = runCLI(t, "audit", "verify", "--store", ro)
	if code != 1 || strings.Contains(out, "journal ok") || !strings.Contains(out, "modified at 2") {
		t.Errorf("audit verify --store after a forged row = %d, want 1 reporting record 2 modified:\n%s", code, out)
	}
}

// checkProofOffline checks `latch audit prove`'s output with nothing but
// the verifier key and the export: the checkpoint's signature, each
// record's leaf hash against the exported record, and each inclusion proof
// against the checkpoint's root.
func checkProofOffline(t *testing.T, out, verifier, export string) {
	t.Helper()
	body, ok := strings.CutPrefix(out, "checkpoint:\n")
	end := strings.Index(body, "\nrecord ")
	if !ok || end < 0 {
		t.Fatalf("prove output has no checkpoint and records:\n%s", out)
	}
	cp, err := journal.OpenCheckpoint([]byte(body[:end]), verifier)
	if err != nil {
		t.Fatalf("the proof's checkpoint does not verify with the store's verifier: %v\n%s", err, out)
	}
	f, err := os.Open(export)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, err := journal.ReadExport(f)
	if err != nil {
		t.Fatal(err)
	}
	proved := 0
	var idx int64 = -1
	var leaf tlog.Hash
	var proof tlog.RecordProof
	check := func() {
		if idx < 0 {
			return
		}
		data, err := src.Entry(idx)
		if err != nil {
			t.Fatalf("record %d not in the export: %v", idx, err)
		}
		if journal.LeafHash(data) != leaf {
			t.Errorf("record %d: the proof's leaf hash is not the exported record's", idx)
		}
		if err := tlog.CheckRecord(proof, cp.Size, cp.Root, idx, leaf); err != nil {
			t.Errorf("record %d: inclusion proof does not verify offline: %v", idx, err)
		}
		proved++
	}
	for _, line := range strings.Split(body[end+1:], "\n") {
		switch {
		case strings.HasPrefix(line, "record "):
			check()
			f := strings.Fields(line) // record N leaf HASH
			if len(f) != 4 {
				t.Fatalf("bad record line %q", line)
			}
			idx, err = strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if leaf, err = tlog.ParseHash(f[3]); err != nil {
				t.Fatal(err)
			}
			proof = nil
		case strings.HasPrefix(line, "  "):
			h, err := tlog.ParseHash(strings.TrimSpace(line))
			if err != nil {
				t.Fatal(err)
			}
			proof = append(proof, h)
		}
	}
	check()
	if proved == 0 {
		t.Fatalf("no record proved:\n%s", out)
	}
}

// checkStoreStatus: `latch store status --json` (under the read-only
// role) names the schema, replica b active with the lease, both replicas
// seen, the two sealed keys with the journal's verifier, and the vault.
func checkStoreStatus(t *testing.T, url string) {
	t.Helper()
	var st storeStatusJSON // decoded strictly: the documented shape (docs/reference/cli-json.md)
	testbin.Eventually(t, "store status to show replica b active", func() bool {
		out, code := runCLI(t, "store", "status", "--store", url, "--json")
		if code != ExitOK {
			t.Fatalf("latch store status --json = %d:\n%s", code, out)
		}
		st = storeStatusJSON{}
		if err := decodeStrict(out, &st); err != nil {
			t.Fatalf("latch store status --json: %v\n%s", err, out)
		}
		for _, r := range st.Replicas {
			if r.Name == "b" && r.Role == "active" {
				return true
			}
		}
		return false
	})
	if st.Lease == nil {
		t.Fatalf("store status = %+v; want a lease", st)
	}
	if st.SchemaVersion != pgkv.SchemaVersion || st.JournalSize < 3 || !strings.HasPrefix(st.Lease.Holder, "b/") || st.Lease.Epoch != 2 || !st.Lease.Held || st.Lease.AgeSeconds < 0 {
		t.Errorf("store status = %+v; want schema %d, a journal, b holding epoch 2", st, pgkv.SchemaVersion)
	}
	names := map[string]string{}
	for _, r := range st.Replicas {
		names[r.Name] = r.Role
	}
	if len(names) != 2 || names["a"] != "stopped" || names["b"] != "active" {
		t.Errorf("replicas seen = %v; want a stopped and b active", names)
	}
	keys := map[string]string{}
	for _, k := range st.StoreKeys {
		keys[k.Name] = k.Public
	}
	if _, ok := keys["fingerprint"]; !ok || keys["fingerprint"] != "" || !strings.HasPrefix(keys["journal"], "latch/activity+") {
		t.Errorf("store keys = %v; want fingerprint (no public part) and journal with its verifier", keys)
	}
	if st.Vault == nil || st.Vault.Generation < 1 {
		t.Errorf("store status shows no vault: %+v", st.Vault)
	}
	out, code := runCLI(t, "store", "status", "--store", url)
	for _, want := range []string{"replicas seen:      2", "key journal:", "verifier:         latch/activity+", "vault:              in the store"} {
		if code != ExitOK || !strings.Contains(out, want) {
			t.Errorf("latch store status lacks %q:\n%s", want, out)
		}
	}
}

// TestReplicaRefusedWithoutTheVaultKey: on a PostgreSQL store whose keys
// and vault a first replica created, a replica started without a vault
// key (the vault would stay locked) exits at once naming
// --vault-key-file, and one with another key file exits saying the key
// does not open the vault; neither takes the lease.
func TestReplicaRefusedWithoutTheVaultKey(t *testing.T) {
	url := pgtest.URL(t)
	_, target := newTarget(t)
	catalog := writeCatalog(t, target)
	first := t.TempDir()
	a := startServe(t, first, catalog, "--store", url, "--replica", "a")
	a.cmd.Process.Signal(syscall.SIGTERM)
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("latch serve exited with %v after SIGTERM", err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong.key")
	if err := vault.GenerateKeyFile(wrong); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no vault key", nil, "start latch serve with --vault-key-file"},
		{"another key file", []string{"--vault-key-file", wrong}, "does not open the vault in the PostgreSQL store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := append([]string{"serve", "--data", t.TempDir(), "--catalog", catalog, "--store", url, "--replica", "x"}, tt.args...)
			out, err := exec.CommandContext(ctx, latchBin, args...).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), tt.want) {
				t.Errorf("latch serve %v = %v, want exit 1 saying %q:\n%s", tt.args, err, tt.want, out)
			}
			if strings.Contains(string(out), "holding the store lease") {
				t.Errorf("the refused replica took the lease:\n%s", out)
			}
		})
	}
}
