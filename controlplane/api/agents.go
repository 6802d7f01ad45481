package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/internal/actorname"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Caller is who calls the API, as the transport established it.
type Caller struct {
	// Identity names the caller: the identity of its client certificate
	// (URI SAN, else "cn:" + subject common name, as authz.CertIdentity
	// writes it) for TLS callers, "uid:N" or "unix" for a socket caller, ""
	// when the transport proves nothing.
	Identity string
	// Operator callers (the operator's uid on the unix socket) may submit
	// as any actor without an agent credential: that is how `latch dev`, a
	// stdio front on the same host and scripts run by the operator act.
	Operator bool
}

// CallerFunc tells who made a call. PeerCaller is the default; the
// transport's authorization layer may supply its own (it knows the peer
// uid of a socket caller and which certificates are operators).
type CallerFunc func(context.Context) Caller

// PeerCaller derives the caller from the gRPC peer: a unix-socket caller is
// an operator (the socket is mode 0600 in a 0700 data dir, so only the
// server's uid or root can connect), a TLS caller is named by its verified
// client certificate, anyone else is anonymous.
func PeerCaller(ctx context.Context) Caller {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Caller{}
	}
	if p.Addr != nil && p.Addr.Network() == "unix" {
		return Caller{Identity: "unix", Operator: true}
	}
	if _, isUnix := p.Addr.(*net.UnixAddr); isUnix {
		return Caller{Identity: "unix", Operator: true}
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.PeerCertificates) > 0 {
		// The identity rule of the authz interceptors: a certificate it
		// gives no identity (several URI SANs, a non-canonical one, …)
		// is anonymous here too.
		id, err := authz.CertIdentity(ti.State.PeerCertificates[0])
		if err != nil {
			return Caller{}
		}
		return Caller{Identity: id}
	}
	return Caller{}
}

// Authenticator checks agent credentials. Implemented by *tokens.Service.
type Authenticator interface {
	Authenticate(ctx context.Context, credential string) (*recordv1.AgentToken, error)
}

// FrontActors binds front identities to the actors they may submit as
// without an agent credential (latch serve --front-actor IDENTITY=ACTOR): a
// stdio front bound to one actor, or a front that authenticates agents
// itself (JWT) and is trusted for the actors listed. "*" as an actor lets
// that front act as any actor it authenticated.
type FrontActors map[string][]string

// Allows reports whether the front identity may act as actor.
func (f FrontActors) Allows(identity, actor string) bool {
	if identity == "" {
		return false
	}
	for _, a := range f[identity] {
		if a == actor || a == "*" {
			return true
		}
	}
	return false
}

// ParseFrontActor parses IDENTITY=ACTOR.
func ParseFrontActor(v string) (identity, actor string, err error) {
	i := strings.LastIndex(v, "=")
	if i <= 0 || i == len(v)-1 {
		return "", "", errors.New("want IDENTITY=ACTOR (the front's certificate identity, = , the actor it may act as, or * for any)")
	}
	identity, actor = v[:i], v[i+1:]
	if actor != "*" {
		if err := actorname.Check(actor); err != nil {
			return "", "", fmt.Errorf("actor %q: %w", actor, err)
		}
	}
	return identity, actor, nil
}

// submitActor decides who a Submit acts as. With a credential the control
// plane authenticates the agent itself and the actor is the token's;
// without one the caller must be allowed to act as the actor it names.
func (s *Service) submitActor(ctx context.Context, req *controlplanev1.SubmitRequest) (actor string, ev *recordv1.Evidence, err error) {
	ev = &recordv1.Evidence{}
	if req.GetEvidence() != nil {
		ev = proto.Clone(req.GetEvidence()).(*recordv1.Evidence)
	}
	if cred := req.GetCredential(); cred != "" {
		t, err := s.authenticate(ctx, cred)
		if err != nil {
			return "", nil, err
		}
		if req.GetActor() != "" && req.GetActor() != t.GetActor() {
			return "", nil, status.Errorf(codes.PermissionDenied, "Submit: the credential authenticates actor %s, not %s", t.GetActor(), req.GetActor())
		}
		ev.TokenId = t.GetId()
		return t.GetActor(), ev, nil
	}
	c := s.caller(ctx)
	switch {
	case req.GetActor() == "":
		return "", nil, status.Error(codes.Unauthenticated, "Submit needs the agent's credential, or an actor from a caller allowed to act as it")
	}
	if err := actorname.Check(req.GetActor()); err != nil {
		return "", nil, status.Errorf(codes.InvalidArgument, "Submit: %v", err)
	}
	switch {
	case c.Operator, s.fronts.Allows(c.Identity, req.GetActor()):
		return req.GetActor(), ev, nil
	}
	who := c.Identity
	if who == "" {
		who = "an unidentified caller"
	}
	return "", nil, status.Errorf(codes.PermissionDenied, "Submit: %s may not act as actor %s without the agent's credential (send the agent's token, or bind the front: latch serve --front-actor %s=%s)", who, req.GetActor(), c.Identity, req.GetActor())
}

