package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/explain"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// maxJournalShown bounds the journal records on one page (an execution
// asked about for days has many recovery queries): the newest are shown.
const maxJournalShown = 300

type field struct{ Name, Value string }

type sessionView struct {
	ID, Actor, Key, State, Client, Peer, Started, Authorized, AuthorizedBy, LastSeen, Ended, Reason string
	Trusted, CanAuthorize, CanRevoke                                                                bool
}

type resultView struct {
	Status, Exit, Summary, Body string
	Bytes                       int
	Truncated                   bool
	Headers                     []field
}

// detailView is an execution's page: the record (identity, timeline,
// arguments, result) and its story (explain.Tell: the five answers, the
// sends, recovery queries, approval trail, calls, journal records, the
// decision evidence and what can be done), which `latch exec explain`
// prints too.
type detailView struct {
	ID, Tool, Actor, State, Outcome, Reason string
	Identity                                []field
	Timeline                                []field
	Arguments, CanonicalIntent              string
	Result                                  *resultView
	Session                                 *sessionView
	explain.Report
	// JournalHidden older records are not shown (the page shows the
	// newest maxJournalShown of the story's Steps).
	JournalHidden int
	Proof         proofSummary
	// Picture is the story drawn on one time axis (picture).
	Picture template.HTML

	Uncertain, CanApprove, CanResolve, CanCancel bool
	// WaitsForSession: it awaits its agent session's authorization, not
	// an approval of its own.
	WaitsForSession bool
	Done            string
}

func (c *Console) detailPage(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	v, err := c.detail(id)
	if errors.Is(err, engine.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, fmt.Sprintf("No execution %s. Check the ID (the list's search finds it by any part).", id))
		return
	}
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "The execution could not be read: "+err.Error())
		return
	}
	v.Done = doneMessage(r.URL.Query().Get("done"))
	name := "detail"
	if r.URL.Query().Get("partial") == "1" {
		name = "detailpart"
	}
	c.render(w, r, http.StatusOK, name, view{Title: id, Operator: s.operator, CSRF: s.csrf, Nav: "executions", Page: v})
}

func doneMessage(done string) string {
	return map[string]string{
		"approve": "Approved: the execution goes on to dispatch; the journal records your name.",
		"deny":    "Denied: the agent is told your reason.",
		"resolve": "Resolved: the journal records your decision and reason.",
		"cancel":  "Cancelled before dispatch.",
	}[done]
}

