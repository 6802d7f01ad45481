package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// SessionConfig sets the session rule of the decision order (docs/design §9).
type SessionConfig struct {
	// Required: a new agent session needs an operator's authorization
	// before its executions proceed (production default: true).
	Required bool
	// Trusted reports actors whose sessions need no authorization (the dev
	// actor of `latch dev`, for instance). Nil: none.
	Trusted func(actor string) bool
	// Anchor returns the newest signed checkpoint, which the session rule
	// proves an authorized session's journal record against before it
	// first honours it (the tokens service's Anchor). Nil: no proof, only
	// the record check.
	Anchor func() (*journal.Checkpoint, error)
	// CommandArgs are appended to the operator commands logged (at info)
	// when an execution starts waiting for a session authorization or an
	// approval, so the line can be pasted as is: "--data DIR" for a data
	// dir other than the admin commands' default.
	CommandArgs string
	// BindRuns binds a run id's session to the MCP session (else the
	// token) that named it (sessions_bind.go): a run authorized on one MCP
	// session is a new session on another. False: a run's session is the
	// actor plus the run id, so any holder of the actor's token naming it
	// joins the authorization.
	BindRuns bool
}

// OperatorCommandArgs is what an operator adds to a latch command to reach
// this control plane (SessionConfig.CommandArgs; "" for the default).
func (e *Engine) OperatorCommandArgs() string { return strings.TrimSpace(e.cfg.Sessions.CommandArgs) }

// logPending tells the operator, at info, that x waits and which command
// lets it proceed. The command is the decision's, never an argument value.
func (e *Engine) logPending(x *recordv1.Execution) {
	cmd := "latch approvals approve " + x.GetId()
	what := "execution awaits approval"
	if lifecycle.ReasonOf(x) == recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION && x.GetSessionId() != "" {
		cmd = "latch session authorize " + x.GetSessionId()
		what = "agent session awaits authorization"
	}
	if a := e.OperatorCommandArgs(); a != "" {
		cmd += " " + a
	}
	e.log.Info(what, "execution_id", x.GetId(), "tool", x.GetTool(), "actor", x.GetActor(), "run", cmd)
}

// ErrSessionNotFound is returned for an unknown session id.
var ErrSessionNotFound = errors.New("engine: session not found")

// sessionOf names the session a request belongs to: the actor plus the
// explicit run id, else plus the MCP session, else the actor alone (a
// stateless client without a run id).
func sessionOf(actor, scope string, ev *recordv1.Evidence) (id, key string) {
	switch {
	case scope != "":
		key = "run:" + scope
	case ev.GetMcpSessionId() != "":
		key = "mcp:" + ev.GetMcpSessionId()
	default:
		key = "actor"
	}
	sum := sha256.Sum256([]byte(actor + "\x00" + key))
	return "ses_" + hex.EncodeToString(sum[:10]), key
}

func (e *Engine) trusted(actor string) bool {
	return e.cfg.Sessions.Trusted != nil && e.cfg.Sessions.Trusted(actor)
}

// sessionRule is the session rule of the decision order.
func (e *Engine) sessionRule(_ context.Context, x *recordv1.Execution, tool *tools.Tool) Decision {
	reject, wait, code, why := e.sessionVerdict(x.GetActor(), x.GetSessionId(), tool.Approval == tools.ApprovalSession)
	return Decision{Reject: reject, NeedApproval: wait, Code: code, Reason: why}
}

