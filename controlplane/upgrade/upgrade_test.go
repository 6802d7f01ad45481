package upgrade

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/testing/hostagenttest"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

var previous = flag.String("upgrade.from", "", "the git revision to build as the previous release (default: the newest v* tag before HEAD, else the last first-parent commit at least a day older than HEAD)")

// repoRoot is the checkout this package is in.
const repoRoot = "../.."

func git(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repoRoot}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

// previousRevision is the release an upgrade starts from: -upgrade.from,
// else the newest v* tag that is not HEAD's, else (before the first
// release) main a day earlier. The test skips when the clone has no
// history to build it from (a shallow clone).
func previousRevision(t *testing.T) string {
	t.Helper()
	if *previous != "" {
		rev, err := git(t, "rev-parse", "--verify", *previous+"^{commit}")
		if err != nil {
			t.Fatalf("-upgrade.from %s is not a commit of this clone: %v", *previous, err)
		}
		return rev
	}
	if _, err := git(t, "rev-parse", "--verify", "HEAD"); err != nil {
		t.Skipf("not a git checkout (%v): the previous release cannot be built from history", err)
	}
	if tag, err := git(t, "describe", "--tags", "--abbrev=0", "--match", "v*", "HEAD^"); err == nil && tag != "" {
		rev, err := git(t, "rev-parse", tag+"^{commit}")
		if err == nil {
			return rev
		}
	}
	ts, err := git(t, "show", "-s", "--format=%ct", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := git(t, "rev-list", "-1", "--first-parent", fmt.Sprintf("--before=%d", secs-24*3600), "HEAD")
	if err != nil || rev == "" {
		shallow, _ := git(t, "rev-parse", "--is-shallow-repository")
		t.Skipf("no commit a day older than HEAD in this clone (shallow: %s): fetch the history (git fetch --unshallow) or pass -upgrade.from REV", shallow)
	}
	return rev
}

// buildRevision builds latch and latch-hostagent of rev from `git archive`
// (nothing of this checkout changes) into a directory.
func buildRevision(t *testing.T, rev string) string {
	t.Helper()
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repoRoot, rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	return build(t, src, "previous-"+rev[:12])
}

func build(t *testing.T, src, version string) string {
	t.Helper()
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-ldflags", "-X github.com/latchhq/latch/internal/buildinfo.version="+version,
		"-o", bin+string(filepath.Separator), "./controlplane/cmd/latch", "./hostagent/cmd/latch-hostagent")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build (%s): %v\n%s", version, err, out)
	}
	return bin
}

const catalog = `
targets:
  this-host: {channel: local, hostagent_socket: %q}
tools:
  append_line:
    description: Append one line to a file (once per execution).
    input_schema: {type: object, required: [path, line], properties: {path: {type: string}, line: {type: string}}}
    target: this-host
    command: [/bin/sh, -c, 'echo "$LINE" >> "$OUT"']
    env: {OUT: "{{path}}", LINE: "{{line}}"}
    replay: status_query
`

// TestMixedVersions runs one command through each mixed pair, the previous
// release's host agent under this tree's control plane and the other way
// round: the command runs once, the execution completes, the marker the
// control plane asked for is in the agent's store, and a repeated call
// attaches to the same execution.
func TestMixedVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a previous release from git history (minutes): not with -short")
	}
	rev := previousRevision(t)
	t.Logf("previous release: %s", rev)
	old := buildRevision(t, rev)
	cur := build(t, repoRoot, "current")
	for _, tc := range []struct{ name, latch, agent string }{
		{"current latch serve, previous latch-hostagent", cur, old},
		{"previous latch serve, current latch-hostagent", old, cur},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runPair(t, filepath.Join(tc.latch, "latch"), filepath.Join(tc.agent, "latch-hostagent"))
		})
	}
}

func runPair(t *testing.T, latch, agentBin string) {
	agent := hostagenttest.Start(t, hostagenttest.Options{Bin: agentBin})
	dir := t.TempDir()
	cat := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(cat, []byte(fmt.Sprintf(catalog, agent.Socket)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(hostagenttest.ShortDir(t), "cp")
	p, err := testbin.StartProc(latch, []string{"serve", "--data", data, "--catalog", cat, "--log-level", "debug",
		"--vault-key-file", filepath.Join(dir, "vault.key"), "--trusted-actor", "alice"}, filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("latch serve log:\n%s", p.ReadLog())
		}
	})
	conn, err := grpc.NewClient("unix://"+filepath.Join(data, "control.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := controlplanev1.NewControlPlaneClient(conn)
	ctx := t.Context()
	testbin.Eventually(t, "latch serve to answer on its socket", func() bool {
		_, err := c.Get(ctx, &controlplanev1.GetRequest{ExecutionId: "exe_none"})
		return status.Code(err) != codes.Unavailable && !p.Exited()
	})

	out := filepath.Join(dir, "effects.txt")
	args := fmt.Sprintf(`{"path":%q,"line":"once"}`, out)
	r, err := c.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "append_line", Arguments: []byte(args)})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	id := r.GetExecution().GetId()
	var x *recordv1.Execution
	testbin.Eventually(t, "the execution to complete", func() bool {
		g, err := c.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id})
		x = g.GetExecution()
		return err == nil && x.GetState() == recordv1.State_STATE_COMPLETED
	})
	if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("outcome = %v, want succeeded", x.GetOutcome())
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "once\n" {
		t.Errorf("effects = %q, %v; want the command run once", b, err)
	}
	again, err := c.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "append_line", Arguments: []byte(args)})
	if err != nil || again.GetExecution().GetId() != id {
		t.Errorf("the repeated call = %v, %v; want it attached to %s", again.GetExecution().GetId(), err, id)
	}
	if b, _ := os.ReadFile(out); string(b) != "once\n" {
		t.Errorf("effects after the repeated call = %q, want one line", b)
	}
	// The marker is in the agent's store, and this tree's client reads it
	// from either agent.
	ms, err := agent.Client.ListMarkers(ctx, &hostagentv1.ListMarkersRequest{})
	if err != nil {
		t.Fatalf("ListMarkers: %v", err)
	}
	found := false
	for _, m := range ms.GetMarkers() {
		if m.GetExecutionId() == id {
			found = true
		}
	}
	if !found {
		t.Errorf("the agent holds no marker for %s: %v", id, ms.GetMarkers())
	}
}
