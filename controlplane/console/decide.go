package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/engine"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// maxReason bounds a reason typed into the console (it is journaled).
const maxReason = 2000

// confirmView is the page that asks "are you sure", with the evidence.
type confirmView struct {
	Action, Title, Target, Question string
	Fields                          []field // hidden inputs carried to the confirmed POST
	Summary                         []field // what will be journaled
	Detail                          *detailView
	Session                         *sessionView
	Post                            string
}

func (c *Console) decideExecution(w http.ResponseWriter, r *http.Request, s *session) {
	id, action := r.PathValue("id"), r.PathValue("action")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if len(reason) > maxReason {
		c.fail(w, r, s, http.StatusBadRequest, fmt.Sprintf("The reason is %d characters; keep it under %d. Nothing was done.", len(reason), maxReason))
		return
	}
	v, err := c.detail(id)
	if errors.Is(err, engine.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, "No execution "+id+"; nothing was done.")
		return
	}
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "The execution could not be read: "+err.Error())
		return
	}
	cv := confirmView{Action: action, Target: id, Detail: v, Post: Prefix + "executions/" + url.PathEscape(id) + "/" + action}
	var do func(ctx context.Context) error
	switch action {
	case "approve":
		cv.Title, cv.Question = "Approve "+id, "Approve this call? It will be dispatched to "+targetOf(v)+"."
		do = func(ctx context.Context) error {
			_, err := c.api.Approve(ctx, &controlplanev1.ApproveRequest{ExecutionId: id, Operator: s.operator, Reason: reason})
			return err
		}
	case "deny":
		if reason == "" {
			c.fail(w, r, s, http.StatusBadRequest, "Denying needs a reason: the agent is shown it. Nothing was done; go back and give one.")
			return
		}
		cv.Title, cv.Question = "Deny "+id, "Deny this call? The agent is told your reason; nothing is sent."
		do = func(ctx context.Context) error {
			_, err := c.api.Deny(ctx, &controlplanev1.DenyRequest{ExecutionId: id, Operator: s.operator, Reason: reason})
			return err
		}
	case "resolve":
		as := r.PostFormValue("as")
		if reason == "" {
			c.fail(w, r, s, http.StatusBadRequest, "Resolving needs a reason: say what evidence decided it (it is journaled). Nothing was done.")
			return
		}
		req := &controlplanev1.ResolveRequest{ExecutionId: id, Operator: s.operator, Reason: reason}
		switch as {
		case "completed":
			req.Completed = true
			switch r.PostFormValue("outcome") {
			case "succeeded":
				req.Outcome = recordv1.Outcome_OUTCOME_SUCCEEDED
			case "failed_at_target":
				req.Outcome = recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
			default:
				c.fail(w, r, s, http.StatusBadRequest, "Completed needs an outcome: succeeded or failed_at_target. Nothing was done.")
				return
			}
			cv.Question = fmt.Sprintf("Record that the action happened at the target (%s)? The agent's retries get this answer; nothing is re-sent.", r.PostFormValue("outcome"))
			cv.Fields = append(cv.Fields, field{"outcome", r.PostFormValue("outcome")})
		case "not_executed":
			req.NotExecuted = true
			cv.Question = "Record that the action provably did not happen at the target? The agent may then send it again as a new execution."
		default:
			c.fail(w, r, s, http.StatusBadRequest, "Say how it ended: completed (with an outcome) or not_executed. Nothing was done.")
			return
		}
		cv.Title = "Resolve " + id
		cv.Fields = append(cv.Fields, field{"as", as})
		do = func(ctx context.Context) error {
			_, err := c.api.Resolve(ctx, req)
			return err
		}
	case "cancel":
		cv.Title, cv.Question = "Cancel "+id, "Cancel this execution before it is dispatched? Nothing will be sent."
		do = func(ctx context.Context) error {
			_, err := c.api.Cancel(ctx, &controlplanev1.CancelRequest{ExecutionId: id, Operator: s.operator, Reason: reason})
			return err
		}
	default:
		c.fail(w, r, s, http.StatusNotFound, "No such decision "+action+" (approve, deny, resolve or cancel).")
		return
	}
	cv.Fields = append(cv.Fields, field{"reason", reason})
	cv.Summary = []field{{"operator", s.operator}, {"decision", action}, {"reason", or(reason, "(none)")}}
	if r.PostFormValue("confirm") != "yes" {
		c.render(w, r, http.StatusOK, "confirm", view{Title: cv.Title, Operator: s.operator, CSRF: s.csrf, Nav: "executions", Page: cv})
		return
	}
	if err := do(asOperator(r.Context(), s)); err != nil {
		c.refused(w, r, s, err, Prefix+"executions/"+url.PathEscape(id))
		return
	}
	c.log.Info("console decision", "operator", s.operator, "execution_id", id, "decision", action)
	http.Redirect(w, r, Prefix+"executions/"+url.PathEscape(id)+"?done="+action, http.StatusSeeOther)
}

