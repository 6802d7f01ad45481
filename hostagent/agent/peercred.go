package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Policy is the set of uids allowed to talk to the agent.
type Policy struct{ uids []uint32 }

// NewPolicy allows exactly uids.
func NewPolicy(uids ...uint32) Policy {
	p := Policy{uids: slices.Clone(uids)}
	slices.Sort(p.uids)
	p.uids = slices.Compact(p.uids)
	return p
}

// DefaultPolicy allows the agent's own uid, root, and extra.
func DefaultPolicy(extra ...uint32) Policy {
	return NewPolicy(append([]uint32{uint32(os.Getuid()), 0}, extra...)...)
}

// Check returns nil when uid is allowed.
func (p Policy) Check(uid uint32) error {
	if slices.Contains(p.uids, uid) {
		return nil
	}
	return fmt.Errorf("%w: uid %d", ErrPeerRefused, uid)
}

// UIDs returns the allowed uids, sorted.
func (p Policy) UIDs() []uint32 { return slices.Clone(p.uids) }

// PeerInfo is the grpc AuthInfo of a unix-socket peer, read with SO_PEERCRED.
type PeerInfo struct {
	credentials.CommonAuthInfo
	UID, GID uint32
	PID      int32
}

// AuthType implements credentials.AuthInfo.
func (PeerInfo) AuthType() string { return "unix-peercred" }

// PeerCred reads the SO_PEERCRED credentials of a unix socket connection.
func PeerCred(conn net.Conn) (*unix.Ucred, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("%w: connection is %T, not a unix socket", ErrPeerRefused, conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("agent: peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("agent: peer credentials: %w", err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("agent: SO_PEERCRED: %w", cerr)
	}
	return cred, nil
}

// peerCreds is a grpc TransportCredentials for unix sockets: the server
// handshake refuses peers whose uid the policy does not allow and records
// the uid for handlers. No encryption: the socket never leaves the host.
type peerCreds struct{ policy Policy }

// NewPeerCredentials returns server transport credentials enforcing policy.
func NewPeerCredentials(policy Policy) credentials.TransportCredentials {
	return peerCreds{policy: policy}
}

func (c peerCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cred, err := PeerCred(conn)
	if err != nil {
		return nil, nil, err
	}
	if err := c.policy.Check(cred.Uid); err != nil {
		return nil, nil, err
	}
	return conn, PeerInfo{
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity},
		UID:            cred.Uid, GID: cred.Gid, PID: cred.Pid,
	}, nil
}

func (c peerCreds) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return conn, PeerInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (c peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "unix-peercred"}
}

func (c peerCreds) Clone() credentials.TransportCredentials {
	return peerCreds{policy: NewPolicy(c.policy.uids...)}
}

func (c peerCreds) OverrideServerName(string) error { return nil }

// PeerUID returns the uid of the caller of an RPC served with peer credentials.
func PeerUID(ctx context.Context) (uint32, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return 0, false
	}
	info, ok := p.AuthInfo.(PeerInfo)
	if !ok {
		return 0, false
	}
	return info.UID, true
}
