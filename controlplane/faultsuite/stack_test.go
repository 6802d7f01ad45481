package faultsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/testing/countingtarget"
	"github.com/latchhq/latch/internal/testing/faultproxy"
	"github.com/latchhq/latch/internal/testing/hostagenttest"
	"github.com/latchhq/latch/internal/testing/testbin"
	"github.com/latchhq/latch/mcpfront"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// Timing of every lane. The target's dispatch timeout is short so that
// trials are short. The target keeps its side of the status contract: a
// request it received ends (committed or rolled back) at maxHold after its
// arrival at the latest, a second before dispatch timeout + settle, so a
// 404 seen after that point is true absence and one seen before must not
// count as evidence.
const (
	dispatchTimeout = 1 * time.Second
	settle          = 3 * time.Second
	maxHold         = dispatchTimeout + settle - time.Second
	// hostHold is how long the host tool's command runs before its effect.
	hostHold = "0.6"
	// actor is the loopback actor of latch-mcp, trusted by latch serve.
	actor = "local"
)

// The catalog: the counting target's three HTTP tools (fx_idem,
// fx_status, fx_review) and two host tools on the host agent.
var fx = countingtarget.CatalogConfig{Prefix: "fx", Timeout: dispatchTimeout}

// Tools of the catalog, one per replay class and channel.
var (
	toolIdem   = fx.Tool(countingtarget.ClassIdem)
	toolStatus = fx.Tool(countingtarget.ClassStatus)
	toolReview = fx.Tool(countingtarget.ClassReview)
)

const (
	toolHostStatus = "fx_host_status"
	toolHostReview = "fx_host_review"
)

// hostTarget and hostTools are the host agent's part of the catalog.
const hostTarget = `  host:
    channel: local
    hostagent_socket: %[1]s
    timeout: 5s%[3]s
`

const hostTools = `  fx_host_status:
    description: Append one line on this host (the host agent's marker answers).
    input_schema: {type: object, required: [intent], properties: {intent: {type: string, pattern: "^[A-Za-z0-9_]+$"}}}
    target: host
    command: [%[2]q, "{{intent}}"]
    replay: status_query
    attach_window: 1h
  fx_host_review:
    description: Append one line on this host (an operator decides an unknown outcome).
    input_schema: {type: object, required: [intent], properties: {intent: {type: string, pattern: "^[A-Za-z0-9_]+$"}}}
    target: host
    command: [%[2]q, "{{intent}}"]
    replay: review
    attach_window: 1h
`

// hostScript records the start of the command, runs for hostHold seconds,
// then records its effect: one line per run in INTENT.effect.
const hostScript = `#!/bin/sh
d=%q
echo "$LATCH_EXECUTION_ID" >> "$d/$1.start"
sleep %s
echo "$LATCH_EXECUTION_ID" >> "$d/$1.effect"
`

// writeCatalog writes the lane's catalog. It includes `settle` when this
// build's loader knows the field, and reports whether it did.
func writeCatalog(path, proxyAddr, agentSock, script string) (bool, error) {
	for _, withSettle := range []bool{true, false} {
		c := fx
		c.Addr = proxyAddr
		extra := ""
		if withSettle {
			c.Settle = settle
			extra = "\n    settle: " + settle.String()
		}
		c.ExtraTargets = fmt.Sprintf(hostTarget, agentSock, script, extra)
		c.ExtraTools = fmt.Sprintf(hostTools, agentSock, script)
		err := countingtarget.WriteCatalog(path, c)
		if err != nil && withSettle && strings.Contains(err.Error(), "settle") {
			continue
		}
		return withSettle, err
	}
	return false, errors.New("unreachable")
}

// lane is one independent stack: control plane, MCP front, host agent,
// counting target behind a fault proxy. Trials of one lane run one after
// the other; lanes run side by side.
type lane struct {
	id      int
	dir     string
	data    string
	catalog string
	effects string // host tool's effect files
	settle  bool   // the catalog carries settle

	target *countingtarget.Target
	proxy  *faultproxy.Proxy

	mu    sync.Mutex
	cp    *testbin.Proc
	mcp   *testbin.Proc
	agent *hostagenttest.Process
	url   string

	conn *grpc.ClientConn
	api  controlplanev1.ControlPlaneClient
}

