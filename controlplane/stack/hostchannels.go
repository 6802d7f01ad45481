package stack

import (
	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/hostchannel"
	"github.com/latchhq/latch/controlplane/sshdial"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/tools"
)

// addHostChannels adds the ssh and local channels: the host agent over SSH
// (direct-streamlocal) or over its socket on this machine, and plain SSH.
// Trust on first use of SSH host keys is allowed only under `latch dev`.
func addHostChannels(channels map[tools.Channel]engine.Channel, cfg Config, log hclog.Logger, v *vault.Vault) (func(), error) {
	pool, err := sshdial.New(sshdial.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	hc, err := hostchannel.New(hostchannel.Config{Logger: log, Credentials: v, SSH: pool, TrustOnFirstUse: cfg.DevVault})
	if err != nil {
		pool.Close()
		return nil, err
	}
	channels[tools.ChannelSSH] = hc
	channels[tools.ChannelLocal] = hc
	return func() { hc.Close(); pool.Close() }, nil
}
