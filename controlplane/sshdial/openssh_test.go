package sshdial

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/internal/testing/sshtest"
)

// openSSHTarget starts a real sshd with extra config lines and returns a
// target pinned to its host key, logging in as the current user.
func openSSHTarget(t *testing.T, config ...string) (*sshtest.OpenSSH, Target) {
	t.Helper()
	signer := sshtest.NewSigner(t)
	o := sshtest.StartOpenSSH(t, sshtest.OpenSSHOptions{AuthorizedKey: signer.PublicKey(), Config: config})
	return o, Target{Name: "openssh", Address: o.Addr(), User: o.User(), HostKey: o.HostKey(), Signer: signer}
}

func TestOpenSSH(t *testing.T) {
	o, target := openSSHTarget(t)
	p := newPool(t, nil)
	c, err := p.Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client: %v\nsshd log:\n%s", err, o.Log())
	}

	t.Run("DialUnix", func(t *testing.T) {
		sock := sshtest.EchoSocket(t)
		conn, err := c.DialUnix(ctxT(t), sock)
		if err != nil {
			t.Fatalf("DialUnix(%s): %v", sock, err)
		}
		defer conn.Close()
		echoRoundTrip(t, conn, "through OpenSSH")
	})

	t.Run("Exec", func(t *testing.T) {
		argv := []string{"printf", `%s\n`, "a b", "it's", "$HOME", "`id`", "*"}
		res, err := c.Exec(ctxT(t), argv, nil)
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		want := "a b\nit's\n$HOME\n`id`\n*\n"
		if res.ExitCode != 0 || string(res.Stdout) != want {
			t.Errorf("Exec(%q) = exit %d, stdout %q; want exit 0, %q", argv, res.ExitCode, res.Stdout, want)
		}
		res, err = c.Exec(ctxT(t), []string{"sh", "-c", "cat; echo err >&2; exit 7"}, strings.NewReader("in"))
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		got := []string{string(res.Stdout), string(res.Stderr)}
		if diff := cmp.Diff([]string{"in", "err\n"}, got); res.ExitCode != 7 || diff != "" {
			t.Errorf("Exec = exit %d, output diff (-want +got):\n%s", res.ExitCode, diff)
		}
	})

	t.Run("MissingSocket", func(t *testing.T) {
		_, err := c.DialUnix(ctxT(t), "/nonexistent/latch-hostagent.sock")
		if !errors.Is(err, ErrStreamLocalRefused) || !strings.Contains(err.Error(), "socket is missing") {
			t.Errorf("DialUnix(missing socket) error = %v, want ErrStreamLocalRefused naming a missing socket", err)
		}
	})

	t.Run("ChangedHostKey", func(t *testing.T) {
		changed := target
		changed.Name = "openssh-rekeyed"
		changed.HostKey = otherKey(t)
		if _, err := p.Client(ctxT(t), changed); !errors.Is(err, ErrHostKeyChanged) {
			t.Errorf("Client(changed key) error = %v, want ErrHostKeyChanged", err)
		}
	})
}

// TestOpenSSHStreamLocalRefused checks that each sshd setting that refuses
// direct-streamlocal in OpenSSH 9.2 gives ErrStreamLocalRefused, and that
// sshd's log confirms the refusal.
func TestOpenSSHStreamLocalRefused(t *testing.T) {
	tests := []struct {
		name    string
		config  []string
		sshdLog string // what sshd logs for the refusal
	}{
		{"AllowStreamLocalForwarding no", []string{"AllowStreamLocalForwarding no"}, "refused streamlocal port forward"},
		{"DisableForwarding yes", []string{"DisableForwarding yes"}, "refused streamlocal port forward"},
		{"AllowTcpForwarding no", []string{"AllowTcpForwarding no"}, "but the request was denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, target := openSSHTarget(t, tt.config...)
			c, err := newPool(t, nil).Client(ctxT(t), target)
			if err != nil {
				t.Fatalf("Client: %v\nsshd log:\n%s", err, o.Log())
			}
			sock := sshtest.EchoSocket(t)
			_, err = c.DialUnix(ctxT(t), sock)
			if !errors.Is(err, ErrStreamLocalRefused) {
				t.Fatalf("DialUnix() error = %v, want ErrStreamLocalRefused\nsshd log:\n%s", err, o.Log())
			}
			// The refusal, not a missing socket, must be what happened.
			if !waitLog(o, tt.sshdLog) {
				t.Errorf("sshd did not log %q; log:\n%s", tt.sshdLog, o.Log())
			}
			if !strings.Contains(err.Error(), tt.name) {
				t.Errorf("error does not name the setting %q", tt.name)
			}
			// The connection survives a refused channel.
			if _, err := c.Exec(ctxT(t), []string{"true"}, nil); err != nil {
				t.Errorf("Exec after refused channel: %v", err)
			}
		})
	}
}

// TestOpenSSHStreamLocalMatchUser checks the remedy ErrStreamLocalRefused
// gives: under a hardened global config, the Match User block it prints
// re-allows streamlocal for the latch user.
func TestOpenSSHStreamLocalMatchUser(t *testing.T) {
	hardened := []string{"AllowTcpForwarding no", "AllowStreamLocalForwarding no", "DisableForwarding yes"}
	tests := []struct {
		name   string
		remedy []string
	}{
		{"printed block", strings.Split(strings.TrimSpace(matchBlock), "\n")[1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := append(append([]string{}, hardened...), "Match User "+currentUser(t))
			for _, l := range tt.remedy {
				cfg = append(cfg, "    "+strings.TrimSpace(l))
			}
			o, target := openSSHTarget(t, cfg...)
			c, err := newPool(t, nil).Client(ctxT(t), target)
			if err != nil {
				t.Fatalf("Client: %v", err)
			}
			conn, err := c.DialUnix(ctxT(t), sshtest.EchoSocket(t))
			if err != nil {
				t.Fatalf("DialUnix with config %q: %v\nsshd log:\n%s", cfg, err, o.Log())
			}
			defer conn.Close()
			echoRoundTrip(t, conn, "allowed by Match")
		})
	}
}

// waitLog waits (bounded) for sshd to log want: sshd writes its log line
// around the time it answers, through a pipe.
func waitLog(o *sshtest.OpenSSH, want string) bool {
	for range 250 {
		if strings.Contains(o.Log(), want) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