func (c *Console) detail(id string) (*detailView, error) {
	x, res, err := c.cfg.Reads.Get(id, "")
	if err != nil {
		return nil, err
	}
	hist, err := c.cfg.Reads.History(id, "")
	if err != nil {
		return nil, err
	}
	v := &detailView{ID: x.GetId(), Tool: x.GetTool(), Actor: x.GetActor(), State: lifecycle.Name(x.GetState()),
		Outcome: explain.OutcomeName(x.GetOutcome()), Reason: x.GetReason()}
	add := func(list *[]field, k, val string) {
		if val != "" {
			*list = append(*list, field{k, val})
		}
	}
	add(&v.Identity, "target", fmt.Sprintf("%s (%s)", x.GetTarget(), x.GetChannel()))
	add(&v.Identity, "replay", x.GetReplay())
	add(&v.Identity, "intent_scope", x.GetIntentScope())
	add(&v.Identity, "fingerprint", x.GetFingerprint())
	add(&v.Identity, "repeat_of", x.GetRepeatOf())
	add(&v.Identity, "session", x.GetSessionId())
	add(&v.Identity, "catalog_version", x.GetCatalogVersion())
	if x.GetTargetStatus() != 0 || x.GetOutcome() != 0 {
		add(&v.Identity, "target_status", fmt.Sprint(x.GetTargetStatus()))
		add(&v.Identity, "answer", lifecycle.DescribeExecutionAnswer(x))
	}
	add(&v.Identity, "result_ref", x.GetResultRef())
	add(&v.Identity, "dispatches", fmt.Sprint(x.GetAttempts()))
	add(&v.Identity, "recovery_attempts", fmt.Sprint(x.GetRecoveryAttempts()))

	// The timeline: the same fields, names and forms as `latch exec show`.
	add(&v.Timeline, "accepted_at", explain.TS(x.GetAcceptedAt()))
	add(&v.Timeline, "authorized_at", explain.TS(x.GetAuthorizedAt()))
	add(&v.Timeline, "dispatched_at", explain.TS(x.GetDispatchedAt()))
	if x.GetLastSentAt() != nil && !x.GetLastSentAt().AsTime().Equal(x.GetDispatchedAt().AsTime()) {
		add(&v.Timeline, "last_sent_at", explain.TS(x.GetLastSentAt()))
	}
	add(&v.Timeline, "completed_at", explain.TS(x.GetCompletedAt()))
	add(&v.Timeline, "delivered_at", explain.TS(x.GetDeliveredAt()))
	add(&v.Timeline, "caller_left_at", explain.TS(x.GetCallerLeftAt()))
	if lifecycle.Observed(x.GetState()) || x.GetCallerLeftAt() != nil {
		add(&v.Timeline, "delivery", lifecycle.DescribeDelivery(lifecycle.DeliveryOf(x)))
	}
	if x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN {
		add(&v.Timeline, "next_recovery_at", explain.TS(x.GetNextRecoveryAt()))
	}
	add(&v.Timeline, "updated_at", explain.TS(x.GetUpdatedAt()))

	v.Arguments = prettyJSON(x.GetArguments())
	v.CanonicalIntent = string(x.GetCanonicalIntent())
	if res != nil {
		rv := &resultView{Summary: res.GetSummary(), Bytes: len(res.GetBody()), Truncated: res.GetBodyTruncated()}
		if res.GetStatus() != 0 {
			rv.Status = fmt.Sprint(res.GetStatus())
		}
		if res.GetExited() {
			rv.Exit = fmt.Sprintf("exit %d %s", res.GetExitCode(), res.GetSignal())
		}
		body := prettyJSON(res.GetBody())
		if len(body) > 4000 {
			body = body[:4000] + "…"
		}
		rv.Body = body
		for _, k := range sortedKeys(res.GetHeaders()) {
			rv.Headers = append(rv.Headers, field{k, res.GetHeaders()[k]})
		}
		v.Result = rv
	}

	v.Report = explain.Tell(x, hist, explain.ContractOf(c.cfg.Catalog(), x))
	v.Picture = picture(v.Report)
	v.Uncertain = slices.Contains(uncertain, x.GetState())
	v.CanApprove = v.Can(explain.DoApprove)
	v.WaitsForSession = v.Can(explain.DoAuthorizeSession)
	v.CanResolve = v.Can(explain.DoResolve)
	v.CanCancel = v.Can(explain.DoCancel)
	if x.GetSessionId() != "" {
		if sess, err := c.cfg.Store.Session(x.GetSessionId()); err == nil {
			v.Session = sessionViewOf(sess)
		}
	}
	if len(v.Steps) > maxJournalShown {
		v.JournalHidden = len(v.Steps) - maxJournalShown
		v.Steps = v.Steps[len(v.Steps)-maxJournalShown:]
	}
	v.Proof = c.proofSummary(hist)
	return v, nil
}

func sessionViewOf(s *recordv1.Session) *sessionView {
	v := &sessionView{ID: s.GetId(), Actor: s.GetActor(), Key: s.GetKey(), State: sessionState(s.GetState()), Client: s.GetClientName(), Peer: s.GetPeerAddress(),
		Started: explain.TS(s.GetStartedAt()), Authorized: explain.TS(s.GetAuthorizedAt()), AuthorizedBy: s.GetAuthorizedBy(),
		LastSeen: explain.TS(s.GetLastSeenAt()), Ended: explain.TS(s.GetEndedAt()), Reason: s.GetReason(), Trusted: s.GetTrusted()}
	v.CanAuthorize = s.GetState() == recordv1.SessionState_SESSION_STATE_PENDING && s.GetEndedAt() == nil
	v.CanRevoke = s.GetState() != recordv1.SessionState_SESSION_STATE_REVOKED
	return v
}

func sessionState(s recordv1.SessionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATE_"))
}

// prettyJSON indents JSON bytes, with <, > and & as themselves (Go's
// encoder writes them as \u003c and so on, which hides what an agent sent;
// html/template escapes them on the page). Anything else is shown as text.
func prettyJSON(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return strings.TrimSuffix(out.String(), "\n")
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
