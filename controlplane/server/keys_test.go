package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/pgtest"
	"github.com/latchhq/latch/internal/testing/testbin"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// replica is what one `latch serve` on PostgreSQL holds: its own backend,
// the vault read from the store and unlocked with the shared key file.
type replica struct {
	kv    *pgkv.KV
	vault *vault.Vault
}

// openReplica opens the store and its vault like stack.New does: the vault
// document in the store, created by the first replica with keyFile.
func openReplica(t *testing.T, url, keyFile string) replica {
	t.Helper()
	kv, err := pgkv.Open(context.Background(), url, pgkv.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	v, err := vault.New(vault.Config{Storage: kv.VaultStorage(), KDF: vault.Params{Time: 1, MemoryKiB: 64, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Status().Initialized {
		err = v.InitWithKeyFile(keyFile)
		if errors.Is(err, vault.ErrExists) {
			if err = v.Reload(); err == nil {
				err = v.UnlockWithKeyFile(keyFile)
			}
		}
	} else {
		err = v.UnlockWithKeyFile(keyFile)
	}
	if err != nil {
		t.Fatal(err)
	}
	return replica{kv: kv, vault: v}
}

func (r replica) config(t *testing.T, name string) Config {
	return Config{
		Logger:  hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Warn}),
		DataDir: t.TempDir(), CatalogSource: catalog.Bytes("c.yaml", []byte(catalogYAML)),
		KV: r.kv, KeySealer: r.vault.KeySealer(), OnActive: func(context.Context) error { return r.vault.Reload() },
		Replica: name, LeaseTTL: 3 * time.Second,
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: &countingChannel{}},
	}
}

// TestReplicasShareTheStoreKeys: two replicas with empty data dirs on one
// database, started with only the vault's key file. The first creates the
// keys sealed in the store; the second, after the first stops, opens
// them: the same intent gets the same fingerprint on both, and both
// replicas' checkpoints verify with the one verifier key in the store.
// Neither data dir holds a key file.
func TestReplicasShareTheStoreKeys(t *testing.T) {
	url := pgtest.URL(t)
	keyFile := filepath.Join(t.TempDir(), "vault.key")
	in := engine.SubmitInput{Actor: "alice", Tool: "look", Arguments: []byte(`{}`)}

	var fps, notes []string
	for _, name := range []string{"a", "b"} {
		r := openReplica(t, url, keyFile)
		cfg := r.config(t, name)
		srv, err := New(cfg)
		if err != nil {
			t.Fatalf("replica %s: New: %v", name, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		waitActive(t, srv, done) // on PostgreSQL Run loads the state once it holds the lease
		res, err := srv.Engine.Submit(ctx, in)
		if err != nil {
			t.Fatalf("replica %s: Submit: %v", name, err)
		}
		fps = append(fps, res.Execution.GetFingerprint())
		id := res.Execution.GetId()
		testbin.Eventually(t, "the execution to complete", func() bool {
			x, err := srv.Store.Execution(id)
			return err == nil && x.GetState() == recordv1.State_STATE_COMPLETED
		})
		if err := srv.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		cps, err := srv.Store.Checkpoints()
		if err != nil || len(cps) == 0 {
			t.Fatalf("replica %s: checkpoints %d, %v", name, len(cps), err)
		}
		notes = append(notes, string(cps[len(cps)-1]))
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("replica %s: Run: %v", name, err)
		}
		for _, f := range []string{"fingerprint.key", "journal.key", "journal.pub"} {
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "keys", f)); err == nil {
				t.Errorf("replica %s wrote keys/%s to its data dir; on PostgreSQL the keys are in the store", name, f)
			}
		}
	}
	if fps[0] == "" || fps[0] != fps[1] {
		t.Errorf("fingerprints of one intent on two replicas = %q, %q; want one", fps[0], fps[1])
	}
	r := openReplica(t, url, keyFile)
	verifier, err := r.kv.PublicKey(context.Background(), JournalKeyName)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range notes {
		if _, err := journal.OpenCheckpoint([]byte(n), verifier); err != nil {
			t.Errorf("replica %d's checkpoint does not verify with the store's verifier: %v", i, err)
		}
	}
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var rows, journaled int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM latch_keys").Scan(&rows); err != nil || rows != 2 {
		t.Errorf("latch_keys rows = %d, %v; want 2", rows, err)
	}
	st, err := store.New(store.Config{KV: r.kv})
	if err != nil {
		t.Fatal(err)
	}
	st.ScanJournal(func(_ int64, data []byte) bool {
		if e, err := journal.DecodeEntry(data); err == nil && lifecycle.EntryKindOf(e) == store.KindKeyCreated {
			journaled++
		}
		return true
	})
	if journaled != 2 {
		t.Errorf("key_created journal records = %d, want 2 (one per key, by the replica that created it)", journaled)
	}
	assertNoClearKeys(t, url, r, keyFile)
}

