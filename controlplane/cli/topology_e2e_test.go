package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/testing/testbin"
	"github.com/latchhq/latch/internal/testing/testpki"
)

const (
	e2eFrontID    = "spiffe://latch.test/front/mcp-1"
	e2eOperatorID = "spiffe://latch.test/operator/alice"
)

// pki is a CA with a server, a front and an operator certificate, and
// another CA's certificate with the front's identity, written as PEM files.
type pki struct {
	ca, serverCert, serverKey string
	frontCert, frontKey       string
	operatorCert, operatorKey string
	foreignCert, foreignKey   string
	unlistedCert, unlistedKey string
}

func writePKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	ca, other := testpki.NewCA(t, "latch CA"), testpki.NewCA(t, "another CA")
	var p pki
	p.ca = ca.Write(t, dir, "ca")
	p.serverCert, p.serverKey = ca.Server(t).Write(t, dir, "server")
	p.frontCert, p.frontKey = ca.Client(t, "mcp-1", e2eFrontID).Write(t, dir, "front")
	p.operatorCert, p.operatorKey = ca.Client(t, "alice", e2eOperatorID).Write(t, dir, "operator")
	p.foreignCert, p.foreignKey = other.Client(t, "mcp-1", e2eFrontID).Write(t, dir, "foreign")
	p.unlistedCert, p.unlistedKey = ca.Client(t, "mcp-2", "spiffe://latch.test/front/mcp-2").Write(t, dir, "unlisted")
	return p
}

// startProc runs a real process and waits until its stderr matches ready;
// it returns the first submatch. The process is killed at cleanup.
func startProc(t *testing.T, name string, ready *regexp.Regexp, bin string, args ...string) (*exec.Cmd, string) {
	cmd, m, _ := startProcStop(t, name, ready, bin, args...)
	return cmd, m
}

// startProcStop is startProc that also returns stop: SIGTERM, then wait
// for the exit.
func startProcStop(t *testing.T, name string, ready *regexp.Regexp, bin string, args ...string) (*exec.Cmd, string, func()) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out := &testbin.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	var m []string
	testbin.Eventually(t, name+" to be ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("%s exited before it was ready:\n%s", name, out.String())
		default:
		}
		m = ready.FindStringSubmatch(out.String())
		return m != nil
	})
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}
	return cmd, m[1], stop
}

var tcpReady = regexp.MustCompile(`control plane ready: .*tcp=(\S+)`)

