package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/testing/pgtest"
)

// TestForgedKeyFilesRefused: on Badger, the fingerprint key file, or the
// journal's key and verifier files (a matching pair: the verifier checks
// the signer's signatures, so only the journal can tell), replaced in the
// data dir after the first start stop the next one, naming the row; the
// files left alone start.
func TestForgedKeyFilesRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		row   string
		forge func(t *testing.T, data string)
	}{
		{"sound", "", func(*testing.T, string) {}},
		{"fingerprint key replaced", store.SecretKeyRow(FingerprintKeyName), func(t *testing.T, data string) {
			k, err := fingerprint.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(keyPath(data, "fingerprint.key"), k, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"journal key pair replaced", store.SecretKeyRow(JournalKeyName), func(t *testing.T, data string) {
			s, v, err := journal.GenerateKey("latch/activity")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(keyPath(data, "journal.key"), []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(datadir.Verifier(data), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			srv, err := New(stateConfig(t, data, 0))
			if err != nil {
				t.Fatal(err)
			}
			srv.Close()
			tc.forge(t, data)
			srv, err = New(stateConfig(t, data, 0))
			if tc.row == "" {
				if err != nil {
					t.Fatalf("New on sound key files = %v", err)
				}
				srv.Close()
				return
			}
			if err == nil {
				srv.Close()
			}
			if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), tc.row) || !strings.Contains(err.Error(), string(store.MismatchSecret)) {
				t.Errorf("New with the %s = %v, want ErrStateMismatch naming %s (%s)", tc.name, err, tc.row, store.MismatchSecret)
			}
		})
	}
}

// TestForgedKeyRowsRefused: on PostgreSQL, a latch_keys row replaced by
// one sealed by the same vault (so it opens, and the journal key's
// verifier matches its signer) stops the replica that takes over, naming
// the row; the journal recorded each row's digest when it was created.
func TestForgedKeyRowsRefused(t *testing.T) {
	for _, name := range []string{FingerprintKeyName, JournalKeyName} {
		t.Run(name, func(t *testing.T) {
			url := pgtest.URL(t)
			keyFile := filepath.Join(t.TempDir(), "vault.key")
			r := openReplica(t, url, keyFile)
			a, err := New(r.config(t, "a"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			waitActive(t, a, done)
			if rec, _, err := a.Store.JournaledSecret(store.SecretKeyRow(name)); err != nil || rec.GetGeneration() != 1 {
				t.Errorf("JournaledSecret(%s) after creation = %v, %v; want the key_created record", name, rec, err)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			var secret []byte
			var public string
			if name == FingerprintKeyName {
				secret, err = fingerprint.GenerateKey()
			} else {
				var s string
				s, public, err = journal.GenerateKey("latch/activity")
				secret = []byte(s)
			}
			if err != nil {
				t.Fatal(err)
			}
			sealed, err := r.vault.KeySealer().Seal(keyAD(name), secret)
			if err != nil {
				t.Fatal(err)
			}
			c, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			if _, err := c.Exec(context.Background(), "UPDATE latch_keys SET sealed = $1, public = $2 WHERE name = $3", sealed, public, name); err != nil {
				t.Fatal(err)
			}

			rb := openReplica(t, url, keyFile)
			b, err := New(rb.config(t, "b"))
			if err != nil {
				t.Fatalf("New (the forged row opens with the vault) = %v", err)
			}
			bctx, bcancel := context.WithTimeout(context.Background(), time.Minute)
			defer bcancel()
			err = b.Run(bctx)
			if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), store.SecretKeyRow(name)) {
				t.Errorf("Run with the %s row replaced = %v, want ErrStateMismatch naming %s", name, err, store.SecretKeyRow(name))
			}
		})
	}
}
