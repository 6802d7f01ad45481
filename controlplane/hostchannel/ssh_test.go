package hostchannel

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/sshtest"
	"github.com/latchhq/latch/internal/testing/testbin"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// sshEnv is an in-process SSH server in front of a real host agent, and a
// channel that reaches the agent through it.
type sshEnv struct {
	srv    *sshtest.Server
	agent  *agentProc
	ch     *Channel
	creds  *fakeCreds
	target *tools.Target
}

func newSSHEnv(t *testing.T, opts sshtest.Options, mod func(*Config)) *sshEnv {
	t.Helper()
	signer, cred := newKey(t)
	opts.AuthorizedKey = signer.PublicKey()
	srv := sshtest.Start(t, opts)
	a := startAgent(t, "", "")
	creds := &fakeCreds{creds: map[string]vault.Credential{"deploy-ssh-key": cred}}
	cfg := Config{Credentials: creds, SSH: newPool(t), WaitSlice: 200e6}
	if mod != nil {
		mod(&cfg)
	}
	return &sshEnv{
		srv: srv, agent: a, ch: newChannel(t, cfg), creds: creds,
		target: &tools.Target{
			Name: "db-01", Channel: tools.ChannelSSH, HostTarget: tools.HostTarget{Address: srv.Addr(), User: "deploy", HostKey: srv.HostKey(), HostagentSocket: a.Socket},
			Credential: "deploy-ssh-key",
		},
	}
}

func TestSSHDispatch(t *testing.T) {
	e := newSSHEnv(t, sshtest.Options{}, nil)
	file := filepath.Join(t.TempDir(), "effects")
	call := newCall("act_ssh_once", e.target, appendArgv(file, "over ssh")...)
	for i, op := range []func() engine.Attempt{
		func() engine.Attempt { return e.ch.Dispatch(ctxT(t), call) },
		func() engine.Attempt { return e.ch.Dispatch(ctxT(t), call) },
		func() engine.Attempt { return e.ch.Query(ctxT(t), call) },
	} {
		got := op()
		if got.Class != engine.Observed || got.Outcome != recordv1.Outcome_OUTCOME_SUCCEEDED || string(got.Result.GetBody()) != "over ssh\n" {
			t.Errorf("call %d = %s %v body %q (%s), want Observed succeeded %q", i, className(got.Class), got.Outcome, got.Result.GetBody(), got.Reason, "over ssh\n")
		}
	}
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line", got)
	}
	if n := e.srv.Accepted(); n != 1 {
		t.Errorf("SSH connections = %d, want 1 (the agent connection is reused)", n)
	}
}

// TestSSHDropMidCommand breaks the SSH connection while the command runs
// (cut at the TCP level, or frozen until keepalive gives up): the dispatch
// cannot see the outcome (Unknown, never re-sent), and a query after
// reconnecting gets it from the marker; the command ran once.
func TestSSHDropMidCommand(t *testing.T) {
	tests := []struct {
		name    string
		cut     func(*sshtest.Server)
		restore func(*sshtest.Server)
		mention string
	}{
		{name: "connection cut", cut: (*sshtest.Server).DropAll, restore: func(*sshtest.Server) {}, mention: "not re-sent"},
		{name: "peer frozen", cut: (*sshtest.Server).Freeze, restore: (*sshtest.Server).Thaw, mention: "keepalive timeout"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newSSHEnv(t, sshtest.Options{}, nil)
			dir := t.TempDir()
			file, gate := filepath.Join(dir, "effects"), filepath.Join(dir, "gate")
			id := "act_ssh_drop_" + strconv.Itoa(i)
			call := newCall(id, e.target, gatedAppendArgv(gate, file)...)

			done := make(chan engine.Attempt, 1)
			go func() { done <- e.ch.Dispatch(ctxT(t), call) }()
			testbin.Eventually(t, "command running", func() bool {
				return e.agent.marker(t, id).GetState() == hostagentv1.MarkerState_MARKER_STATE_RUNNING
			})
			tt.cut(e.srv)
			got := <-done
			if got.Class != engine.Unknown || !strings.Contains(got.Reason, tt.mention) {
				t.Fatalf("Dispatch() with the connection broken = %s (%s), want Unknown naming %q", className(got.Class), got.Reason, tt.mention)
			}
			tt.restore(e.srv)
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			q := queryUntilSettled(t, e.ch, call)
			if q.Class != engine.Observed || q.Outcome != recordv1.Outcome_OUTCOME_SUCCEEDED {
				t.Errorf("Query() after reconnect = %s %v (%s), want Observed succeeded", className(q.Class), q.Outcome, q.Reason)
			}
			if n := e.srv.Accepted(); n < 2 {
				t.Errorf("SSH connections = %d, want a second one after the break", n)
			}
			if got := testbin.ReadLines(t, file); len(got) != 1 {
				t.Errorf("effects = %q, want exactly one line", got)
			}
		})
	}
}

