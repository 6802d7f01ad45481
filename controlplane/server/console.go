package server

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// What the operator console (controlplane/console) reads from a running
// control plane besides its Store, Engine, Tokens and Catalog, and the
// connection it makes its decisions over.

// consoleBuffer is the in-memory connection's buffer: a decision's request
// and answer are a few kilobytes.
const consoleBuffer = 256 << 10

// consoleListener is the API's in-process listener for the console: a gRPC
// server with every API service, behind the interceptors the socket and
// TCP listeners run (buildListeners), on a bufconn listener nothing outside
// the process can dial. Its calls name their console session
// (authz.ConsoleSessionKey), which verify asks the console about.
type consoleListener struct {
	srv     *grpc.Server
	lis     *bufconn.Listener
	session atomic.Pointer[authz.ConsoleSession]
}

// verify is authz.Config.ConsoleSession: the attached console's answer.
func (l *consoleListener) verify(ctx context.Context, key string) (*recordv1.OperatorCredential, error) {
	f := l.session.Load()
	if f == nil {
		return nil, authz.ErrNoSession
	}
	return (*f)(ctx, key)
}

// ConsoleConn attaches the operator console and returns its connection to
// the API: in memory, served by this process, through the same
// interceptors as every caller (the standby gate, authorization with its
// refusal journal, the request log). Each call on it names its console
// session in the metadata key authz.ConsoleSessionKey, and verify (the
// console's VerifySession) says whether that session is live and what
// credential it was opened with: its operator is the caller, and the
// credential is stamped on every journal record the call writes. The
// connection serves while Run does; the caller closes it.
func (s *Server) ConsoleConn(verify func(ctx context.Context, key string) (*recordv1.OperatorCredential, error)) (grpc.ClientConnInterface, error) {
	if verify == nil {
		return nil, errors.New("server: ConsoleConn needs the console's session check")
	}
	f := authz.ConsoleSession(verify)
	s.console.session.Store(&f)
	return grpc.NewClient("passthrough:///latch-console",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return s.console.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(authz.ConsoleCredentials()))
}

// credentialUnary puts the credential of a console caller's session on the
// call's context (store.WithCredential), so that every journal record the
// call writes carries it.
func credentialUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(withCredential(ctx), req)
}

func credentialStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if ctx := withCredential(ss.Context()); ctx != ss.Context() {
		ss = &credentialServerStream{ServerStream: ss, ctx: ctx}
	}
	return h(srv, ss)
}

type credentialServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *credentialServerStream) Context() context.Context { return s.ctx }

func withCredential(ctx context.Context) context.Context {
	if c, ok := authz.CallerFrom(ctx); ok && c.Credential != nil {
		return store.WithCredential(ctx, c.Credential)
	}
	return ctx
}

// API is the ControlPlane service the gRPC listeners serve (for tests of
// the service that mark their own caller).
func (s *Server) API() *api.Service { return s.api }

// DataDir is the control plane's data directory.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// VerifierKey is the journal's checkpoint verifier key (note form): the
// signer's public half, wherever the keys are kept (files or the store).
func (s *Server) VerifierKey() string { return s.verifier }

// OnPostgres reports whether the store is PostgreSQL (the audit commands
// then take --store instead of a data dir).
func (s *Server) OnPostgres() bool { return s.pg != nil }

// PublishConsole records, on a PostgreSQL store, that this replica (the
// active one: the write is fenced by its lease) serves the console at url,
// so that standbys send browsers there (ActiveConsole). It does nothing on
// Badger (one replica) or without a url.
func (s *Server) PublishConsole(ctx context.Context, url string) error {
	if s.pg == nil || url == "" {
		return nil
	}
	return s.Store.Update(ctx, func(tx *store.Tx) error {
		return tx.PutConsoleAddress(&recordv1.ConsoleAddress{Holder: s.holder, Epoch: s.pg.Epoch(), Url: url})
	})
}

// ActiveConsole is, on a standby, where the active replica serves the
// console: the URL it published (PublishConsole), while the lease this
// standby last read is still running and names the same holder and epoch
// (a killed or replaced active's address would send browsers to a dead
// replica). "" when it is not known.
func (s *Server) ActiveConsole() string {
	r := s.Role()
	if s.pg == nil || r.Role != RoleStandby || r.Active == "" {
		return ""
	}
	x, err := store.ReadConsoleAddress(s.pg)
	if err != nil || x.GetHolder() != r.Holder || x.GetEpoch() != r.Epoch {
		return ""
	}
	return x.GetUrl()
}
