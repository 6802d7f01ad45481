package authz

import (
	"context"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
)

// PeerInfo is the gRPC AuthInfo of a unix-socket peer, read with
// SO_PEERCRED at connect time.
type PeerInfo struct {
	credentials.CommonAuthInfo
	UID, GID uint32
	PID      int32
}

// AuthType implements credentials.AuthInfo.
func (PeerInfo) AuthType() string { return "unix-peercred" }

// UnixCredentials are the server transport credentials of the unix socket:
// the handshake reads the peer's uid and refuses nothing, so that a refused
// caller gets a PermissionDenied naming the RPC (and is journaled) instead
// of a closed connection. No encryption: the socket never leaves the host.
func UnixCredentials() credentials.TransportCredentials { return unixCreds{} }

type unixCreds struct{}

func (unixCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, nil, fmt.Errorf("authz: unix credentials on a %T connection", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, nil, fmt.Errorf("authz: peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, nil, fmt.Errorf("authz: peer credentials: %w", err)
	}
	if cerr != nil {
		return nil, nil, fmt.Errorf("authz: SO_PEERCRED: %w", cerr)
	}
	return conn, PeerInfo{
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity},
		UID:            cred.Uid, GID: cred.Gid, PID: cred.Pid,
	}, nil
}

func (unixCreds) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return conn, PeerInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (unixCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "unix-peercred"}
}

func (unixCreds) Clone() credentials.TransportCredentials { return unixCreds{} }

func (unixCreds) OverrideServerName(string) error { return nil }