func (s *Service) authenticate(ctx context.Context, credential string) (*recordv1.AgentToken, error) {
	if s.tokens == nil {
		return nil, status.Error(codes.FailedPrecondition, "this control plane has no token store")
	}
	t, err := s.tokens.Authenticate(ctx, credential)
	switch {
	case errors.Is(err, tokens.ErrInvalid):
		return nil, status.Error(codes.Unauthenticated, "unknown or malformed agent credential")
	case errors.Is(err, tokens.ErrRevoked), errors.Is(err, tokens.ErrExpired):
		return nil, status.Error(codes.Unauthenticated, err.Error())
	case err != nil:
		return nil, s.toStatus(err)
	}
	return t, nil
}

func (s *Service) AuthenticateAgent(ctx context.Context, req *controlplanev1.AuthenticateAgentRequest) (*controlplanev1.AuthenticateAgentResponse, error) {
	if req.GetCredential() == "" {
		return nil, status.Error(codes.InvalidArgument, "credential is required")
	}
	t, err := s.authenticate(ctx, req.GetCredential())
	if err != nil {
		return nil, err
	}
	resp := &controlplanev1.AuthenticateAgentResponse{Actor: t.GetActor(), TokenId: t.GetId()}
	if t.GetExpiresAt() != nil {
		resp.ExpiresAt = timestamppb.New(t.GetExpiresAt().AsTime())
	}
	return resp, nil
}

// maxListToolsWait bounds a ListTools long poll.
const maxListToolsWait = 60 * time.Second

func (s *Service) ListTools(ctx context.Context, req *controlplanev1.ListToolsRequest) (*controlplanev1.ListToolsResponse, error) {
	w := time.Duration(req.GetWaitMs()) * time.Millisecond
	if w < 0 || w > maxListToolsWait {
		return nil, status.Errorf(codes.InvalidArgument, "wait_ms must be between 0 and %d", maxListToolsWait.Milliseconds())
	}
	cat, version := s.e.Catalog(), s.e.CatalogVersion()
	if known := req.GetKnownVersion(); known != "" && w > 0 {
		wctx, cancel := context.WithTimeout(ctx, w)
		go func() {
			select {
			case <-s.draining:
				cancel()
			case <-wctx.Done():
			}
		}()
		cat, version = s.e.WaitCatalog(wctx, known)
		cancel()
	}
	if version == req.GetKnownVersion() {
		return &controlplanev1.ListToolsResponse{CatalogVersion: version, Unchanged: true, OperatorCommandArgs: s.e.OperatorCommandArgs()}, nil
	}
	out := &controlplanev1.ListToolsResponse{CatalogVersion: version, OperatorCommandArgs: s.e.OperatorCommandArgs()}
	for _, t := range cat.Tools {
		out.Tools = append(out.Tools, &controlplanev1.Tool{
			Name: t.Name, Description: t.Description, InputSchema: t.MCPInputSchema(),
			Replay: string(t.Replay), SideEffecting: t.SideEffecting(),
			TaskSupport: string(t.Task), Observed: t.Observed(),
		})
	}
	sort.Slice(out.Tools, func(i, j int) bool { return out.Tools[i].GetName() < out.Tools[j].GetName() })
	return out, nil
}

// readActor decides whose executions an agent-facing read or cancel may
// see (Get, List, Watch, Cancel). With a credential, the agent's own (an
// actor that differs is refused). Without one, an operator caller sees the
// actor it names ("" for every actor); a front bound to an actor
// (FrontActors) sees that actor's; anyone else is refused.
func (s *Service) readActor(ctx context.Context, rpc, actor, credential string) (string, error) {
	if credential != "" {
		t, err := s.authenticate(ctx, credential)
		if err != nil {
			return "", err
		}
		if actor != "" && actor != t.GetActor() {
			return "", status.Errorf(codes.PermissionDenied, "%s: the credential authenticates actor %s, not %s", rpc, t.GetActor(), actor)
		}
		return t.GetActor(), nil
	}
	if actor != "" {
		if err := actorname.Check(actor); err != nil {
			return "", status.Errorf(codes.InvalidArgument, "%s: %v", rpc, err)
		}
	}
	c := s.caller(ctx)
	if c.Operator || (actor != "" && s.fronts.Allows(c.Identity, actor)) {
		return actor, nil
	}
	who := c.Identity
	if who == "" {
		who = "an unidentified caller"
	}
	if actor == "" {
		return "", status.Errorf(codes.PermissionDenied, "%s: %s may read only an agent's own executions: send the agent's credential", rpc, who)
	}
	return "", status.Errorf(codes.PermissionDenied, "%s: %s may not act as actor %s without the agent's credential (latch serve --front-actor %s=%s)", rpc, who, actor, c.Identity, actor)
}
