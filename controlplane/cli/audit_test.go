package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// devRun runs `latch dev` on data with a checkpoint copy, makes one
// ticket and stops it cleanly (a final checkpoint, copied).
func devRun(t *testing.T, data, copyPath, title string) {
	t.Helper()
	dev := startDev(t, data, "--checkpoint-copy", copyPath)
	c := client(t, data)
	r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "dev", Tool: "create_ticket", Arguments: fmt.Appendf(nil, `{"title":%q}`, title)})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	waitFor(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	dev.cmd.Process.Signal(syscall.SIGINT)
	if err := dev.cmd.Wait(); err != nil {
		t.Fatalf("latch dev exited with %v after Ctrl-C", err)
	}
}

// cloneDir copies a stopped data dir, so each case tampers with its own.
func cloneDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// tamperStore opens a stopped data dir's Badger store as an attacker with
// the files would, and commits what fn returns.
func tamperStore(t *testing.T, data string, fn func(kv *badgerkv.KV) []store.Write) {
	t.Helper()
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if err := kv.Commit(fn(kv)); err != nil {
		t.Fatal(err)
	}
}

// keysWithPrefix lists a store's keys with the prefix, ascending.
func keysWithPrefix(t *testing.T, kv *badgerkv.KV, prefix string) [][]byte {
	t.Helper()
	var keys [][]byte
	if err := kv.Scan([]byte(prefix), false, func(k, _ []byte) bool {
		keys = append(keys, bytes.Clone(k))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestAuditVerifyAnchoring: records after the newest checkpoint are
// reported as not yet anchored, and fail the check under
// --require-anchored, the default with a checkpoint copy; a truncation with
// its checkpoints deleted is caught by the copy, and shows as a journal
// with no checkpoint without one. It also runs `latch dev
// --checkpoint-copy`.
func TestAuditVerifyAnchoring(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d")
	copyPath := filepath.Join(dir, "checkpoints.jsonl")
	devRun(t, data, copyPath, "first run")
	devRun(t, data, copyPath, "second run")
	copied, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatalf("latch dev --checkpoint-copy wrote no copy: %v", err)
	}
	copyLines := strings.Split(strings.TrimSpace(string(copied)), "\n")
	if len(copyLines) < 2 {
		t.Fatalf("checkpoint copy has %d lines after two clean stops, want at least 2:\n%s", len(copyLines), copied)
	}

	// The tail: the newest checkpoint is gone from the data dir (as a
	// crash before it would leave it) and from a lagging copy.
	tail := cloneDir(t, data)
	tamperStore(t, tail, func(kv *badgerkv.KV) []store.Write {
		cps := keysWithPrefix(t, kv, "c/")
		return []store.Write{{Key: cps[len(cps)-1], Delete: true}}
	})
	lagging := filepath.Join(dir, "lagging.jsonl")
	if err := os.WriteFile(lagging, []byte(strings.Join(copyLines[:len(copyLines)-1], "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The truncation: records from the first run's end on and every
	// checkpoint deleted from the data dir.
	trunc := cloneDir(t, data)
	tamperStore(t, trunc, func(kv *badgerkv.KV) []store.Write {
		var w []store.Write
		for _, k := range keysWithPrefix(t, kv, "c/") {
			w = append(w, store.Write{Key: k, Delete: true})
		}
		js := keysWithPrefix(t, kv, "j/")
		for _, k := range js[len(js)/2:] {
			w = append(w, store.Write{Key: k, Delete: true})
		}
		return w
	})

	tests := []struct {
		name     string
		args     []string
		code     int
		want     []string
		dontWant []string
	}{
		{name: "untouched, with the copy", args: []string{data, "--checkpoints", copyPath}, code: 0,
			want: []string{"journal ok"}, dontWant: []string{"not yet anchored"}},
		{name: "tail, no copy", args: []string{tail}, code: 0,
			want: []string{"journal ok", "not yet anchored: records", "come after the newest checkpoint"}, dontWant: []string{"refused"}},
		{name: "tail, --require-anchored", args: []string{tail, "--require-anchored"}, code: 1,
			want: []string{"not yet anchored: records", "refused:", "--require-anchored"}},
		{name: "tail, lagging copy (required by default)", args: []string{tail, "--checkpoints", lagging}, code: 1,
			want: []string{"not yet anchored: records", "the newest checkpoint of the copy", "refused:", "the default with --checkpoints"}},
		{name: "tail, lagging copy, --require-anchored=false", args: []string{tail, "--checkpoints", lagging, "--require-anchored=false"}, code: 0,
			want: []string{"journal ok", "not yet anchored: records"}, dontWant: []string{"refused"}},
		{name: "tail, full copy: the copy anchors it", args: []string{tail, "--checkpoints", copyPath}, code: 0,
			want: []string{"journal ok"}, dontWant: []string{"not yet anchored"}},
		{name: "data dir ahead of a lagging copy", args: []string{data, "--checkpoints", lagging}, code: 1,
			want: []string{"not yet anchored", "the journal's own checkpoint of size", "refused:"}},
		{name: "truncated, checkpoints deleted, with the copy", args: []string{trunc, "--checkpoints", copyPath}, code: 1,
			want: []string{"truncated at", "are gone"}},
		// Without a copy the journal alone cannot tell, but the execution
		// records still name the journal records that were cut off, so the
		// state check refuses it.
		{name: "truncated, checkpoints deleted, no copy", args: []string{trunc}, code: 1,
			want: []string{"state DISAGREES with the journal", "not yet anchored: all", "no signed checkpoint at all"}},
		{name: "truncated, checkpoints deleted, no copy, --require-anchored", args: []string{trunc, "--require-anchored"}, code: 1,
			want: []string{"no signed checkpoint at all", "refused:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := runCLI(t, append([]string{"audit", "verify"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("audit verify %v: exit %d, want %d\n%s", tt.args, code, tt.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("audit verify %v output lacks %q:\n%s", tt.args, w, out)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(out, w) {
					t.Errorf("audit verify %v output has %q:\n%s", tt.args, w, out)
				}
			}
		})
	}

	// An export verifies whole: an edited actor in a line's readable
	// entry fails it, naming the line and the field.
	export := filepath.Join(dir, "journal.jsonl")
	if out, code := runCLI(t, "audit", "export", data, "-o", export); code != 0 {
		t.Fatalf("audit export: exit %d: %s", code, out)
	}
	if out, code := runCLI(t, "audit", "verify", "--export", export, "--key", datadir.Verifier(data), "--checkpoints", copyPath); code != 0 {
		t.Fatalf("audit verify --export of an untouched export: exit %d: %s", code, out)
	}
	raw, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(raw, []byte(`"actor":"dev"`), []byte(`"actor":"ops-oncall"`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatalf("export has no actor to edit:\n%s", raw)
	}
	if err := os.WriteFile(export, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "audit", "verify", "--export", export, "--key", datadir.Verifier(data))
	if code != 1 || !strings.Contains(out, "readable at") || !strings.Contains(out, `entry.actor: "ops-oncall", data says "dev"`) {
		t.Errorf("audit verify --export with an edited actor: exit %d, want 1 naming the line and entry.actor:\n%s", code, out)
	}
}
