package hostchannel

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/ssh"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/sshdial"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/hostagent/client"
	"github.com/latchhq/latch/internal/testing/hostagenttest"
	"github.com/latchhq/latch/internal/testing/testbin"
	"github.com/latchhq/latch/internal/testing/testlog"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// agentBin is the latch-hostagent binary built once for all tests.
var agentBin string

func TestMain(m *testing.M) {
	testbin.Main(m, []string{"github.com/latchhq/latch/hostagent/cmd/latch-hostagent"}, []*string{&agentBin})
}

// agentProc is a real `latch-hostagent serve` process.
type agentProc struct{ *hostagenttest.Process }

// startAgent runs an agent on data and socket ("" picks fresh ones) and
// waits until it serves.
func startAgent(tb testing.TB, data, socket string) *agentProc {
	tb.Helper()
	return &agentProc{hostagenttest.Start(tb, hostagenttest.Options{Bin: agentBin, Data: data, Socket: socket, Flags: []string{"--log-level", "info"}})}
}

// marker reads a marker directly from the agent (nil when there is none).
func (a *agentProc) marker(tb testing.TB, id string) *hostagentv1.Marker {
	tb.Helper()
	cl, closer, err := client.Dial(ctxT(tb), a.Socket)
	if err != nil {
		tb.Fatalf("dial agent: %v", err)
	}
	defer closer.Close()
	resp, err := cl.Status(ctxT(tb), &hostagentv1.StatusRequest{ExecutionId: id})
	if err != nil {
		return nil
	}
	return resp.GetMarker()
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// fakeCreds is an in-memory Credentials; locked makes Get fail like a
// locked vault.
type fakeCreds struct {
	mu     sync.Mutex
	creds  map[string]vault.Credential
	locked bool
}

func (f *fakeCreds) Get(name string) (vault.Credential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.locked {
		return vault.Credential{}, vault.ErrLocked
	}
	c, ok := f.creds[name]
	if !ok {
		return vault.Credential{}, errors.New("vault: credential not found")
	}
	c.Fields = maps.Clone(c.Fields) // Get returns a copy
	return c, nil
}

// newKey returns a fresh client key as a signer and as a vault credential.
func newKey(tb testing.TB) (ssh.Signer, vault.Credential) {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatal(err)
	}
	return signer, vault.Credential{Kind: vault.KindSSHKey, Fields: vault.Fields{"private_key": string(pem.EncodeToMemory(block))}}
}

// newPool returns an SSH pool with fast keepalives, closed at cleanup.
func newPool(tb testing.TB) *sshdial.Pool {
	tb.Helper()
	p, err := sshdial.New(sshdial.Config{
		Logger:            testlog.New(tb, hclog.Debug),
		KeepaliveInterval: 200 * time.Millisecond, KeepaliveTimeout: time.Second,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

func newChannel(tb testing.TB, cfg Config) *Channel {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(tb, hclog.Debug)
	}
	c, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func localTarget(socket string) *tools.Target {
	return &tools.Target{Name: "this-host", Channel: tools.ChannelLocal, HostTarget: tools.HostTarget{HostagentSocket: socket}}
}

// newCall builds an engine call of a tool whose command is argv.
func newCall(id string, target *tools.Target, argv ...string) engine.Call {
	return engine.Call{
		Execution: &recordv1.Execution{Id: id},
		Tool:      &tools.Tool{Name: "t", Target: target.Name, CommandAction: tools.CommandAction{Command: argv}, Replay: tools.ReplayStatusQuery},
		Target:    target,
		Arguments: map[string]any{},
	}
}

// appendArgv appends line to file through the shell and echoes it.
func appendArgv(file, line string) []string {
	return []string{"/bin/sh", "-c", `echo "` + line + `" >> "` + file + `"; echo "` + line + `"`}
}

// gatedAppendArgv is a command that creates file.began, waits (bounded,
// 60s) for gate to exist, then appends a line to file.
func gatedAppendArgv(gate, file string) []string {
	return []string{"/bin/sh", "-c", `: > "` + file + `.began"; i=0; while [ ! -e "` + gate + `" ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done; echo ran >> "` + file + `"`}
}

// queryUntilSettled queries until the answer is no longer Unknown (bounded:
// 300 tries, 50ms apart).
func queryUntilSettled(tb testing.TB, c *Channel, call engine.Call) engine.Attempt {
	tb.Helper()
	var a engine.Attempt
	for range 300 {
		a = c.Query(ctxT(tb), call)
		if a.Class != engine.Unknown {
			return a
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("Query(%s) stayed Unknown: %s", call.Execution.GetId(), a.Reason)
	return a
}

func className(c engine.AttemptClass) string {
	switch c {
	case engine.Observed:
		return "Observed"
	case engine.NotSent:
		return "NotSent"
	case engine.Unknown:
		return "Unknown"
	case engine.Absent:
		return "Absent"
	case engine.Unsupported:
		return "Unsupported"
	}
	return fmt.Sprintf("class(%d)", int(c))
}