// sessionVerdict is the session rule's part of the decision order. It
// applies when sessions are required, and always to tools whose contract
// says approval: session; trusted actors are exempt.
func (e *Engine) sessionVerdict(actor, id string, toolWantsSession bool) (reject, wait bool, code recordv1.ReasonCode, reason string) {
	const (
		authorization = recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION
		revoked       = recordv1.ReasonCode_REASON_CODE_SESSION_REVOKED
	)
	if !(e.cfg.Sessions.Required || toolWantsSession) || e.trusted(actor) {
		return false, false, 0, ""
	}
	s, err := e.st.Session(id)
	switch {
	case err == nil && s.GetState() == recordv1.SessionState_SESSION_STATE_AUTHORIZED:
		// Authorized lets the call proceed without an operator: the
		// record must be the one its journal record carries (a session
		// edited into authorized in a stopped store, or by another writer
		// of its database, is not honoured, on a store of any size).
		if cerr := e.checkSession(s); cerr != nil {
			e.log.Error("agent session record disagrees with its journal: its calls wait for an operator", "session_id", id, "error", cerr)
			if se := (*store.StateError)(nil); errors.As(cerr, &se) {
				e.sessionMu.Lock()
				e.sessionMismatches = append(e.sessionMismatches, se.Mismatches...)
				e.sessionMu.Unlock()
				e.sessionFailOnce.Do(func() { close(e.sessionsFailed) })
			}
			return false, true, authorization, lifecycle.Reason(authorization, fmt.Sprintf("agent session %s (actor %s) is stored as authorized but its record does not match its journal record (%v); an operator must authorize it again: latch session authorize %s", id, actor, cerr, id))
		}
		return false, false, 0, ""
	case err == nil && s.GetState() == recordv1.SessionState_SESSION_STATE_REVOKED:
		return true, false, revoked, lifecycle.Reason(revoked, fmt.Sprintf("session %s was revoked: %s", id, s.GetReason()))
	}
	return false, true, authorization, lifecycle.Reason(authorization, fmt.Sprintf("agent session %s (actor %s) is new and needs an operator's authorization: latch session authorize %s", id, actor, id))
}

// checkSession holds an authorized session against its journal record
// (store.CheckSession, with the inclusion proof against the newest signed
// checkpoint) unless this process cleared the same record at the same
// journal index already: a cleared session costs one read of its session
// journal index per call, and any journaled change (a revocation moves the
// index) or edit of the record is checked again.
func (e *Engine) checkSession(s *recordv1.Session) error {
	id := s.GetId()
	idx, err := e.st.SessionJournalIndex(id)
	if c, ok := e.clearedSessions.Load(id); ok && err == nil {
		if c := c.(clearedSession); c.index == idx && store.SameSession(c.session, s) {
			return nil
		}
	}
	var anchor *journal.Checkpoint
	if e.cfg.Sessions.Anchor != nil {
		if anchor, err = e.cfg.Sessions.Anchor(); err != nil {
			return err
		}
	}
	if err := e.st.CheckSession(s, anchor); err != nil {
		return err
	}
	if idx, err := e.st.SessionJournalIndex(id); err == nil {
		e.clearedSessions.Store(id, clearedSession{index: idx, session: proto.Clone(s).(*recordv1.Session)})
	}
	return nil
}

// clearedSession is a session record checkSession cleared, and the
// journal index its session journal index named then.
type clearedSession struct {
	index   int64
	session *recordv1.Session
}

// SessionsFailed is closed when a session stored as authorized was found to
// disagree with its journal record (its call waited for an operator
// instead): the caller stops serving from the store.
func (e *Engine) SessionsFailed() <-chan struct{} { return e.sessionsFailed }

// SessionMismatches returns the session mismatches found so far.
func (e *Engine) SessionMismatches() []store.Mismatch {
	e.sessionMu.Lock()
	defer e.sessionMu.Unlock()
	return append([]store.Mismatch(nil), e.sessionMismatches...)
}

