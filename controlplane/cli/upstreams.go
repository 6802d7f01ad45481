package cli

import (
	"github.com/latchhq/latch/internal/buildinfo"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/mcpchannel"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/tools"
)

// addUpstreamChannel adds the channel of upstream MCP servers and wraps the
// catalog source so that every load binds the upstreams' schemas
// (mcpchannel.Source). Close stops the upstreams. The stdio upstreams' pid
// files are in DATA/upstream-pids: an upstream a killed run left is stopped
// here, before the catalog starts its successor.
func addUpstreamChannel(channels map[tools.Channel]engine.Channel, cfg *stackConfig, log hclog.Logger, v *vault.Vault) (*mcpchannel.Channel, error) {
	var pidDir string
	if cfg.DataDir != "" {
		pidDir = filepath.Join(cfg.DataDir, "upstream-pids")
	}
	mc, err := mcpchannel.New(mcpchannel.Config{Logger: log, Credentials: v, Version: buildinfo.Read().Version, PidDir: pidDir, MaxDescription: cfg.UpstreamMaxDescription})
	if err != nil {
		return nil, err
	}
	channels[tools.ChannelMCP] = mc
	cfg.Catalog = mc.Source(cfg.Catalog)
	return mc, nil
}
