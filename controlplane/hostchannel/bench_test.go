package hostchannel

import (
	"strconv"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/sshtest"
	"github.com/latchhq/latch/tools"
)

// BenchmarkDispatchTrue measures Dispatch of /bin/true to Observed against a
// real host agent: Run (marker starting, shim, gate, running), Wait until
// exited, Output. "local" goes over the agent's unix socket; "ssh" through
// an in-process SSH server's direct-streamlocal channel on loopback.
func BenchmarkDispatchTrue(b *testing.B) {
	quiet := hclog.NewNullLogger()
	b.Run("local", func(b *testing.B) {
		a := startAgent(b, "", "")
		c := newChannel(b, Config{Logger: quiet})
		benchDispatch(b, c, localTarget(a.Socket))
	})
	b.Run("ssh", func(b *testing.B) {
		signer, cred := newKey(b)
		srv := sshtest.Start(b, sshtest.Options{AuthorizedKey: signer.PublicKey()})
		a := startAgent(b, "", "")
		c := newChannel(b, Config{
			Logger: quiet, SSH: newPool(b),
			Credentials: &fakeCreds{creds: map[string]vault.Credential{"k": cred}},
		})
		benchDispatch(b, c, &tools.Target{
			Name: "bench", Channel: tools.ChannelSSH, HostTarget: tools.HostTarget{Address: srv.Addr(), User: "deploy", HostKey: srv.HostKey(), HostagentSocket: a.Socket},
			Credential: "k",
		})
	})
}

func benchDispatch(b *testing.B, c *Channel, target *tools.Target) {
	// Warm the connection outside the timed loop.
	if got := c.Dispatch(ctxT(b), newCall("bench_warm", target, "/bin/true")); got.Class != engine.Observed {
		b.Fatalf("warm-up Dispatch = %s (%s)", className(got.Class), got.Reason)
	}
	i := 0
	for b.Loop() {
		got := c.Dispatch(ctxT(b), newCall("bench_"+strconv.Itoa(i), target, "/bin/true"))
		i++
		if got.Class != engine.Observed {
			b.Fatalf("Dispatch = %s (%s)", className(got.Class), got.Reason)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "dispatches/s")
}
