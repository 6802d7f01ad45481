package hostchannel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/latchhq/latch/tools"
)

// The catalog halves of the ssh and local channels as the control plane
// loads them: tools' kinds plus what only the loading machine can say
// about a target. channels.BuiltIn lists these.
var (
	_ tools.Kind        = SSHKind{}
	_ tools.HostChecker = LocalKind{}
)

// LocalKind is tools.LocalKind with the check of this machine: the host
// agent's socket exists and is a unix socket, refused at load with the
// catalog's file:line instead of failing at the first call.
type LocalKind struct {
	tools.LocalKind
	checks tools.HostChecks
}

// WithHostChecks returns the kind making checks h.
func (k LocalKind) WithHostChecks(h tools.HostChecks) tools.Kind {
	k.checks = h
	return k
}

// ParseTarget parses the target as tools.LocalKind does, then checks its
// socket (not one the loading process serves itself: latch dev's).
func (k LocalKind) ParseTarget(s *tools.TargetSpec) {
	k.LocalKind.ParseTarget(s)
	p := s.Target.HostagentSocket
	if k.checks.Skip || !filepath.IsAbs(p) || slices.Contains(k.checks.Own, p) {
		return
	}
	if problem := socketProblem(p); problem != "" {
		s.Problemf("hostagent_socket", "%s", problem)
	}
}

// socketProblem says what is wrong with p as a host agent's socket on this
// machine ("" when it is one).
func socketProblem(p string) string {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("hostagent_socket %s does not exist on this machine: start the host agent there (latch-hostagent serve --socket %s), or name the socket one serves (latch dev serves DATA/hostagent.sock); latch catalog validate on a machine that is not the control plane's: pass --no-host-checks", p, p)
	case err != nil:
		return fmt.Sprintf("hostagent_socket %s cannot be checked: %v; the control plane must be able to reach it (check the directory's permissions)", p, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Sprintf("hostagent_socket %s is not a unix socket (it is a %s): name the host agent's socket (latch-hostagent serve --socket PATH; latch dev serves DATA/hostagent.sock)", p, fileKind(fi))
	}
	return ""
}

func fileKind(fi fs.FileInfo) string {
	switch {
	case fi.IsDir():
		return "directory"
	case fi.Mode().IsRegular():
		return "regular file"
	}
	return "file of mode " + fi.Mode().Type().String()
}

// SSHKind is tools.SSHKind with a warning for a host agent's socket: it is
// on the SSH host, where the control plane cannot look at load; a wrong
// path fails at the first call.
type SSHKind struct{ tools.SSHKind }

// ParseTarget parses the target as tools.SSHKind does, and warns that a
// remote socket is not checked.
func (k SSHKind) ParseTarget(s *tools.TargetSpec) {
	k.SSHKind.ParseTarget(s)
	if p := s.Target.HostagentSocket; p != "" {
		host := s.Target.Address
		if host == "" {
			host = "the SSH host"
		}
		s.Warnf("hostagent_socket", "hostagent_socket %s is on %s and is not checked at load (only that host can tell); a wrong path fails at the first call, so check it there (latch-hostagent serve --socket sets it)", p, host)
	}
}