func targetOf(v *detailView) string {
	for _, f := range v.Identity {
		if f.Name == "target" {
			return f.Value
		}
	}
	return "its target"
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// refused renders an API refusal: what the control plane said, and that
// nothing was done.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, s *session, err error, back string) {
	st, _ := status.FromError(err)
	code := http.StatusInternalServerError
	switch st.Code() {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.PermissionDenied, codes.Unauthenticated:
		code = http.StatusForbidden
	case codes.FailedPrecondition:
		code = http.StatusConflict
	case codes.Unavailable:
		code = http.StatusServiceUnavailable
	}
	c.fail(w, r, s, code, "The control plane refused: "+st.Message()+". Nothing was done; the page at "+back+" shows where it stands now.")
}

type sessionsView struct {
	Sessions []*sessionView
	Done     string
}

// maxSessionsShown bounds the sessions page.
const maxSessionsShown = 200

func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request, s *session) {
	ss, err := c.cfg.Store.Sessions(maxSessionsShown)
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "The agent sessions could not be read: "+err.Error())
		return
	}
	v := sessionsView{Done: map[string]string{"authorize": "Session authorized; its waiting executions go on.", "revoke": "Session revoked."}[r.URL.Query().Get("done")]}
	for _, x := range ss {
		v.Sessions = append(v.Sessions, sessionViewOf(x))
	}
	// Pending first: they hold executions up.
	pending := v.Sessions[:0:0]
	var rest []*sessionView
	for _, x := range v.Sessions {
		if x.CanAuthorize {
			pending = append(pending, x)
		} else {
			rest = append(rest, x)
		}
	}
	v.Sessions = append(pending, rest...)
	c.render(w, r, http.StatusOK, "sessions", view{Title: "Agent sessions", Operator: s.operator, CSRF: s.csrf, Nav: "sessions", Page: v})
}

func (c *Console) decideSession(w http.ResponseWriter, r *http.Request, s *session) {
	id, action := r.PathValue("id"), r.PathValue("action")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if len(reason) > maxReason {
		c.fail(w, r, s, http.StatusBadRequest, fmt.Sprintf("The reason is %d characters; keep it under %d. Nothing was done.", len(reason), maxReason))
		return
	}
	x, err := c.cfg.Store.Session(id)
	if err != nil {
		c.fail(w, r, s, http.StatusNotFound, "No agent session "+id+"; nothing was done.")
		return
	}
	sv := sessionViewOf(x)
	cv := confirmView{Action: action, Target: id, Session: sv, Post: Prefix + "sessions/" + url.PathEscape(id) + "/" + action}
	var do func(ctx context.Context) error
	switch action {
	case "authorize":
		cv.Title, cv.Question = "Authorize session "+id, fmt.Sprintf("Authorize this session of %s? Its waiting executions go on, and later calls in it need no authorization.", sv.Actor)
		do = func(ctx context.Context) error {
			_, err := c.api.AuthorizeSession(ctx, &controlplanev1.AuthorizeSessionRequest{SessionId: id, Operator: s.operator})
			return err
		}
	case "revoke":
		if reason == "" {
			c.fail(w, r, s, http.StatusBadRequest, "Revoking a session needs a reason (it is journaled). Nothing was done.")
			return
		}
		cv.Title, cv.Question = "Revoke session "+id, fmt.Sprintf("Revoke this session of %s? Its new calls are refused.", sv.Actor)
		do = func(ctx context.Context) error {
			_, err := c.api.RevokeSession(ctx, &controlplanev1.RevokeSessionRequest{SessionId: id, Operator: s.operator, Reason: reason})
			return err
		}
	default:
		c.fail(w, r, s, http.StatusNotFound, "No such session decision "+action+" (authorize or revoke).")
		return
	}
	cv.Fields = []field{{"reason", reason}}
	cv.Summary = []field{{"operator", s.operator}, {"decision", action}, {"reason", or(reason, "(none)")}}
	if r.PostFormValue("confirm") != "yes" {
		c.render(w, r, http.StatusOK, "confirm", view{Title: cv.Title, Operator: s.operator, CSRF: s.csrf, Nav: "sessions", Page: cv})
		return
	}
	if err := do(asOperator(r.Context(), s)); err != nil {
		c.refused(w, r, s, err, Prefix+"sessions")
		return
	}
	c.log.Info("console session decision", "operator", s.operator, "session_id", id, "decision", action)
	http.Redirect(w, r, Prefix+"sessions?done="+action, http.StatusSeeOther)
}

type auditView struct {
	Checkpoints   []*checkpointView
	JournalSize   int64
	VerifyCommand string
	VerifierKey   string
	Newest        *checkpointView
}

// maxCheckpointsShown bounds the audit page.
const maxCheckpointsShown = 50

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, s *session) {
	cps, err := c.cfg.Store.NewestCheckpoints(maxCheckpointsShown)
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "The checkpoints could not be read: "+err.Error())
		return
	}
	v := auditView{JournalSize: c.cfg.Store.JournalSize(), VerifyCommand: c.cfg.VerifyCommand, VerifierKey: c.cfg.VerifierKey}
	for _, n := range cps {
		cv, _ := c.openCheckpoint(n)
		v.Checkpoints = append(v.Checkpoints, cv)
	}
	if len(v.Checkpoints) > 0 {
		v.Newest = v.Checkpoints[0]
	}
	c.render(w, r, http.StatusOK, "audit", view{Title: "Audit", Operator: s.operator, CSRF: s.csrf, Nav: "audit", Page: v})
}
