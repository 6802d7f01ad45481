package channels

import (
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/hostchannel"
	"github.com/latchhq/latch/controlplane/httpchannel"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/mcpchannel"
	"github.com/latchhq/latch/controlplane/sshdial"
	"github.com/latchhq/latch/tools"
)

// BuiltIn lists the channel kinds Latch ships, one line each.
func BuiltIn() []Kind {
	return []Kind{
		{Catalog: []tools.Kind{tools.HTTPKind{}}, New: newHTTP, Dev: func(t *tools.Target, e DevEnv) { httpchannel.DevTarget(t, e.ExampleURL, e.DemoURL) }},
		{Catalog: []tools.Kind{hostchannel.SSHKind{}, hostchannel.LocalKind{}}, New: newHost, Dev: func(t *tools.Target, e DevEnv) { hostchannel.DevTarget(t, e.AgentSocket) }},
		{Catalog: []tools.Kind{tools.MCPKind{}}, New: newMCP},
	}
}

// newHTTP builds the http channel over its own dispatcher.
func newHTTP(d Deps) (engine.Channel, func(), error) {
	hd, err := httpdispatch.New(httpdispatch.Config{Logger: d.Logger})
	if err != nil {
		return nil, nil, err
	}
	var creds httpchannel.Credentials
	if d.Vault != nil {
		creds = d.Vault
	}
	hc, err := httpchannel.New(httpchannel.Config{Logger: d.Logger, Dispatcher: hd, Credentials: creds})
	if err != nil {
		hd.Close()
		return nil, nil, err
	}
	return hc, hd.Close, nil
}

// newHost builds the ssh and local channel: the host agent over SSH
// (direct-streamlocal) or over its socket on this machine, and plain SSH.
// Trust on first use of SSH host keys is allowed only under `latch dev`.
func newHost(d Deps) (engine.Channel, func(), error) {
	pool, err := sshdial.New(sshdial.Config{Logger: d.Logger})
	if err != nil {
		return nil, nil, err
	}
	var creds hostchannel.Credentials
	if d.Vault != nil {
		creds = d.Vault
	}
	hc, err := hostchannel.New(hostchannel.Config{Logger: d.Logger, Credentials: creds, SSH: pool, TrustOnFirstUse: d.TrustOnFirstUse})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return hc, func() { hc.Close(); pool.Close() }, nil
}

// newMCP builds the channel of upstream MCP servers. The stdio upstreams'
// pid files are in DATA/upstream-pids: an upstream a killed run left is
// stopped before the catalog starts its successor.
func newMCP(d Deps) (engine.Channel, func(), error) {
	var pidDir string
	if d.DataDir != "" {
		pidDir = datadir.UpstreamPids(d.DataDir)
	}
	var creds mcpchannel.Credentials
	if d.Vault != nil {
		creds = d.Vault
	}
	mc, err := mcpchannel.New(mcpchannel.Config{Logger: d.Logger, Credentials: creds, Version: d.Version, PidDir: pidDir, MaxDescription: d.UpstreamMaxDescription})
	if err != nil {
		return nil, nil, err
	}
	return mc, mc.Close, nil
}

// Upstreams returns the mcp channel of the set (nil when it has none): the
// stack wraps the catalog source with it, and the admin service lists
// upstream tools through it.
func (s *Set) Upstreams() *mcpchannel.Channel {
	for _, ch := range s.Channels {
		if mc, ok := ch.(*mcpchannel.Channel); ok {
			return mc
		}
	}
	return nil
}
