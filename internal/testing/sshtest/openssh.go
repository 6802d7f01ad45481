package sshtest

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/testbin"

	"golang.org/x/crypto/ssh"
)

// SSHDPath is where Debian's openssh-server installs sshd.
const SSHDPath = "/usr/sbin/sshd"

// OpenSSHOptions configures StartOpenSSH.
type OpenSSHOptions struct {
	// AuthorizedKey is the client key allowed to log in (required).
	AuthorizedKey ssh.PublicKey
	// Config holds extra sshd_config lines, e.g. "AllowStreamLocalForwarding no".
	Config []string
}

// OpenSSH is a real sshd running unprivileged on 127.0.0.1 with a private
// config. Only the user running the test can log in; there are no PTYs.
type OpenSSH struct {
	addr    string
	hostKey ssh.PublicKey
	user    string
	log     *testbin.Buffer
}

// Addr returns host:port.
func (o *OpenSSH) Addr() string { return o.addr }

// HostKey returns the ed25519 host key in authorized_keys form.
func (o *OpenSSH) HostKey() string { return AuthorizedKey(o.hostKey) }

// User returns the account to log in as: the user running the test.
func (o *OpenSSH) User() string { return o.user }

// Log returns what sshd has written so far (it runs with -e, LogLevel VERBOSE).
func (o *OpenSSH) Log() string { return o.log.String() }

// StartOpenSSH runs /usr/sbin/sshd -D -e -f <private config> on a free
// loopback port and stops it at cleanup. It skips the test when sshd is not
// installed. As root, sshd also needs its privilege separation directory
// /run/sshd, which the init script normally creates; StartOpenSSH creates
// it when missing.
func StartOpenSSH(tb testing.TB, opts OpenSSHOptions) *OpenSSH {
	tb.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		tb.Skipf("sshtest: %s not found: install openssh-server (apt-get install -y openssh-server) to run this test", SSHDPath)
	}
	if opts.AuthorizedKey == nil {
		tb.Fatalf("sshtest: StartOpenSSH needs an AuthorizedKey")
	}
	u, err := user.Current()
	if err != nil {
		tb.Fatalf("sshtest: current user: %v", err)
	}
	if os.Geteuid() == 0 {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			tb.Skipf("sshtest: sshd as root needs /run/sshd: %v", err)
		}
	}

	dir := shortTempDir(tb)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatalf("sshtest: host key: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "sshtest host key")
	if err != nil {
		tb.Fatalf("sshtest: marshal host key: %v", err)
	}
	hostKeyPath := filepath.Join(dir, "ssh_host_ed25519_key")
	if err := os.WriteFile(hostKeyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		tb.Fatalf("sshtest: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatalf("sshtest: %v", err)
	}
	akPath := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(akPath, ssh.MarshalAuthorizedKey(opts.AuthorizedKey), 0o600); err != nil {
		tb.Fatalf("sshtest: %v", err)
	}

	// A free port can be taken by someone else between probe and bind:
	// try a few, each bounded in time.
	var lastLog string
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("sshtest: free port: %v", err)
		}
		cfg := []string{
			fmt.Sprintf("Port %d", port),
			"ListenAddress 127.0.0.1",
			"HostKey " + hostKeyPath,
			"PidFile " + filepath.Join(dir, "sshd.pid"),
			"AuthorizedKeysFile " + akPath,
			"UsePAM no",
			"StrictModes no",
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"PubkeyAuthentication yes",
			"LogLevel VERBOSE",
		}
		cfg = append(cfg, opts.Config...)
		cfgPath := filepath.Join(dir, "sshd_config")
		if err := os.WriteFile(cfgPath, []byte(strings.Join(cfg, "\n")+"\n"), 0o600); err != nil {
			tb.Fatalf("sshtest: %v", err)
		}
		o := &OpenSSH{addr: fmt.Sprintf("127.0.0.1:%d", port), hostKey: signer.PublicKey(), user: u.Username, log: &testbin.Buffer{}}
		cmd := exec.Command(SSHDPath, "-D", "-e", "-f", cfgPath)
		cmd.Stdout, cmd.Stderr = o.log, o.log
		cmd.SysProcAttr = sshdProcAttr()
		if err := cmd.Start(); err != nil {
			tb.Fatalf("sshtest: start sshd: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if waitBanner(o.addr, exited, 10*time.Second) {
			tb.Cleanup(func() {
				_ = cmd.Process.Signal(os.Interrupt)
				select {
				case <-exited:
				case <-time.After(5 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
				if tb.Failed() {
					tb.Logf("sshd log:\n%s", o.log.String())
				}
			})
			return o
		}
		_ = cmd.Process.Kill()
		<-exited
		lastLog = o.log.String()
	}
	tb.Fatalf("sshtest: sshd did not start; its log:\n%s", lastLog)
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitBanner polls addr until it answers with an SSH banner, sshd exits,
// or the time is up.
func waitBanner(addr string, exited <-chan struct{}, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			_ = c.Close()
			if strings.HasPrefix(line, "SSH-2.0-") {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
