package authz

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The operator console (controlplane/console) reaches the API like every
// other caller: over a gRPC connection, through the same interceptors (the
// standby gate, recovery, tracing, this package's authorization and its
// refusal journal, the request log). Its connection is an in-memory one
// the control plane serves inside its own process (no address anyone else
// can dial), with ConsoleCredentials; each RPC on it carries, in the
// metadata key ConsoleSessionKey, the key of the console session it is
// made for, which the authorizer has the console verify
// (Config.ConsoleSession) on every call. A live session's caller is an
// operator named after the session's operator (Caller.Operator), carrying
// the credential the session was opened with (Caller.Credential); a call
// without one, or with a session that ended, is refused and journaled like
// any unidentified caller's.

// TransportConsole is the transport of the console's in-process connection.
const TransportConsole = "console"

// ConsoleSessionKey is the metadata key of the console session an RPC on
// the console's connection is made for.
const ConsoleSessionKey = "latch-console-session"

// ErrNoSession: the console session a call names is not live.
var ErrNoSession = errors.New("authz: no live console session")

// ConsoleSession verifies the session key of a call on the console's
// connection and returns the credential the session was opened with (its
// operator, and the token or link it signed in with); an error when the
// session is unknown, expired, signed out or its token revoked.
// Implemented by *console.Console (VerifySession).
type ConsoleSession func(ctx context.Context, key string) (*recordv1.OperatorCredential, error)

// ConsoleInfo is the gRPC AuthInfo of the console's in-process connection.
type ConsoleInfo struct{ credentials.CommonAuthInfo }

// AuthType implements credentials.AuthInfo.
func (ConsoleInfo) AuthType() string { return "latch-console" }

// ConsoleCredentials are the transport credentials of the console's
// in-process connection, on both ends: the connection is in memory, so
// there is nothing to encrypt; the handshake only marks the peer as the
// console, whose calls each name their session.
func ConsoleCredentials() credentials.TransportCredentials { return consoleCreds{} }

type consoleCreds struct{}

func (consoleCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return conn, ConsoleInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (consoleCreds) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return conn, ConsoleInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (consoleCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "latch-console"}
}

func (consoleCreds) Clone() credentials.TransportCredentials { return consoleCreds{} }

func (consoleCreds) OverrideServerName(string) error { return nil }

// identifyConsole names the caller of an RPC on the console's connection:
// the operator of the live session its metadata names, or nobody.
func (a *Authorizer) identifyConsole(ctx context.Context) Caller {
	c := Caller{Transport: TransportConsole}
	keys := metadata.ValueFromIncomingContext(ctx, ConsoleSessionKey)
	switch {
	case a.cfg.ConsoleSession == nil:
		c.Identity = "none: a console call, and no console is attached to this control plane"
		return c
	case len(keys) != 1 || keys[0] == "":
		c.Identity = "none: a console call that names no console session"
		return c
	}
	cred, err := a.cfg.ConsoleSession(ctx, keys[0])
	if err != nil {
		c.Identity = "none: a console call of a session that is not live (" + err.Error() + ")"
		return c
	}
	op := cred.GetOperator()
	if op == "" || !validOperatorName(op) {
		c.Identity = fmt.Sprintf("none: a console session with a bad operator name %q", op)
		return c
	}
	c.Role, c.Identity, c.Operator, c.Credential = RoleOperator, "console:"+op, op, cred
	return c
}
