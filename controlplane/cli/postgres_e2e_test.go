package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/replicas"
	"github.com/latchhq/latch/internal/testing/pgtest"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestServeOnPostgres: `latch store migrate` prepares a database, `latch
// serve --store URL` runs on it as a real process, is SIGKILLed while the
// target holds a request, and the restarted process recovers the outcome
// from the database with one effect at the target; `latch store status`
// reports the schema and the journal.
func TestServeOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	out, code := runCLI(t, "store", "migrate", "--store", url)
	if code != ExitOK || !strings.Contains(out, "migrated schema 0 -> ") {
		t.Fatalf("latch store migrate = %d:\n%s", code, out)
	}
	if out, code := runCLI(t, "store", "migrate", "--store", url); code != ExitOK || !strings.Contains(out, "schema is current") {
		t.Errorf("second latch store migrate = %d:\n%s", code, out)
	}
	if _, code := runCLI(t, "store", "migrate", "--store", "/var/lib/latch"); code != ExitUsage {
		t.Errorf("latch store migrate with a directory = %d, want %d", code, ExitUsage)
	}

	demo, target := newTarget(t)
	catalog := writeCatalog(t, target)
	data := t.TempDir()
	p := startServe(t, data, catalog, "--store", url)
	c := client(t, data)
	demo.Hold() // the answer waits until the control plane is killed
	args := `{"service":"api","version":"9.0.0"}`
	r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(args)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetExecution().GetId()
	waitFor(t, c, id, recordv1.State_STATE_DISPATCHED)
	testbin.Eventually(t, "the request to reach the target", func() bool { return demo.InFlight() > 0 })
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	demo.Release()

	startServe(t, data, catalog, "--store", url)
	c = client(t, data)
	x := waitFor(t, c, id, recordv1.State_STATE_COMPLETED)
	if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("outcome = %v, want succeeded", x.GetOutcome())
	}
	if got := demo.Effects("release"); got != 1 {
		t.Errorf("target effects = %d, want exactly 1", got)
	}
	again, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(args)})
	if err != nil || again.GetExecution().GetId() != id || again.GetDisposition() != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Errorf("retry after recovery: %v %v, want attached to %s", again, err, id)
	}
	out, code = runCLI(t, "store", "status", "--store", url)
	if code != ExitOK || !strings.Contains(out, "synchronous_commit: on") || strings.Contains(out, "journal size:       0\n") {
		t.Errorf("latch store status = %d:\n%s", code, out)
	}
}

// spawnServe starts `latch serve` without waiting for it to serve (a
// standby answers only health and NotActive until it holds the lease).
func spawnServe(t *testing.T, data, catalog string, extra ...string) (*proc, *testbin.Buffer) {
	t.Helper()
	cmd := exec.Command(latchBin, append([]string{"serve", "--data", data, "--catalog", catalog, "--log-level", "debug", "--vault-key-file", filepath.Join(data, "vault.key"), "--trusted-actor", "alice"}, extra...)...)
	stderr := &testbin.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("latch serve (%s) log:\n%s", data, stderr.String())
		}
	})
	return &proc{cmd: cmd}, stderr
}

// copyKeys gives replica b replica a's vault key file: the only secret a
// replica needs locally (the keys and the vault are in the store, sealed).
func copyKeys(t *testing.T, a, b string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(a, "vault.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "vault.key"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStandbyTakesOverOnPostgres: two `latch serve` replicas on one
// database; the second serves as a standby while the first holds the
// lease: its socket answers every API call Unavailable naming the
// active's address. The active is SIGKILLed while the target holds a
// request: the standby takes the lease once it expires, recovers the
// in-flight execution (one effect) and attaches the retry; `latch store
// status` names it with epoch 2. A clean stop of that replica releases
// the lease, so a third takes over without waiting out the ttl.
func TestStandbyTakesOverOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	demo, target := newTarget(t)
	catalog := writeCatalog(t, target)
	dataA, dataB, dataC := t.TempDir(), t.TempDir(), t.TempDir()
	lease := []string{"--store", url, "--lease-ttl", "2s"}
	a := startServe(t, dataA, catalog, append(lease, "--replica", "a")...)
	copyKeys(t, dataA, dataB)
	copyKeys(t, dataA, dataC)
	pb, logB := spawnServe(t, dataB, catalog, append(lease, "--replica", "b")...)
	testbin.Eventually(t, "replica b to report it is a standby", func() bool { return strings.Contains(logB.String(), "standby") })
	testbin.Eventually(t, "replica b to answer as a standby on its socket", func() bool { return standby(dataB) })
	// Once it has read the lease, the standby names the active.
	var err error
	testbin.Eventually(t, "the standby to name the active", func() bool {
		_, err = client(t, dataB).Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: "act_x"})
		active, ok := replicas.ActiveOf(err)
		return ok && active == "unix://"+datadir.Socket(dataA)
	})

	c := client(t, dataA)
	demo.Hold() // until the active is killed: no slow machine closes the window early
	args := `{"service":"api","version":"10.0.0"}`
	r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(args)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetExecution().GetId()
	waitFor(t, c, id, recordv1.State_STATE_DISPATCHED)
	testbin.Eventually(t, "the request to reach the target", func() bool { return demo.InFlight() > 0 })
	// The CLI given both replicas, the standby first, reaches the active.
	both := "unix://" + datadir.Socket(dataB) + ",unix://" + datadir.Socket(dataA)
	if out, code := runCLI(t, "exec", "show", id, "--addr", both); code != ExitOK || !strings.Contains(out, id) {
		t.Errorf("latch exec show --addr standby,active = %d:\n%s", code, out)
	}
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
	demo.Release()

	testbin.Eventually(t, "the standby to take over and serve", func() bool { return serving(dataB) })
	cb := client(t, dataB)
	x := waitFor(t, cb, id, recordv1.State_STATE_COMPLETED)
	if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("outcome = %v, want succeeded", x.GetOutcome())
	}
	if got := demo.Effects("release"); got != 1 {
		t.Errorf("target effects = %d, want exactly 1", got)
	}
	again, err := cb.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(args)})
	if err != nil || again.GetExecution().GetId() != id || again.GetDisposition() != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Errorf("retry on the new active: %v %v, want attached to %s", again, err, id)
	}
	out, code := runCLI(t, "store", "status", "--store", url)
	if code != ExitOK || !strings.Contains(out, "active replica:     b/") || !strings.Contains(out, "epoch 2, held") {
		t.Errorf("latch store status = %d:\n%s", code, out)
	}

	// A clean stop hands the lease over at once.
	_, logC := spawnServe(t, dataC, catalog, append(lease, "--replica", "c")...)
	testbin.Eventually(t, "replica c to report it is a standby", func() bool { return strings.Contains(logC.String(), "standby") })
	pb.cmd.Process.Signal(syscall.SIGTERM)
	testbin.Eventually(t, "replica c to take over after b's clean stop", func() bool { return serving(dataC) })
	if _, err := client(t, dataC).Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: id}); err != nil {
		t.Errorf("Get on replica c: %v", err)
	}
}
