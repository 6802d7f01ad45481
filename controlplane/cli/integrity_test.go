package cli

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/testing/storetest"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestForgedDataDirIsCaughtByVerifyAndStartUp forges a stopped data dir of
// the real `latch serve` once per kind: `latch audit verify` names the
// execution and its journal record and exits 1, `latch serve` refuses to
// start and names the command, and the target sees no second effect.
func TestForgedDataDirIsCaughtByVerifyAndStartUp(t *testing.T) {
	kinds := append(append([]storetest.Forgery{}, storetest.All...), storetest.DeletedWithIndex)
	for _, forgery := range kinds {
		t.Run(string(forgery), func(t *testing.T) {
			demo, url := newTarget(t)
			catalog := writeCatalog(t, url)
			data := t.TempDir()
			p := startServe(t, data, catalog)
			c := client(t, data)
			var ids []string
			for _, v := range []string{"1.0", "2.0"} {
				r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release",
					Arguments: []byte(`{"service":"api","version":"` + v + `"}`)})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.GetExecution().GetId())
				waitFor(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			if err := p.cmd.Wait(); err != nil {
				t.Fatalf("latch serve exited with %v after SIGTERM", err)
			}
			if out, code := runCLI(t, "audit", "verify", data); code != 0 || !strings.Contains(out, "state ok") {
				t.Fatalf("audit verify before the forgery: exit %d\n%s", code, out)
			}

			kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := storetest.Forge(kv, forgery, ids[0], ids[1]); err != nil {
				t.Fatal(err)
			}
			kv.Close()

			out, code := runCLI(t, "audit", "verify", data)
			if code != 1 || !strings.Contains(out, ids[0]) || !strings.Contains(out, "journal record") || !strings.Contains(out, "DISAGREES") {
				t.Errorf("audit verify after %s: exit %d, want 1 naming %s and its journal record:\n%s", forgery, code, ids[0], out)
			}
			cmd := exec.Command(latchBin, "serve", "--data", data, "--catalog", catalog, "--vault-key-file", filepath.Join(data, "vault.key"), "--trusted-actor", "alice")
			sout, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("latch serve on a forged data dir: %v, want exit 1\n%s", err, sout)
			}
			if want := fmt.Sprintf("latch audit verify %s", data); !strings.Contains(string(sout), want) || !strings.Contains(string(sout), ids[0]) {
				t.Errorf("latch serve output does not name %s and %q:\n%s", ids[0], want, sout)
			}
			if got := demo.Effects(demotarget.KindRelease); got != 2 {
				t.Errorf("effects at the target = %d, want 2", got)
			}
		})
	}
}
