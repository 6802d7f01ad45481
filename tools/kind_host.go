package tools

import (
	"net"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// The channels of commands run on a host.
const (
	// ChannelSSH reaches a host over SSH: through its host agent
	// (hostagent_socket set) or plain.
	ChannelSSH Channel = "ssh"
	// ChannelLocal reaches the host agent of this machine over its socket.
	ChannelLocal Channel = "local"
)

// SSHKind is the catalog half of the ssh channel: a target is an SSH
// account with a pinned host key (and optionally the host agent's socket
// there), a tool's action its command: argv.
type SSHKind struct{}

// LocalKind is the catalog half of the local channel: a target is the host
// agent's socket on this machine, a tool's action its command: argv.
type LocalKind struct{}

var (
	_ Kind = SSHKind{}
	_ Kind = LocalKind{}
)

func (SSHKind) Channel() Channel   { return ChannelSSH }
func (LocalKind) Channel() Channel { return ChannelLocal }

// HostTarget is the settings of an ssh or local target, embedded in
// Target: an ssh target sets all of them, a local one only its socket.
type HostTarget struct {
	Address string
	User    string
	// HostKey is the pinned host key in authorized_keys form.
	HostKey string
	// HostagentSocket is the host agent's unix socket ("" for plain SSH).
	HostagentSocket string
}

// CommandAction is the action of a tool of an ssh or local target,
// embedded in Tool.
type CommandAction struct {
	// Command is argv, each element templated; never a shell string.
	Command []string
	// PositionalAfterDoubleDash lists arguments that are whole positional
	// command elements: Latch passes "--" before the first of them, so a
	// value starting with "-" is data, not an option (options.go).
	PositionalAfterDoubleDash []string
	Cwd                       string
	Env                       map[string]string
}

func (SSHKind) TargetKeys() []string {
	return []string{"channel", "address", "user", "host_key", "credential", "hostagent_socket", "timeout", "settle"}
}

func (LocalKind) TargetKeys() []string {
	return []string{"channel", "hostagent_socket", "timeout", "settle"}
}

// commandKeys are the keys of a command tool's action.
var commandKeys = []string{"command", "cwd", "env", positionalKey}

func (SSHKind) ToolKeys() []string   { return commandKeys }
func (LocalKind) ToolKeys() []string { return commandKeys }

func (SSHKind) ParseTarget(s *TargetSpec) {
	s.p.hostagentSocket(s)
	s.p.sshTarget(s.entry, s.f, s.Target, s.what)
}

func (LocalKind) ParseTarget(s *TargetSpec) {
	if !s.p.hostagentSocket(s) {
		s.p.addf(s.at, "%s: hostagent_socket is required for local targets (the host agent's unix socket; latch dev serves one at DATA/hostagent.sock, latch-hostagent serve --socket sets it elsewhere)", s.what)
	}
}

// ParseTool parses the command; a plain SSH target (no host agent) can
// back only replay review: nothing can tell what became of an interrupted
// command.
func (SSHKind) ParseTool(s *ToolSpec) {
	parseCommandTool(s)
	if s.ReplayOK && s.Target.PlainSSH() && s.Tool.Replay != ReplayReview {
		s.p.addf(s.f["replay"].keyNode, "%s: target %s is plain SSH (no hostagent_socket): nothing can tell what became of an interrupted command, so replay must be review", s.what, s.Target.Name)
	}
}

func (LocalKind) ParseTool(s *ToolSpec) { parseCommandTool(s) }

// KeyCarriers: a host agent records the command under the execution ID
// (its marker); plain SSH hands the ID to nothing.
func (SSHKind) KeyCarriers(t *Tool, tg *Target) []string { return markerCarrier(tg) }

// KeyCarriers: the host agent records the command under the execution ID.
func (LocalKind) KeyCarriers(t *Tool, tg *Target) []string { return markerCarrier(tg) }

func markerCarrier(tg *Target) []string {
	if tg.HostagentSocket == "" {
		return nil
	}
	return []string{"host agent marker id"}
}

// PlainSSH reports whether the target is reached over SSH with no host
// agent: env goes on the remote command line, and no marker records what
// became of a command.
func (t *Target) PlainSSH() bool {
	return t.Channel == ChannelSSH && t.HostagentSocket == ""
}

func parseCommandTool(s *ToolSpec) {
	p, f, t, tg, what := s.p, s.f, s.Tool, s.Target, s.what
	for _, k := range s.foreign {
		p.addf(f[k].keyNode, "%s: %s does not apply to %s tools (target %s); use command:", what, k, tg.Channel, tg.Name)
	}
	if ce, has := f["command"]; !has {
		p.addf(s.at, "%s: command is required: target %s is %s", what, tg.Name, tg.Channel)
	} else {
		t.Command = p.command(ce, s.info, what)
	}
	p.cwdEnv(f, t, s.info, what)
	p.optionArgs(f, t, s.info, what)
	p.plainSSHSecrets(f, t, tg, what)
}

// hostagentSocket parses hostagent_socket, an absolute path, and reports
// whether the target gives it.
func (p *parser) hostagentSocket(s *TargetSpec) bool {
	e, ok := s.f["hostagent_socket"]
	if !ok {
		return false
	}
	if v, ok := p.str(e, s.what+": hostagent_socket"); ok {
		if !strings.HasPrefix(v, "/") {
			p.addf(e.keyNode, "%s: hostagent_socket must be an absolute path", s.what)
		}
		s.Target.HostagentSocket = v
	}
	return true
}

func (p *parser) sshTarget(te kv, f map[string]kv, t *Target, what string) {
	if e, ok := f["address"]; !ok {
		p.addf(te.keyNode, "%s: address (host:port) is required for ssh targets", what)
	} else if s, ok := p.str(e, what+": address"); ok {
		host, port, err := net.SplitHostPort(s)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			p.addf(e.keyNode, "%s: address %q must be host:port", what, s)
		} else {
			t.Address = s
		}
	}
	if e, ok := f["user"]; !ok {
		p.addf(te.keyNode, "%s: user is required for ssh targets", what)
	} else {
		t.User, _ = p.str(e, what+": user")
	}
	if e, ok := f["host_key"]; !ok {
		p.addf(te.keyNode, "%s: host_key is required for ssh targets (pinned; ssh-keyscan prints it)", what)
	} else if s, ok := p.str(e, what+": host_key"); ok {
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s)); err != nil {
			p.addf(e.keyNode, "%s: host_key is not a public key in authorized_keys form (\"ssh-ed25519 AAAA...\"): %v", what, err)
		} else {
			t.HostKey = s
		}
	}
}