// TestFrontOverMTLSInSeparateProcess: `latch serve` with its API on TCP
// and mutual TLS, `latch-mcp` as another process with a front certificate;
// one MCP tool call completes with one effect at the target, and the CLI
// reaches the same listener as an operator, or is refused as a front.
func TestFrontOverMTLSInSeparateProcess(t *testing.T) {
	demo, url := newTarget(t)
	catalog := writeCatalog(t, url)
	data := t.TempDir()
	p := writePKI(t)
	_, addr := startProc(t, "latch serve", tcpReady, latchBin, "serve", "--data", data, "--catalog", catalog,
		"--vault-key-file", filepath.Join(data, "vault.key"), "--trusted-actor", "alice", "--log-level", "debug",
		"--grpc-listen", "127.0.0.1:0", "--tls-cert", p.serverCert, "--tls-key", p.serverKey, "--tls-client-ca", p.ca,
		"--front-identity", e2eFrontID, "--operator-identity", "alice="+e2eOperatorID,
		// The front serves loopback callers without a token as alice: the
		// control plane lets it act as alice only because it is bound to her.
		"--front-actor", e2eFrontID+"=alice")

	_, mcpURL := startProc(t, "latch-mcp", regexp.MustCompile(`serving MCP: url=(\S+)`), mcpBin,
		"--control-plane", addr, "--tls-ca", p.ca, "--tls-cert", p.frontCert, "--tls-key", p.frontKey,
		"--listen", "127.0.0.1:0", "--actor", "alice", "--log-level", "debug")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "topology-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect to latch-mcp at %s: %v", mcpURL, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": "9.0.0"}})
	if err != nil {
		t.Fatalf("tools/call deploy_release through latch-mcp over mTLS: %v", err)
	}
	if res.IsError {
		t.Fatalf("tools/call deploy_release: tool error %v", res.Content)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if sc["state"] != "completed" && sc["state"] != "delivered" {
		t.Errorf("tools/call deploy_release state = %v, want completed (%v)", sc["state"], sc)
	}
	if got := demo.Effects("release"); got != 1 {
		t.Errorf("target effects = %d, want exactly 1", got)
	}

	tcp := []string{"--addr", "tcp://" + addr, "--tls-ca", p.ca}
	// An operator certificate lists executions and reaches operator RPCs.
	out, code := runCLI(t, append([]string{"exec", "list", "--tls-cert", p.operatorCert, "--tls-key", p.operatorKey}, tcp...)...)
	if code != 0 || !strings.Contains(out, "deploy_release") {
		t.Errorf("exec list as an operator over mTLS: exit %d\n%s", code, out)
	}
	out, code = runCLI(t, append([]string{"session", "list", "--tls-cert", p.operatorCert, "--tls-key", p.operatorKey}, tcp...)...)
	if code != 0 {
		t.Errorf("session list as an operator over mTLS: exit %d\n%s", code, out)
	}
	// The front's certificate never reaches an operator RPC.
	out, code = runCLI(t, append([]string{"approvals", "approve", "act_01JZZZZZZZZZZZZZZZZZZZZZZZ", "--tls-cert", p.frontCert, "--tls-key", p.frontKey}, tcp...)...)
	want := "the control plane refused ControlPlane/Approve for front " + e2eFrontID + "; operator commands need an operator certificate"
	if code != 1 || !strings.Contains(out, want) {
		t.Errorf("approvals approve with the front's certificate: exit %d, want 1 and %q:\n%s", code, want, out)
	}
	// A local RPC is refused even to an operator certificate.
	out, code = runCLI(t, append([]string{"vault", "unlock", "--key-file", filepath.Join(data, "vault.key"), "--tls-cert", p.operatorCert, "--tls-key", p.operatorKey}, tcp...)...)
	if code != 1 || !strings.Contains(out, "refused Admin/VaultUnlock for operator "+e2eOperatorID) || !strings.Contains(out, "unix socket") {
		t.Errorf("vault unlock as a remote operator: exit %d, want a refusal naming the socket:\n%s", code, out)
	}
	// alice's certificate creates console tokens for alice, never for
	// another name (a console session acts under its token's name).
	out, code = runCLI(t, append([]string{"operator", "token", "create", "root", "--tls-cert", p.operatorCert, "--tls-key", p.operatorKey}, tcp...)...)
	if code != 1 || !strings.Contains(out, `bound to the operator "alice", not "root"`) || !strings.Contains(out, "unix socket") || strings.Contains(out, "latch_op_") {
		t.Errorf("operator token create root with alice's certificate: exit %d, want 1 and a refusal naming alice and the socket:\n%s", code, out)
	}
	out, code = runCLI(t, append([]string{"operator", "token", "create", "alice", "--tls-cert", p.operatorCert, "--tls-key", p.operatorKey}, tcp...)...)
	if code != 0 || !strings.Contains(out, "for alice") {
		t.Errorf("operator token create alice with alice's certificate: exit %d\n%s", code, out)
	}
	out, code = runCLI(t, append([]string{"operator", "token", "list", "--tls-cert", p.operatorCert, "--tls-key", p.operatorKey}, tcp...)...)
	if code != 0 || !strings.Contains(out, "operator "+e2eOperatorID+" (tcp+tls)") {
		t.Errorf("operator token list: exit %d, want alice's token created by her certificate over tcp+tls:\n%s", code, out)
	}
	// No client certificate, or one from another CA: refused in the handshake.
	for name, cert := range map[string][]string{"no certificate": nil, "another CA": {"--tls-cert", p.foreignCert, "--tls-key", p.foreignKey}} {
		out, code = runCLI(t, append(append([]string{"exec", "list"}, cert...), tcp...)...)
		if code != 1 || !strings.Contains(out, "refused the TLS handshake") {
			t.Errorf("exec list with %s: exit %d, want the handshake refusal explained:\n%s", name, code, out)
		}
	}
	// A front whose certificate is not listed stops at start, saying why.
	out2, err := exec.Command(mcpBin, "--control-plane", addr, "--tls-ca", p.ca, "--tls-cert", p.unlistedCert, "--tls-key", p.unlistedKey,
		"--listen", "127.0.0.1:0", "--actor", "alice").CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "refuses this front") || !strings.Contains(string(out2), "spiffe://latch.test/front/mcp-2") {
		t.Errorf("latch-mcp with an unlisted certificate: %v, want it to stop naming its identity:\n%s", err, out2)
	}
	// Off loopback, TCP without --tls-ca is a usage error.
	if out, code := runCLI(t, "exec", "list", "--addr", "tcp://latch.invalid:7400"); code != 2 || !strings.Contains(out, "--tls-ca") {
		t.Errorf("exec list over TCP without --tls-ca: exit %d, want 2 naming --tls-ca:\n%s", code, out)
	}
}