func TestSSHRefusals(t *testing.T) {
	tests := []struct {
		name    string
		opts    sshtest.Options
		mod     func(*Config)
		change  func(*sshEnv)
		mention string
		final   bool // the failure stays until fixed: no dispatch retries
	}{
		{name: "no SSH pool", mod: func(c *Config) { c.SSH = nil }, mention: "no SSH pool"},
		{name: "vault locked", change: func(e *sshEnv) { e.creds.locked = true }, mention: "latch vault unlock"},
		{name: "credential is not an SSH key", change: func(e *sshEnv) {
			e.creds.creds["deploy-ssh-key"] = vault.Credential{Kind: vault.KindBearer, Fields: vault.Fields{"token": "tok-secret"}}
		}, mention: "needs an ssh_key"},
		{name: "key does not parse", change: func(e *sshEnv) {
			e.creds.creds["deploy-ssh-key"] = vault.Credential{Kind: vault.KindSSHKey, Fields: vault.Fields{"private_key": string([]byte("not-a-key-secret"))}}
		}, mention: "latch vault put"},
		{name: "host key changed", change: func(e *sshEnv) {
			other, _ := newKey(t)
			e.target.HostKey = sshtest.AuthorizedKey(other.PublicKey())
		}, mention: "update host_key in the catalog", final: true},
		{name: "host key not pinned", change: func(e *sshEnv) { e.target.HostKey = "" }, mention: "set host_key in the catalog", final: true},
		{name: "streamlocal refused", opts: sshtest.Options{RefuseStreamLocal: true}, mention: "AllowStreamLocalForwarding"},
		{name: "agent socket missing", change: func(e *sshEnv) { e.target.HostagentSocket = "/nonexistent/agent.sock" }, mention: "socket is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newSSHEnv(t, tt.opts, tt.mod)
			if tt.change != nil {
				tt.change(e)
			}
			file := filepath.Join(t.TempDir(), "effects")
			call := newCall("act_refused", e.target, appendArgv(file, "ran")...)
			got := e.ch.Dispatch(ctxT(t), call)
			if got.Class != engine.NotSent || !strings.Contains(got.Reason, tt.mention) {
				t.Errorf("Dispatch() = %s (%s), want NotSent mentioning %q", className(got.Class), got.Reason, tt.mention)
			}
			if got.Final != tt.final {
				t.Errorf("Dispatch().Final = %v, want %v (%s)", got.Final, tt.final, got.Reason)
			}
			if strings.Contains(got.Reason, "secret") {
				t.Errorf("Dispatch() reason leaks credential material: %s", got.Reason)
			}
			if q := e.ch.Query(ctxT(t), call); q.Class != engine.Unknown {
				t.Errorf("Query() = %s (%s), want Unknown (a query that did not go out proves nothing)", className(q.Class), q.Reason)
			}
			if got := testbin.ReadLines(t, file); len(got) != 0 {
				t.Errorf("effects = %q, want none", got)
			}
		})
	}
}

func TestSSHTrustOnFirstUse(t *testing.T) {
	e := newSSHEnv(t, sshtest.Options{}, func(c *Config) { c.TrustOnFirstUse = true })
	e.target.HostKey = ""
	got := e.ch.Dispatch(ctxT(t), newCall("act_tofu", e.target, "true"))
	if got.Class != engine.Observed {
		t.Errorf("Dispatch() with TrustOnFirstUse = %s (%s), want Observed", className(got.Class), got.Reason)
	}
}