// touchSession records the session inside a Submit update: created on first
// sight (journaled), last_seen_at moved on every call.
func (e *Engine) touchSession(tx *store.Tx, id, key, actor string, ev *recordv1.Evidence, now time.Time) error {
	s, err := tx.Session(id)
	if err == nil {
		// last_seen_at is coarse (a second): a busy session does not
		// rewrite its record on every call.
		if now.Sub(s.GetLastSeenAt().AsTime()) < time.Second {
			return nil
		}
		s.LastSeenAt = timestamppb.New(now)
		return tx.PutSession(s)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s = &recordv1.Session{
		Id: id, Actor: actor, Key: key, State: recordv1.SessionState_SESSION_STATE_PENDING,
		TokenId: ev.GetTokenId(), ClientName: ev.GetClientName(), PeerAddress: ev.GetPeerAddress(),
		StartedAt: timestamppb.New(now), LastSeenAt: timestamppb.New(now),
	}
	if !e.cfg.Sessions.Required || e.trusted(actor) {
		s.State, s.Trusted = recordv1.SessionState_SESSION_STATE_AUTHORIZED, e.trusted(actor)
		s.AuthorizedAt = timestamppb.New(now)
		s.AuthorizedBy = "policy: trusted actor or sessions not required"
	}
	if err := tx.PutSession(s); err != nil {
		return err
	}
	_, err = tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: recordv1.EntryKind_ENTRY_KIND_SESSION_STARTED, Actor: actor, Evidence: ev, Session: s})
	return err
}

// Sessions lists agent sessions.
func (e *Engine) Sessions(limit int) ([]*recordv1.Session, error) { return e.st.Sessions(limit) }

// AuthorizeSession authorizes a session; its pending executions go through
// the rest of the decision order (the rules after the session rule): those
// that waited only for the session proceed, those that also need a per-call
// approval keep waiting for it.
func (e *Engine) AuthorizeSession(ctx context.Context, id, operator string) (*recordv1.Session, error) {
	s, err := e.setSession(ctx, id, recordv1.EntryKind_ENTRY_KIND_SESSION_AUTHORIZED, func(s *recordv1.Session, now time.Time) {
		s.State = recordv1.SessionState_SESSION_STATE_AUTHORIZED
		s.AuthorizedAt, s.AuthorizedBy, s.Reason = timestamppb.New(now), operator, ""
	})
	if err != nil {
		return nil, err
	}
	rest := e.rulesAfter(RuleSession)
	for _, x := range e.pendingOf(id) {
		if tool := e.Catalog().Tools[x.GetTool()]; tool != nil {
			switch _, d := verdict(ctx, rest, x, tool); {
			case d.Reject:
				if _, err := e.Deny(ctx, x.GetId(), operator, d.Reason); err != nil {
					e.log.Debug("session authorized but execution not denied", "execution_id", x.GetId(), "error", err)
				}
				continue
			case d.NeedApproval:
				e.journal(ctx, x, recordv1.EntryKind_ENTRY_KIND_APPROVAL, "session "+id+" authorized by "+operator+"; the tool still requires approval for this call", func(cur *recordv1.Execution) { //nolint:errcheck // best effort note
					cur.Reason, cur.ReasonCode = d.Reason, d.code()
				})
				continue
			}
		}
		if _, err := e.Approve(ctx, x.GetId(), operator, "session "+id+" authorized"); err != nil {
			e.log.Debug("session authorized but execution not approved", "execution_id", x.GetId(), "error", err)
		}
	}
	return s, nil
}

// RevokeSession revokes a session and rejects its pending executions. Its
// later calls get the same rejection.
func (e *Engine) RevokeSession(ctx context.Context, id, operator, reason string) (*recordv1.Session, error) {
	if reason == "" {
		return nil, fmt.Errorf("%w: a reason is required", ErrInvalidRequest)
	}
	s, err := e.setSession(ctx, id, recordv1.EntryKind_ENTRY_KIND_SESSION_REVOKED, func(s *recordv1.Session, _ time.Time) {
		s.State, s.Reason = recordv1.SessionState_SESSION_STATE_REVOKED, "revoked by "+operator+": "+reason
	})
	if err != nil {
		return nil, err
	}
	for _, x := range e.pendingOf(id) {
		if _, err := e.Deny(ctx, x.GetId(), operator, lifecycle.Reason(recordv1.ReasonCode_REASON_CODE_SESSION_REVOKED, reason)); err != nil {
			e.log.Debug("session revoked but execution not denied", "execution_id", x.GetId(), "error", err)
		}
	}
	return s, nil
}

