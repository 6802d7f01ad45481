package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/explain"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// maxJournalShown bounds the journal records on one page (an execution
// asked about for days has many recovery queries): the newest are shown.
const maxJournalShown = 300

type field struct{ Name, Value string }

type attempt struct {
	N                          int
	Time, Kind, Key, Carriers  string
	Answer, AnswerState, Index string
}

type query struct {
	Time, Kind, Saw, Verdict string
	Evidence                 bool
	Index                    uint64
}

type trailRow struct{ Time, What, Reason string }

type evidenceRow struct {
	Call, Time                                          string
	Transport, JSONRPC, MCPSession, Client, Peer, Token string
	Traceparent                                         string
}

type journalRow struct {
	Index                     uint64
	Time, Step, Reason, Actor string
	Evidence                  string
}

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

type detailView struct {
	ID, Tool, Actor, State, Outcome, Reason string
	Identity                                []field
	Timeline                                []field
	Arguments, CanonicalIntent              string
	Result                                  *resultView
	Attempts                                []attempt
	Queries                                 []query
	Trail                                   []trailRow
	Session                                 *sessionView
	Evidence                                []evidenceRow
	Explain                                 explain.Report
	Journal                                 []journalRow
	JournalHidden                           int
	Proof                                   proofSummary

	Uncertain, CanApprove, CanResolve, CanCancel bool
	// WaitsForSession: it awaits its agent session's authorization, not
	// an approval of its own.
	WaitsForSession bool
	// SentSummary and AnswerSummary are the evidence shown next to the
	// decision buttons: what was sent and when, and what the target said.
	SentSummary, AnswerSummary string
	Done                       string
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

	c.attempts(v, x, hist)
	v.Explain = explain.Explain(x, hist)
	v.Uncertain = slices.Contains(pinned, x.GetState())
	v.CanApprove = x.GetState() == recordv1.State_STATE_AWAITING_APPROVAL
	v.WaitsForSession = v.CanApprove && lifecycle.ReasonOf(x) == recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION
	v.CanResolve = v.Uncertain
	v.CanCancel = lifecycle.Cancellable(x.GetState())
	if x.GetSessionId() != "" {
		if sess, err := c.cfg.Store.Session(x.GetSessionId()); err == nil {
			v.Session = sessionViewOf(sess)
		}
	}
	shown := hist
	if len(shown) > maxJournalShown {
		v.JournalHidden = len(shown) - maxJournalShown
		shown = shown[len(shown)-maxJournalShown:]
	}
	for _, e := range shown {
		step := lifecycle.Name(e.GetTo())
		if e.GetKind() != "transition" {
			step = e.GetKind() + " (" + lifecycle.Name(e.GetTo()) + ")"
		}
		v.Journal = append(v.Journal, journalRow{Index: e.GetIndex(), Time: explain.TS(e.GetTime()), Step: step, Reason: e.GetReason(),
			Actor: e.GetActor(), Evidence: explain.EvidenceText(e.GetEvidence())})
	}
	v.Proof = c.proofSummary(hist)
	return v, nil
}

