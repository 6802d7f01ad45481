// Package witnesstest runs a real, independent witness on loopback for
// tests: litewitness (filippo.io/torchwood, the c2sp.org/tlog-witness
// implementation) with its key in a dedicated ssh-agent, as its README
// runs it. .ci/run installs litewitness and witnessctl; LATCH_LITEWITNESS_DIR
// names the directory holding them (else they are looked up on PATH).
// Without them a test skips, or fails under CI.
package witnesstest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// Name is the witness's name, the name on its cosignatures.
const Name = "witness.latch.test/w1"

// Witness is a running litewitness.
type Witness struct {
	// URL is its base URL; Key its cosignature verifier key.
	URL, Key string
	db, ctl  string
	log      *testbin.Buffer
}

// Log is what litewitness printed.
func (w *Witness) Log() string { return w.log.String() }

// binary finds litewitness or witnessctl.
func binary(tb testing.TB, name string) string {
	tb.Helper()
	if d := os.Getenv("LATCH_LITEWITNESS_DIR"); d != "" {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil { //nolint:gosec // the test environment names the directory of the witness binaries
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := fmt.Sprintf("witnesstest: %s not found: install it with `GOTOOLCHAIN=go1.27.3 GOBIN=DIR go install filippo.io/torchwood/cmd/{litewitness,witnessctl}@v0.10.0` and set LATCH_LITEWITNESS_DIR=DIR (.ci/run does)", name)
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// vkeyLine is litewitness's start-up log line naming its verifier key.
var vkeyLine = regexp.MustCompile(`msg="verifier key" vkey=(\S+)`)

// Start runs a witness until the test ends.
func Start(tb testing.TB) *Witness {
	tb.Helper()
	lw, ctl := binary(tb, "litewitness"), binary(tb, "witnessctl")
	for _, tool := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Fatalf("witnesstest: %s not found (apt-get install -y openssh-client)", tool)
		}
	}
	// A unix socket path must stay short: not under a long TMPDIR.
	dir, err := os.MkdirTemp("/tmp", "lw")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	key, sock := filepath.Join(dir, "key"), filepath.Join(dir, "agent.sock")
	run(tb, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "witnesstest", "-f", key)
	fp := strings.Fields(run(tb, nil, "ssh-keygen", "-l", "-E", "sha256", "-f", key+".pub"))
	if len(fp) < 2 || !strings.HasPrefix(fp[1], "SHA256:") {
		tb.Fatalf("witnesstest: ssh-keygen -l printed %q, want a SHA256: fingerprint", fp)
	}
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	agentLog := &testbin.Buffer{}
	agent.Stdout, agent.Stderr = agentLog, agentLog
	if err := agent.Start(); err != nil {
		tb.Fatalf("witnesstest: ssh-agent: %v", err)
	}
	tb.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	waitFor(tb, func() bool { _, err := os.Stat(sock); return err == nil }, "ssh-agent's socket\n"+agentLog.String())
	run(tb, []string{"SSH_AUTH_SOCK=" + sock}, "ssh-add", "-q", key)

	w := &Witness{db: filepath.Join(dir, "litewitness.db"), ctl: ctl, log: &testbin.Buffer{}}
	// A free port can be taken between probe and bind: try a few.
	for attempt := 0; attempt < 3; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cmd := exec.Command(lw, "-name", Name, "-db", w.db, "-ssh-agent", sock, "-key", fp[1], "-listen", addr)
		w.log = &testbin.Buffer{}
		cmd.Stdout, cmd.Stderr = w.log, w.log
		if err := cmd.Start(); err != nil {
			tb.Fatalf("witnesstest: litewitness: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				m := vkeyLine.FindStringSubmatch(w.log.String())
				if m == nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				w.URL, w.Key = "http://"+addr, m[1]
				tb.Cleanup(func() {
					cmd.Process.Kill()
					<-exited
					if tb.Failed() {
						tb.Logf("litewitness log:\n%s", w.log.String())
					}
				})
				return w
			}
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Kill()
		<-exited
	}
	tb.Fatalf("witnesstest: litewitness did not start:\n%s", w.log.String())
	return nil
}

// AddLog makes the witness accept checkpoints of the log named origin
// signed by vkey (a journal's verifier key, DATA/keys/journal.pub).
func (w *Witness) AddLog(tb testing.TB, vkey string) {
	tb.Helper()
	vkey = strings.TrimSpace(vkey)
	origin, _, _ := strings.Cut(vkey, "+")
	run(tb, nil, w.ctl, "add-log", "-db", w.db, "-origin", origin)
	run(tb, nil, w.ctl, "add-key", "-db", w.db, "-origin", origin, "-key", vkey)
}

func run(tb testing.TB, env []string, name string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("witnesstest: %s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func waitFor(tb testing.TB, ok func() bool, what string) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	tb.Fatalf("witnesstest: timed out waiting for %s", what)
}