func TestOpenSSH(t *testing.T) {
	signer, cred := newKey(t)
	o := sshtest.StartOpenSSH(t, sshtest.OpenSSHOptions{AuthorizedKey: signer.PublicKey()})
	a := startAgent(t, "", "")
	c := newChannel(t, Config{Credentials: &fakeCreds{creds: map[string]vault.Credential{"k": cred}}, SSH: newPool(t)})
	target := &tools.Target{
		Name: "openssh", Channel: tools.ChannelSSH, HostTarget: tools.HostTarget{Address: o.Addr(), User: o.User(), HostKey: o.HostKey(), HostagentSocket: a.Socket},
		Credential: "k",
	}
	file := filepath.Join(t.TempDir(), "effects")
	call := newCall("act_openssh", target, appendArgv(file, "through sshd")...)
	got := c.Dispatch(ctxT(t), call)
	if got.Class != engine.Observed || got.Outcome != recordv1.Outcome_OUTCOME_SUCCEEDED || string(got.Result.GetBody()) != "through sshd\n" {
		t.Fatalf("Dispatch() via OpenSSH = %s %v body %q (%s), want Observed succeeded\nsshd log:\n%s",
			className(got.Class), got.Outcome, got.Result.GetBody(), got.Reason, o.Log())
	}
	if q := c.Query(ctxT(t), call); q.Class != engine.Observed {
		t.Errorf("Query() via OpenSSH = %s (%s), want Observed", className(q.Class), q.Reason)
	}
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line", got)
	}
}

