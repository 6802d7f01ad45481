package cli

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/store/pgtest"
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
	demo.SetDelay(3 * time.Second)
	args := `{"service":"api","version":"9.0.0"}`
	r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(args)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetExecution().GetId()
	waitFor(t, c, id, recordv1.State_STATE_DISPATCHED)
	for i := 0; i < 200 && demo.InFlight() == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if demo.InFlight() == 0 {
		t.Fatal("the request never reached the target")
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	demo.SetDelay(0)

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