func newLane(t *testing.T, id int) *lane {
	t.Helper()
	dir, err := os.MkdirTemp("", fmt.Sprintf("fs%d-", id)) // short: unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	l := &lane{id: id, dir: dir, data: filepath.Join(dir, "d"), catalog: filepath.Join(dir, "catalog.yaml"), effects: filepath.Join(dir, "fx")}
	t.Cleanup(func() {
		l.close()
		if t.Failed() || os.Getenv("LATCH_FAULT_KEEP") != "" {
			t.Logf("lane %d kept for inspection: %s (cp.log, mcp.log, agent data)", id, dir)
			return
		}
		os.RemoveAll(dir)
	})
	if err := os.MkdirAll(l.effects, 0o700); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "effect.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(hostScript, l.effects, hostHold)), 0o755); err != nil {
		t.Fatal(err)
	}
	l.target = countingtarget.Start(countingtarget.Config{MaxHold: maxHold})
	l.proxy, err = faultproxy.Start(l.target.Addr())
	if err != nil {
		t.Fatal(err)
	}
	agentSock := filepath.Join(dir, "a.sock")
	l.settle, err = writeCatalog(l.catalog, l.proxy.Addr(), agentSock, script)
	if err != nil {
		t.Fatal(err)
	}
	l.agent = hostagenttest.Start(t, hostagenttest.Options{Bin: agentBin, Data: filepath.Join(dir, "agent"), Socket: agentSock})
	if err := l.startCP(); err != nil {
		t.Fatal(err)
	}
	sock := datadir.Socket(l.data)
	l.conn, err = grpc.NewClient("passthrough:///latch", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		t.Fatal(err)
	}
	l.api = controlplanev1.NewControlPlaneClient(l.conn)
	if err := l.startMCP(); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *lane) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mcp != nil {
		l.mcp.Stop()
	}
	if l.cp != nil {
		l.cp.Stop()
	}
	if l.conn != nil {
		l.conn.Close()
	}
	if l.proxy != nil {
		l.proxy.Close()
	}
	if l.target != nil {
		l.target.Close()
	}
}

// startCP runs `latch serve` on the lane's data dir and waits (bounded) for
// its API socket.
func (l *lane) startCP() error {
	args := []string{"serve", "--data", l.data, "--catalog", l.catalog, "--vault-key-file", filepath.Join(l.dir, "vault.key"),
		"--actor", actor, "--trusted-actor", actor, "--log-level", "debug"}
	p, err := testbin.StartProc(latchBin, args, filepath.Join(l.dir, "cp.log"))
	if err != nil {
		return err
	}
	sock := datadir.Socket(l.data)
	for range 1000 {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			l.mu.Lock()
			l.cp = p
			l.mu.Unlock()
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("latch serve exited at start; see %s", filepath.Join(l.dir, "cp.log"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Kill()
	return fmt.Errorf("latch serve did not open %s within 10s; see %s", sock, filepath.Join(l.dir, "cp.log"))
}

// cpProc is the running control plane process.
func (l *lane) cpProc() *testbin.Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cp
}

// startMCP runs latch-mcp against the control plane's socket on a free
// loopback port (it logs the URL it serves).
func (l *lane) startMCP() error {
	args := []string{"--control-plane", "unix://" + datadir.Socket(l.data), "--listen", "127.0.0.1:0", "--actor", actor}
	p, err := testbin.StartProc(mcpBin, args, filepath.Join(l.dir, "mcp.log"))
	if err != nil {
		return err
	}
	m, err := p.WaitLog(testbin.FrontURL, 10*time.Second)
	if err != nil {
		p.Kill()
		return err
	}
	l.mcp, l.url = p, m[1]
	return nil
}

// restartCP waits for the killed control plane to be gone and starts it
// again on the same data dir.
func (l *lane) restartCP(killed *testbin.Proc) error {
	<-killed.Done()
	return l.startCP()
}

// killAgent SIGKILLs the host agent; restartAgent starts it again on the
// same data dir and socket (it reconciles its open markers).
func (l *lane) killAgent() {
	l.mu.Lock()
	a := l.agent
	l.mu.Unlock()
	a.Kill()
}

func (l *lane) restartAgent(t *testing.T) {
	l.mu.Lock()
	old := l.agent
	l.mu.Unlock()
	a := hostagenttest.Start(t, hostagenttest.Options{Bin: agentBin, Data: old.Data, Socket: old.Socket})
	l.mu.Lock()
	l.agent = a
	l.mu.Unlock()
}

// hostLines returns the lines of the host tool's file for intent (kind is
// "start" or "effect").
func (l *lane) hostLines(t testing.TB, intent, kind string) []string {
	return testbin.ReadLines(t, filepath.Join(l.effects, intent+"."+kind))
}

// Eras of the MCP client.
const (
	eraSession   = "2025-11-25" // stateful, resumable
	eraStateless = ""           // the go-sdk client's default: 2026-07-28, stateless
)

func eraName(e string) string {
	if e == eraSession {
		return "2025-11-25"
	}
	return "2026-07-28"
}

// connect opens a new MCP session in era.
func (l *lane) connect(ctx context.Context, era string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "faultsuite", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: l.url, HTTPClient: &http.Client{}, DisableStandaloneSSE: true}
	var opts *mcp.ClientSessionOptions
	if era != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: era}
	}
	return client.Connect(ctx, tr, opts)
}

// callOut is what one tools/call returned.
type callOut struct {
	res mcpfront.CallResult
	err error // transport or protocol error: no answer
}

// call opens a session in era, calls tool once and closes the session.
func (l *lane) call(ctx context.Context, era, tool string, args map[string]any) callOut {
	cs, err := l.connect(ctx, era)
	if err != nil {
		return callOut{err: fmt.Errorf("connect: %w", err)}
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return callOut{err: err}
	}
	var cr mcpfront.CallResult
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &cr); err != nil {
		return callOut{err: fmt.Errorf("structuredContent %s: %w", raw, err)}
	}
	return callOut{res: cr}
}