// TestKeyCreationRace: replicas starting at once on an empty store each
// try to create the keys; one wins and every one opens the winner's.
func TestKeyCreationRace(t *testing.T) {
	url := pgtest.URL(t)
	keyFile := filepath.Join(t.TempDir(), "vault.key")
	first := openReplica(t, url, keyFile) // the vault must exist first: its key file is shared
	const n = 6
	reps := []replica{first}
	for range n - 1 {
		reps = append(reps, openReplica(t, url, keyFile))
	}
	sets := make([]*keySet, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Go(func() {
			sets[i], errs[i] = loadKeys(context.Background(), hclog.NewNullLogger(), r.config(t, "r"), r.kv)
		})
	}
	wg.Wait()
	created := map[string]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		for _, c := range sets[i].created {
			created[c]++
		}
		if got, want := sets[i].fp.Sum([]byte("intent")), sets[0].fp.Sum([]byte("intent")); got != want {
			t.Errorf("replica %d fingerprints %s, replica 0 %s", i, got, want)
		}
		if sets[i].verifier != sets[0].verifier {
			t.Errorf("replica %d verifier %s, replica 0 %s", i, sets[i].verifier, sets[0].verifier)
		}
	}
	if created[FingerprintKeyName] != 1 || created[JournalKeyName] != 1 {
		t.Errorf("keys created = %v, want each exactly once", created)
	}
}

// TestStoreKeysRefuseAnotherOrLockedVault: a replica whose vault is
// locked is refused with ErrKeysLocked naming --vault-key-file; one whose
// vault is not the store's (another data key) with ErrKeysUnsealable; and
// a wrong key file for the store's vault never unlocks it.
func TestStoreKeysRefuseAnotherOrLockedVault(t *testing.T) {
	url := pgtest.URL(t)
	keyFile := filepath.Join(t.TempDir(), "vault.key")
	r := openReplica(t, url, keyFile)
	if _, err := loadKeys(context.Background(), hclog.NewNullLogger(), r.config(t, "a"), r.kv); err != nil {
		t.Fatal(err)
	}

	r.vault.Lock()
	_, err := New(r.config(t, "a"))
	if !errors.Is(err, ErrKeysLocked) || !strings.Contains(err.Error(), "--vault-key-file") {
		t.Errorf("New with a locked vault = %v, want ErrKeysLocked naming --vault-key-file", err)
	}

	other, err := vault.New(vault.Config{Path: filepath.Join(t.TempDir(), "vault.json")})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.InitWithKeyFile(filepath.Join(t.TempDir(), "other.key")); err != nil {
		t.Fatal(err)
	}
	cfg := openReplica(t, url, keyFile).config(t, "b")
	cfg.KeySealer = other.KeySealer()
	if _, err := loadKeys(context.Background(), hclog.NewNullLogger(), cfg, cfg.KV); !errors.Is(err, ErrKeysUnsealable) {
		t.Errorf("keys opened with another vault: %v, want ErrKeysUnsealable", err)
	}

	kv, err := pgkv.Open(context.Background(), url, pgkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	v, err := vault.New(vault.Config{Storage: kv.VaultStorage()})
	if err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong.key")
	if err := vault.GenerateKeyFile(wrong); err != nil {
		t.Fatal(err)
	}
	if err := v.UnlockWithKeyFile(wrong); !errors.Is(err, vault.ErrWrongPassphrase) {
		t.Errorf("the store's vault unlocked with another key file: %v, want ErrWrongPassphrase", err)
	}
	cfg = openReplica(t, url, keyFile).config(t, "c")
	cfg.KeySealer = v.KeySealer()
	if _, err := New(cfg); !errors.Is(err, ErrKeysLocked) {
		t.Errorf("New with the vault a wrong key file left locked = %v, want ErrKeysLocked", err)
	}

	// The clear verifier replaced by another key's: auditors would check
	// checkpoints against a key that did not sign them.
	_, otherPub, err := journal.GenerateKey("latch/activity")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(), "UPDATE latch_keys SET public = $1 WHERE name = 'journal'", otherPub); err != nil {
		t.Fatal(err)
	}
	r2 := openReplica(t, url, keyFile)
	if _, err := loadKeys(context.Background(), hclog.NewNullLogger(), r2.config(t, "d"), r2.kv); !errors.Is(err, ErrKeysUnsealable) || !strings.Contains(err.Error(), "verifier") {
		t.Errorf("keys with a replaced verifier = %v, want ErrKeysUnsealable naming the verifier", err)
	}
}

