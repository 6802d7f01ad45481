package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/latchhq/latch/controlplane/observation"
	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// maxObservedPairs bounds the pairs the observe page lists.
const maxObservedPairs = 200

// observeView is the observe page: latch observe report's numbers, each
// pair linked to both executions.
type observeView struct {
	Since, Scope string
	Scanned      int64
	Truncated    bool
	Tools        []observedToolView
	Pairs        []observedPairView
}

type observedToolView struct {
	Tool, Mode, Next, Gap                                     string
	Ready                                                     bool
	Calls, Attach, Twice, NewID, NewSession, Concurrent, Hold int64
	Approval                                                  int64
}

type observedPairView struct {
	Tool, ID, Prior, PriorState, Gap, At, How string
	Twice                                     bool
}

// observePage is GET /ui/observe[?since=24h]: what enforcement would have
// done with the calls of tools in observe mode (the observe report).
func (c *Console) observePage(w http.ResponseWriter, r *http.Request, s *session) {
	v := observeView{Since: r.URL.Query().Get("since"), Scope: "every call kept"}
	now := c.cfg.Clock()
	opt := observation.Options{MaxPairs: maxObservedPairs, Now: now}
	if v.Since != "" {
		d, err := time.ParseDuration(v.Since)
		if err != nil || d <= 0 {
			c.fail(w, r, s, http.StatusBadRequest, fmt.Sprintf("since=%q is not a positive duration; use one like 24h or 30m.", v.Since))
			return
		}
		opt.Since = now.Add(-d)
		v.Scope = "calls since " + opt.Since.UTC().Format(time.RFC3339)
	}
	rep, err := observation.Build(c.cfg.Store, c.cfg.Catalog(), opt)
	if err != nil {
		c.log.Error("observe report failed", "error", err)
		c.fail(w, r, s, http.StatusInternalServerError, "The observe report could not be read from the store; see the control plane's log.")
		return
	}
	v.Scanned, v.Truncated = rep.GetScanned(), rep.GetTruncated()
	for _, t := range rep.GetTools() {
		tv := observedToolView{Tool: t.GetTool(), Mode: t.GetMode(), Next: t.GetNextStep(), Gap: "-",
			Ready: t.GetMode() == "observe" && t.GetContractComplete(),
			Calls: t.GetCalls(), Attach: t.GetWouldAttach(), Twice: t.GetReachedTwice(), NewID: t.GetNewRequestId(),
			NewSession: t.GetNewSession(), Concurrent: t.GetConcurrent(), Hold: t.GetWouldHoldUncertain(), Approval: t.GetWouldNeedApproval()}
		if t.GetWouldAttach() > 0 {
			tv.Gap = gap(t.GetGapMinSeconds()) + " / " + gap(t.GetGapMedianSeconds()) + " / " + gap(t.GetGapMaxSeconds())
		}
		v.Tools = append(v.Tools, tv)
	}
	for _, p := range rep.GetPairs() {
		v.Pairs = append(v.Pairs, observedPairView{Tool: p.GetTool(), ID: p.GetExecutionId(), Prior: p.GetPriorExecutionId(),
			PriorState: lifecycle.Name(p.GetPriorState()), Gap: gap(p.GetGapSeconds()),
			At: p.GetAcceptedAt().AsTime().UTC().Format(time.RFC3339Nano), How: pairHow(p), Twice: p.GetReachedTwice()})
	}
	c.render(w, r, http.StatusOK, "observe", view{Title: "Observe", Operator: s.operator, CSRF: s.csrf, Nav: "observe", Page: v})
}

func pairHow(p *controlplanev1.ObservedPair) string {
	var how []string
	if p.GetConcurrent() {
		how = append(how, "while the first was in flight")
	}
	if p.GetNewSession() {
		how = append(how, "in a new MCP session")
	}
	if p.GetNewRequestId() {
		how = append(how, "with a new JSON-RPC id")
	}
	return strings.Join(how, ", ")
}

func gap(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