// attempts fills the dispatch attempts, recovery queries, approval trail,
// correlation evidence and the decision evidence from the journal.
func (c *Console) attempts(v *detailView, x *recordv1.Execution, hist []*recordv1.JournalEntry) {
	key, carriers := c.keyCarriers(x)
	for i, e := range hist {
		kind := ""
		switch {
		case e.GetKind() == "transition" && e.GetTo() == recordv1.State_STATE_DISPATCHED:
			kind = "dispatch"
		case e.GetKind() == "recovery_replay":
			kind = "re-send by recovery"
		}
		if kind != "" {
			a := attempt{N: len(v.Attempts) + 1, Time: explain.TS(e.GetTime()), Kind: kind, Key: key, Carriers: carriers,
				Answer: "no answer recorded yet", Index: fmt.Sprint(e.GetIndex())}
			if ans := answerAfter(hist[i+1:]); ans != nil {
				a.AnswerState = lifecycle.Name(ans.GetTo())
				a.Answer = ans.GetReason()
				if ans.GetTo() == recordv1.State_STATE_COMPLETED {
					a.Answer = fmt.Sprintf("%s, %s (%s)", lifecycle.DescribeExecutionAnswer(ans.GetExecution()), explain.OutcomeName(ans.GetExecution().GetOutcome()), ans.GetReason())
				}
				a.Answer = explain.TS(ans.GetTime()) + ": " + a.Answer
			}
			v.Attempts = append(v.Attempts, a)
		}
		switch e.GetKind() {
		case "recovery_query", "recovery_attempt":
			v.Queries = append(v.Queries, query{Time: explain.TS(e.GetTime()), Kind: e.GetKind(), Saw: e.GetReason(),
				Verdict: "not evidence: the execution stays " + lifecycle.Name(e.GetTo()) + " and is asked again", Index: e.GetIndex()})
		case "recovery":
			q := query{Time: explain.TS(e.GetTime()), Kind: e.GetKind(), Saw: e.GetReason(), Index: e.GetIndex()}
			switch e.GetTo() {
			case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NOT_EXECUTED:
				q.Evidence, q.Verdict = true, "evidence: it settled the execution as "+lifecycle.Name(e.GetTo())
			default:
				q.Verdict = "no evidence to be had: handed to an operator as " + lifecycle.Name(e.GetTo())
			}
			v.Queries = append(v.Queries, q)
		case "approval", "resolve":
			v.Trail = append(v.Trail, trailRow{Time: explain.TS(e.GetTime()), What: e.GetKind() + ": " + lifecycle.Name(e.GetFrom()) + " → " + lifecycle.Name(e.GetTo()), Reason: e.GetReason()})
		}
		if e.GetTo() == recordv1.State_STATE_AWAITING_APPROVAL && e.GetFrom() != recordv1.State_STATE_AWAITING_APPROVAL {
			v.Trail = append(v.Trail, trailRow{Time: explain.TS(e.GetTime()), What: "approval card opened", Reason: e.GetReason()})
		}
		if e.GetTo() == recordv1.State_STATE_ACCEPTED && e.GetKind() == "transition" {
			v.Evidence = append(v.Evidence, evidenceOf("first call", e, e.GetExecution().GetEvidence()))
		}
		if e.GetKind() == "attach" {
			v.Evidence = append(v.Evidence, evidenceOf(fmt.Sprintf("call %d (attached)", len(v.Evidence)+1), e, e.GetEvidence()))
		}
	}
	if len(v.Evidence) == 0 && x.GetEvidence() != nil {
		v.Evidence = append(v.Evidence, evidenceOf("first call", nil, x.GetEvidence()))
	}
	// Decision evidence.
	switch {
	case x.GetDispatchedAt() != nil:
		v.SentSummary = fmt.Sprintf("Sent to %s at %s (%d dispatch attempt(s), last at %s), %s.", x.GetTarget(), explain.TS(x.GetDispatchedAt()), x.GetAttempts(), explain.TS(x.GetLastSentAt()), keyPhrase(key, carriers))
	default:
		v.SentSummary = "Nothing has been sent to " + x.GetTarget() + " yet."
	}
	switch {
	case len(v.Attempts) > 0 && v.Attempts[len(v.Attempts)-1].AnswerState != "":
		v.AnswerSummary = "The target's last answer: " + v.Attempts[len(v.Attempts)-1].Answer
	case x.GetDispatchedAt() != nil:
		v.AnswerSummary = "No answer from the target has been recorded."
	}
	if n := len(v.Queries); n > 0 {
		v.AnswerSummary += fmt.Sprintf(" Last recovery query at %s: %s", v.Queries[n-1].Time, v.Queries[n-1].Saw)
	}
}

func keyPhrase(key, carriers string) string {
	if key == "" {
		return "without the execution ID (the target cannot tell a re-send from a new request)"
	}
	return "carrying " + key + " as its key (" + carriers + ")"
}

// answerAfter is the first record after a send that says what came of it.
func answerAfter(rest []*recordv1.JournalEntry) *recordv1.JournalEntry {
	for _, e := range rest {
		switch {
		case e.GetKind() == "recovery_query" || e.GetKind() == "recovery_attempt":
			return e
		case e.GetKind() == "recovery_replay" || (e.GetKind() == "transition" && e.GetTo() == recordv1.State_STATE_DISPATCHED):
			return nil // the next send came before an answer
		}
		switch e.GetTo() {
		case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_NEEDS_REVIEW:
			if e.GetFrom() != e.GetTo() {
				return e
			}
		}
	}
	return nil
}

// keyCarriers says what key went to the target and where: the execution
// ID, in the places the tool's contract puts it.
func (c *Console) keyCarriers(x *recordv1.Execution) (string, string) {
	cat := c.cfg.Catalog()
	if cat == nil {
		return x.GetId(), "contract not in the catalog in force"
	}
	tool := cat.Tools[x.GetTool()]
	if tool == nil {
		return x.GetId(), "tool not in the catalog in force"
	}
	tg := cat.Targets[tool.Target]
	if tg != nil && (tg.Channel == tools.ChannelLocal || tg.Channel == tools.ChannelSSH) {
		if tg.HostagentSocket != "" {
			return x.GetId(), "host agent marker id"
		}
		return "", ""
	}
	cs := tool.KeyCarriers(tg)
	if len(cs) == 0 {
		return "", ""
	}
	return x.GetId(), strings.Join(cs, ", ")
}

func evidenceOf(call string, e *recordv1.JournalEntry, ev *recordv1.Evidence) evidenceRow {
	r := evidenceRow{Call: call, Transport: ev.GetTransport(), JSONRPC: ev.GetJsonrpcId(), MCPSession: ev.GetMcpSessionId(),
		Client: ev.GetClientName(), Peer: ev.GetPeerAddress(), Token: ev.GetTokenId(), Traceparent: ev.GetTraceparent()}
	if e != nil {
		r.Time = explain.TS(e.GetTime())
	}
	return r
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