// assertNoClearKeys scans every row of every table of the database for the
// keys in clear (raw, hex, base64, and the signer key's text) and for the
// vault's key file.
func assertNoClearKeys(t *testing.T, url string, r replica, keyFile string) {
	t.Helper()
	ctx := context.Background()
	var secrets [][]byte
	for _, name := range []string{FingerprintKeyName, JournalKeyName} {
		k, err := r.kv.Key(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := r.vault.KeySealer().Open(keyAD(name), k.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, plain)
		if name == JournalKeyName {
			// PRIVATE+KEY+name+hash+base64(alg || seed): the seed part too.
			parts := strings.SplitN(strings.TrimSpace(string(plain)), "+", 5)
			raw, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
			if len(parts) != 5 || err != nil || len(raw) < 32 {
				t.Fatalf("unexpected signer key format: %d parts, %v", len(parts), err)
			}
			secrets = append(secrets, []byte(parts[4]), raw[1:])
		}
	}
	vk, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, vk)
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables %v, %v", tables, err)
	}
	scanned := 0
	for _, table := range tables {
		rows, err := c.Query(ctx, "SELECT t::text FROM "+pgx.Identifier{table}.Sanitize()+" t")
		if err != nil {
			t.Fatal(err)
		}
		all, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range all {
			scanned++
			// bytea prints as \x<hex>; text as itself.
			low := strings.ToLower(row)
			for _, s := range secrets {
				for _, form := range []string{string(s), hex.EncodeToString(s), base64.StdEncoding.EncodeToString(s), base64.RawStdEncoding.EncodeToString(s)} {
					if len(form) >= 16 && (strings.Contains(row, form) || strings.Contains(low, strings.ToLower(form))) {
						t.Errorf("table %s holds a key in clear (%d bytes)", table, len(s))
					}
				}
				if bytes.Contains([]byte(row), s) {
					t.Errorf("table %s holds a key's bytes", table)
				}
			}
		}
	}
	if scanned == 0 {
		t.Fatal("no rows scanned")
	}
}

// testKeySealer is the key sealer of a new vault file unlocked with a new
// key file, for tests that need a PostgreSQL store but not its vault.
func testKeySealer(t *testing.T) KeySealer {
	t.Helper()
	dir := t.TempDir()
	v, err := vault.New(vault.Config{Path: filepath.Join(dir, "vault.json")})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.InitWithKeyFile(filepath.Join(dir, "vault.key")); err != nil {
		t.Fatal(err)
	}
	return v.KeySealer()
}

// TestTakeoverReadsTheVaultAgain: a standby read the vault when it
// started; the active stores a credential afterwards. When the standby
// takes over it reads the vault from the store again (OnActive), so the
// credential is there for its dispatches.
func TestTakeoverReadsTheVaultAgain(t *testing.T) {
	url := pgtest.URL(t)
	keyFile := filepath.Join(t.TempDir(), "vault.key")
	ra, rb := openReplica(t, url, keyFile), openReplica(t, url, keyFile)
	a, err := New(ra.config(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitActive(t, a, done)
	res, err := a.Engine.Submit(ctx, engine.SubmitInput{Actor: "alice", Tool: "look", Arguments: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "replica a to run (an execution completes)", func() bool {
		x, err := a.Store.Execution(res.Execution.GetId())
		return err == nil && x.GetState() == recordv1.State_STATE_COMPLETED
	})
	if err := ra.vault.Put("deploy", vault.Credential{Kind: vault.KindBearer, Fields: vault.Fields{"token": "tok-after-b-started"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.vault.Get("deploy"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("the standby's vault before takeover: %v, want ErrNotFound", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b, err := New(rb.config(t, "b"))
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithCancel(context.Background())
	bdone := make(chan error, 1)
	go func() { bdone <- b.Run(bctx) }()
	defer func() {
		bcancel()
		<-bdone // a Run cancelled during its start-up may report that; the test is over
	}()
	waitActive(t, b, bdone)
	if c, err := rb.vault.Get("deploy"); err != nil || c.Fields["token"] != "tok-after-b-started" {
		t.Errorf("the new active's vault: %v, %v; want the credential the old active stored", c, err)
	}
}