func TestPlainSSH(t *testing.T) {
	e := newSSHEnv(t, sshtest.Options{}, nil)
	e.target.HostagentSocket = ""
	dir := t.TempDir()

	t.Run("exit status observed", func(t *testing.T) {
		call := newCall("act_plain_exit", e.target, "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
		got := e.ch.Dispatch(ctxT(t), call)
		if got.Class != engine.Observed || got.Outcome != recordv1.Outcome_OUTCOME_FAILED_AT_TARGET ||
			got.Result.GetExitCode() != 3 || string(got.Result.GetBody()) != "out\nerr\n" {
			t.Errorf("Dispatch() = %s %v exit %d body %q (%s), want Observed failed_at_target exit 3 %q",
				className(got.Class), got.Outcome, got.Result.GetExitCode(), got.Result.GetBody(), got.Reason, "out\nerr\n")
		}
		if q := e.ch.Query(ctxT(t), call); q.Class != engine.Unsupported || !strings.Contains(q.Reason, "operator decides") {
			t.Errorf("Query() = %s (%s), want Unsupported saying an operator decides", className(q.Class), q.Reason)
		}
	})

	t.Run("cwd and env", func(t *testing.T) {
		call := newCall("act_plain_env", e.target, "/bin/sh", "-c", `pwd; echo "$GREETING"`)
		call.Tool.Cwd = dir
		call.Tool.Env = map[string]string{"GREETING": "{{g}}"}
		call.Arguments = map[string]any{"g": `it's $(id) "quoted"`}
		got := e.ch.Dispatch(ctxT(t), call)
		want := dir + "\nit's $(id) \"quoted\"\n"
		if got.Class != engine.Observed || string(got.Result.GetBody()) != want {
			t.Errorf("Dispatch() = %s body %q (%s), want Observed %q", className(got.Class), got.Result.GetBody(), got.Reason, want)
		}
	})

	t.Run("timeout stops the command on the host", func(t *testing.T) {
		if _, err := exec.LookPath("timeout"); err != nil {
			t.Skip("timeout(1) is not installed on this host")
		}
		pidFile := filepath.Join(dir, "pid")
		call := newCall("act_plain_timeout", e.target, "/bin/sh", "-c", `echo $$ > "`+pidFile+`"; exec sleep 30`)
		call.Tool.Timeout = time.Second
		got := e.ch.Dispatch(ctxT(t), call)
		if got.Class != engine.Observed || got.Outcome != recordv1.Outcome_OUTCOME_FAILED_AT_TARGET ||
			got.Result.GetExitCode() != 124 || !strings.Contains(got.Reason, "timed out after 1s") {
			t.Errorf("Dispatch() = %s %v exit %d (%s), want Observed failed_at_target exit 124 timed out",
				className(got.Class), got.Outcome, got.Result.GetExitCode(), got.Reason)
		}
		raw, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		testbin.Eventually(t, "the timed-out command gone from the host", func() bool {
			return syscall.Kill(pid, 0) == syscall.ESRCH
		})
	})

	t.Run("drop is unknown", func(t *testing.T) {
		started, gate := filepath.Join(dir, "started"), filepath.Join(dir, "gate")
		script := `touch "` + started + `"; i=0; while [ ! -e "` + gate + `" ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done`
		call := newCall("act_plain_drop", e.target, "/bin/sh", "-c", script)
		done := make(chan engine.Attempt, 1)
		go func() { done <- e.ch.Dispatch(ctxT(t), call) }()
		testbin.Eventually(t, "command started", func() bool { _, err := os.Stat(started); return err == nil })
		e.srv.DropAll()
		got := <-done
		_ = os.WriteFile(gate, nil, 0o600)
		if got.Class != engine.Unknown {
			t.Errorf("Dispatch() with the connection cut = %s (%s), want Unknown", className(got.Class), got.Reason)
		}
	})

	t.Run("exec refused is not sent", func(t *testing.T) {
		r := newSSHEnv(t, sshtest.Options{RefuseExec: true}, nil)
		r.target.HostagentSocket = ""
		got := r.ch.Dispatch(ctxT(t), newCall("act_plain_refused", r.target, "true"))
		if got.Class != engine.NotSent {
			t.Errorf("Dispatch() with exec refused = %s (%s), want NotSent", className(got.Class), got.Reason)
		}
	})
}

// TestSSHConcurrentDispatch runs several executions at once over one target:
// each runs once and all share one SSH connection.
func TestSSHConcurrentDispatch(t *testing.T) {
	e := newSSHEnv(t, sshtest.Options{}, nil)
	file := filepath.Join(t.TempDir(), "effects")
	const n = 8
	results := make(chan engine.Attempt, n)
	for i := range n {
		go func() {
			results <- e.ch.Dispatch(ctxT(t), newCall("act_concurrent_"+strconv.Itoa(i), e.target, appendArgv(file, "ran")...))
		}()
	}
	for range n {
		if got := <-results; got.Class != engine.Observed {
			t.Errorf("Dispatch() = %s (%s), want Observed", className(got.Class), got.Reason)
		}
	}
	if got := testbin.ReadLines(t, file); len(got) != n {
		t.Errorf("effects = %d lines, want %d", len(got), n)
	}
	if got := e.srv.Accepted(); got != 1 {
		t.Errorf("SSH connections = %d, want 1", got)
	}
}

// TestSSHKeyRotation rotates the target's key in the vault while a command
// runs: the next call reaches the agent over a new SSH connection made with
// the new key, and the running command's dispatch, still waiting on the old
// connection, sees its outcome (it is not cut into an unknown).
func TestSSHKeyRotation(t *testing.T) {
	_, first := newKey(t)
	_, second := newKey(t)
	srv := sshtest.Start(t, sshtest.Options{}) // accepts any client key
	a := startAgent(t, "", "")
	creds := &fakeCreds{creds: map[string]vault.Credential{"deploy-ssh-key": first}}
	ch := newChannel(t, Config{Credentials: creds, SSH: newPool(t), WaitSlice: 200e6})
	target := &tools.Target{Name: "db-01", Channel: tools.ChannelSSH, HostTarget: tools.HostTarget{Address: srv.Addr(), User: "deploy", HostKey: srv.HostKey(), HostagentSocket: a.Socket},
		Credential: "deploy-ssh-key"}

	dir := t.TempDir()
	file, gate := filepath.Join(dir, "effects"), filepath.Join(dir, "gate")
	running := newCall("act_rotation_running", target, gatedAppendArgv(gate, file)...)
	done := make(chan engine.Attempt, 1)
	go func() { done <- ch.Dispatch(ctxT(t), running) }()
	testbin.Eventually(t, "command past the gate", func() bool { _, err := os.Stat(file + ".began"); return err == nil })

	creds.mu.Lock()
	creds.creds["deploy-ssh-key"] = second
	creds.mu.Unlock()
	after := newCall("act_rotation_after", target, appendArgv(filepath.Join(dir, "after"), "new key")...)
	if got := ch.Dispatch(ctxT(t), after); got.Class != engine.Observed || got.Outcome != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("Dispatch() after the rotation = %s %v (%s), want Observed succeeded", className(got.Class), got.Outcome, got.Reason)
	}
	if n := srv.Accepted(); n != 2 {
		t.Errorf("SSH connections = %d, want 2 (a new one for the new key)", n)
	}

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.Class != engine.Observed || got.Outcome != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("Dispatch() that was running during the rotation = %s %v (%s), want Observed succeeded", className(got.Class), got.Outcome, got.Reason)
	}
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line", got)
	}
}