func (e *Engine) setSession(ctx context.Context, id string, kind recordv1.EntryKind, mutate func(*recordv1.Session, time.Time)) (*recordv1.Session, error) {
	var out *recordv1.Session
	now := e.cfg.Clock()
	err := e.st.Update(ctx, func(tx *store.Tx) error {
		s, err := tx.Session(id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s (latch session list shows the known ones)", ErrSessionNotFound, id)
		}
		if err != nil {
			return err
		}
		mutate(s, now)
		if err := tx.PutSession(s); err != nil {
			return err
		}
		if _, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: kind, Actor: s.GetActor(), Reason: s.GetReason(), Session: s}); err != nil {
			return err
		}
		out = proto.Clone(s).(*recordv1.Session)
		return nil
	})
	return out, err
}

// pendingOf lists the session's executions awaiting approval.
func (e *Engine) pendingOf(sessionID string) []*recordv1.Execution {
	xs, err := e.st.List(store.Filter{State: recordv1.State_STATE_AWAITING_APPROVAL, Limit: 1000})
	if err != nil {
		e.log.Error("pending executions scan failed", "error", err)
		return nil
	}
	var out []*recordv1.Execution
	for _, x := range xs {
		if x.GetSessionId() == sessionID {
			out = append(out, x)
		}
	}
	return out
}

// EndSession records that an agent's MCP session closed. Executions of that
// session whose results it never received (lifecycle.Owed: anything not
// delivered, rejected, cancelled or not_executed) make it orphaned: journaled, listed, and kept
// for a retry to attach to.
func (e *Engine) EndSession(ctx context.Context, actor, mcpSessionID string) (*recordv1.Session, []string, error) {
	if actor == "" || mcpSessionID == "" {
		return nil, nil, fmt.Errorf("%w: actor and mcp_session_id are required", ErrInvalidRequest)
	}
	id, _ := sessionOf(actor, "", &recordv1.Evidence{McpSessionId: mcpSessionID})
	// A delivered record may be waiting for a group commit (MarkDelivered
	// is lazy): commit it first, or its execution would be listed as a
	// result the session never received.
	if err := e.st.Flush(ctx); err != nil {
		return nil, nil, err
	}
	xs, err := e.st.SessionExecutions(id)
	if err != nil {
		return nil, nil, err
	}
	var orphans []string
	for _, x := range xs {
		if lifecycle.Owed(x.GetState()) {
			orphans = append(orphans, x.GetId())
		}
	}
	// The end and the orphaning are one atomic step: readers never see an
	// ended session whose orphans are not recorded yet.
	var out *recordv1.Session
	now := e.cfg.Clock()
	err = e.st.Update(ctx, func(tx *store.Tx) error {
		s, err := tx.Session(id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s", ErrSessionNotFound, id)
		}
		if err != nil {
			return err
		}
		s.EndedAt = timestamppb.New(now)
		if _, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: recordv1.EntryKind_ENTRY_KIND_SESSION_ENDED, Actor: actor, Session: s}); err != nil {
			return err
		}
		if len(orphans) > 0 {
			s.Reason = fmt.Sprintf("ended with %d execution(s) it never received: %v; a retry of the same intent attaches to them", len(orphans), orphans)
			if _, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: recordv1.EntryKind_ENTRY_KIND_SESSION_ORPHANED, Actor: actor, Reason: s.Reason, Session: s}); err != nil {
				return err
			}
		}
		out = proto.Clone(s).(*recordv1.Session)
		return tx.PutSession(s)
	})
	if err != nil {
		return nil, nil, err
	}
	s := out
	return s, orphans, nil
}