// TestServeRefusesUnidentifiableTCP: TLS without a client CA would leave
// nobody identifiable over TCP; `latch serve` refuses to start.
func TestServeRefusesUnidentifiableTCP(t *testing.T) {
	_, url := newTarget(t)
	catalog := writeCatalog(t, url)
	p := writePKI(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"TLS without client CA", []string{"--grpc-listen", "127.0.0.1:0", "--tls-cert", p.serverCert, "--tls-key", p.serverKey}, 2, "--tls-cert-file without --tls-client-ca-file"},
		{"mTLS without identities", []string{"--grpc-listen", "127.0.0.1:0", "--tls-cert", p.serverCert, "--tls-key", p.serverKey, "--tls-client-ca", p.ca}, 1, "--front-identity or --operator-identity"},
		{"plaintext off loopback", []string{"--grpc-listen", "0.0.0.0:0"}, 1, "without TLS"},
		{"bad identity", []string{"--grpc-listen", "127.0.0.1:0", "--tls-cert", p.serverCert, "--tls-key", p.serverKey, "--tls-client-ca", p.ca, "--front-identity", "mcp-1"}, 1, "neither cn:NAME nor an absolute URI"},
		{"identities without a listener", []string{"--front-identity", e2eFrontID}, 2, "give --grpc-listen"},
		{"front bound to an invisible actor", []string{"--front-actor", e2eFrontID + "=dev\u200b"}, 2, "U+200B"},
		{"front binding with an upper-case scheme", []string{"--front-actor", "SPIFFE://latch.internal/front/mcp-1=alice"}, 2, "lower-case"},
		{"known actor with a no-break space", []string{"--actor", "dev\u00a0"}, 2, "U+00A0"},
		{"trusted actor not in NFC", []string{"--trusted-actor", "e\u0301"}, 2, "NFC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--data", t.TempDir(), "--catalog", catalog}, tt.args...)
			cmd := exec.Command(latchBin, args...)
			out, _ := cmd.CombinedOutput()
			if cmd.ProcessState.ExitCode() != tt.code || !strings.Contains(string(out), tt.want) {
				t.Errorf("latch %s: exit %d, want %d and %q:\n%s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), tt.code, tt.want, out)
			}
		})
	}
}

// TestSocketCallerOfAnotherUID: a unix-socket caller whose uid is neither
// the server's, root nor an --operator-uid is refused every RPC by name;
// an --operator-uid is served. Needs root (to run the CLI as other uids).
func TestSocketCallerOfAnotherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("runs the CLI as other uids with SysProcAttr.Credential: needs root")
	}
	const operatorUID, otherUID = 12345, 65534 // 65534: nobody
	_, url := newTarget(t)
	catalog := writeCatalog(t, url)
	// Other uids must reach the socket and the binary: world-traversable dirs.
	base := t.TempDir()
	data := filepath.Join(base, "data")
	bin := filepath.Join(base, "latch")
	copyFile(t, latchBin, bin, 0o755)
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	startProc(t, "latch serve", regexp.MustCompile(`(control plane ready)`), latchBin, "serve", "--data", data, "--catalog", catalog,
		"--vault-key-file", filepath.Join(data, "vault.key"), "--operator-uid", "12345")
	if fi, err := os.Stat(datadir.Socket(data)); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket with --operator-uid: %v %v, want mode 0666 (SO_PEERCRED decides)", fi, err)
	}
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("data dir with --operator-uid: %v %v, want mode 0711 (traversable, not readable)", fi, err)
	}
	asUID := func(uid uint32, args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = base
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	sock := "unix://" + datadir.Socket(data)
	if out, code := asUID(operatorUID, "exec", "list", "--addr", sock); code != 0 {
		t.Errorf("exec list as --operator-uid %d: exit %d\n%s", operatorUID, code, out)
	}
	if out, code := asUID(operatorUID, "vault", "status", "--addr", sock); code != 0 {
		t.Errorf("vault status as --operator-uid %d: exit %d\n%s", operatorUID, code, out)
	}
	out, code := asUID(otherUID, "exec", "list", "--addr", sock)
	if code != 1 || !strings.Contains(out, "refused ControlPlane/List for unlisted caller uid:65534") {
		t.Errorf("exec list as uid %d: exit %d, want a refusal naming the RPC and the uid:\n%s", otherUID, code, out)
	}
	out, code = asUID(otherUID, "vault", "lock", "--addr", sock)
	if code != 1 || !strings.Contains(out, "refused Admin/VaultLock for unlisted caller uid:65534") {
		t.Errorf("vault lock as uid %d: exit %d, want a refusal naming the RPC and the uid:\n%s", otherUID, code, out)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// TestPlaintextLoopbackIsFrontOnly: a loopback TCP listener without TLS
// serves agent-facing RPCs to any local process and refuses operator RPCs
// (operators use the socket).
func TestPlaintextLoopbackIsFrontOnly(t *testing.T) {
	_, url := newTarget(t)
	catalog := writeCatalog(t, url)
	data := t.TempDir()
	serveArgs := []string{"serve", "--data", data, "--catalog", catalog, "--vault-key-file", filepath.Join(data, "vault.key"), "--grpc-listen", "127.0.0.1:0"}
	_, addr, stop := startProcStop(t, "latch serve", tcpReady, latchBin, serveArgs...)
	// Past authorization: the front reaches the agent-facing List, where the
	// API refuses to list every actor's executions to a front without an
	// agent's token (it names the RPC, not the authorization table).
	if out, code := runCLI(t, "exec", "list", "--addr", "tcp://"+addr); code != 1 || !strings.Contains(out, "List: tcp:127.0.0.1:") || strings.Contains(out, "refused ControlPlane/List") {
		t.Errorf("exec list (agent-facing List) over plaintext loopback: exit %d, want it past authorization and refused by the API for want of an agent's token:\n%s", code, out)
	}
	out, code := runCLI(t, "session", "list", "--addr", "tcp://"+addr)
	if code != 1 || !regexp.MustCompile(`refused ControlPlane/ListSessions for front tcp:127\.0\.0\.1:\d+`).MatchString(out) {
		t.Errorf("session list over plaintext loopback: exit %d, want refused for the front tcp:…:\n%s", code, out)
	}
	if out, code := runCLI(t, "session", "list", "--data", data); code != 0 {
		t.Errorf("session list on the socket: exit %d\n%s", code, out)
	}
	// The access_denied record is a journal record like any: the offline
	// verify and the start-up state check accept it.
	stop()
	if out, code := runCLI(t, "audit", "verify", data); code != 0 {
		t.Errorf("audit verify after a refusal: exit %d\n%s", code, out)
	}
	startProc(t, "latch serve again", tcpReady, latchBin, serveArgs...)
}
