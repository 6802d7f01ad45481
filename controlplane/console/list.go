package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/latchhq/latch/controlplane/explain"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Bounds of one listing.
const (
	listShown  = 100  // rows shown
	listScan   = 5000 // executions read at most to fill them
	pinnedScan = 200  // per pinned state
)

// states in lifecycle order, for filters and counts.
var states = []recordv1.State{
	recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.State_STATE_AUTHORIZED,
	recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW,
	recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED, recordv1.State_STATE_NOT_EXECUTED,
	recordv1.State_STATE_REJECTED, recordv1.State_STATE_CANCELLED,
}

// pinned are the states that wait for an operator's decision; the list
// shows them first ("Needs a decision").
var pinned = []recordv1.State{recordv1.State_STATE_AWAITING_APPROVAL, recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW}

// uncertain are the pinned states whose outcome is not known: their age
// counts from the first dispatch.
var uncertain = []recordv1.State{recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW}

// listFilter is the list page's query.
type listFilter struct {
	State, Tool, Actor, Since, Until, Q string
	state                               recordv1.State
	since, until                        time.Time
}

// timeForm is how datetime-local inputs send a time (read as UTC).
const timeForm = "2006-01-02T15:04"

func parseFilter(q url.Values) (listFilter, string) {
	f := listFilter{State: q.Get("state"), Tool: q.Get("tool"), Actor: strings.TrimSpace(q.Get("actor")),
		Since: q.Get("since"), Until: q.Get("until"), Q: strings.TrimSpace(q.Get("q"))}
	var problems []string
	if f.State != "" {
		st, err := lifecycle.Parse(f.State)
		if err != nil {
			problems = append(problems, "state: "+err.Error())
			f.State = ""
		}
		f.state = st
	}
	for _, tm := range []struct {
		in  string
		out *time.Time
		nm  string
	}{{f.Since, &f.since, "since"}, {f.Until, &f.until, "until"}} {
		if tm.in == "" {
			continue
		}
		t, err := time.Parse(timeForm, tm.in)
		if err != nil {
			t, err = time.Parse(time.RFC3339, tm.in)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %q is not a time like 2026-12-01T10:00 (UTC)", tm.nm, tm.in))
			continue
		}
		*tm.out = t.UTC()
	}
	if len(f.Q) > 200 {
		f.Q = f.Q[:200]
	}
	return f, strings.Join(problems, "; ")
}

func (f listFilter) matches(x *recordv1.Execution) bool {
	at := x.GetAcceptedAt().AsTime()
	switch {
	case !f.since.IsZero() && at.Before(f.since):
		return false
	case !f.until.IsZero() && !at.Before(f.until):
		return false
	case f.Q != "" && !strings.Contains(strings.ToLower(x.GetId()), strings.ToLower(f.Q)):
		return false
	}
	return true
}

// row is one execution in a table.
type row struct {
	ID, Tool, Actor, State, Outcome, Accepted, Age, Reason string
	Uncertain                                              bool
}

type stateCount struct {
	State string
	N     int64
}

type listView struct {
	Filter    listFilter
	Problem   string
	States    []string
	Tools     []string
	Pinned    []row
	Rows      []row
	More      bool
	Scanned   int
	Counts    []stateCount
	Total     int64
	Generated string
	// Held are the catalog file's tools left out of the catalog in force,
	// and why (latch catalog status lists the same).
	Held []tools.HeldTool
}

func (c *Console) listPage(w http.ResponseWriter, r *http.Request, s *session) {
	v, err := c.listing(r)
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "The executions could not be read: "+err.Error())
		return
	}
	name := "list"
	if r.URL.Query().Get("partial") == "1" {
		name = "listpart"
	}
	c.render(w, r, http.StatusOK, name, view{Title: "Executions", Operator: s.operator, CSRF: s.csrf, Nav: "executions", Page: v})
}

func (c *Console) listing(r *http.Request) (*listView, error) {
	f, problem := parseFilter(r.URL.Query())
	now := c.cfg.Clock()
	v := &listView{Filter: f, Problem: problem, Generated: now.UTC().Format(time.RFC3339)}
	for _, st := range states {
		v.States = append(v.States, lifecycle.Name(st))
	}
	names, err := c.toolNames()
	if err != nil {
		return nil, err
	}
	v.Tools = names
	if cat := c.cfg.Catalog(); cat != nil {
		v.Held = cat.Held
	}
	counts, err := c.countByState()
	if err != nil {
		return nil, err
	}
	for _, st := range states {
		v.Counts = append(v.Counts, stateCount{State: lifecycle.Name(st), N: counts[st]})
		v.Total += counts[st]
	}
	for _, st := range pinned {
		if f.state != 0 && f.state != st {
			continue
		}
		xs, err := c.cfg.Reads.List(store.Filter{State: st, Actor: f.Actor, Tool: f.Tool, Limit: pinnedScan, OldestFirst: true})
		if err != nil {
			return nil, err
		}
		for _, x := range xs {
			if f.matches(x) {
				v.Pinned = append(v.Pinned, rowOf(x, now))
			}
		}
	}
	// An exact execution ID is one read.
	if strings.HasPrefix(f.Q, "act_") && len(f.Q) == len("act_")+26 {
		if x, _, err := c.cfg.Reads.Get(f.Q, ""); err == nil && (f.state == 0 || x.GetState() == f.state) {
			v.Rows = append(v.Rows, rowOf(x, now))
		}
		return v, nil
	}
	// The store's indexes take state, actor and tool; time and ID text are
	// filtered here, over pages of the listing.
	page := listShown + 1
	if f.Q != "" || !f.since.IsZero() || !f.until.IsZero() {
		page = 500
	}
	after := ""
	for v.Scanned < listScan && len(v.Rows) <= listShown {
		xs, err := c.cfg.Reads.List(store.Filter{State: f.state, Actor: f.Actor, Tool: f.Tool, Limit: page, After: after})
		if err != nil {
			return nil, err
		}
		for _, x := range xs {
			v.Scanned++
			if !f.since.IsZero() && x.GetAcceptedAt().AsTime().Before(f.since) {
				return v, nil // newest first: the rest are older still
			}
			if f.matches(x) {
				v.Rows = append(v.Rows, rowOf(x, now))
			}
		}
		if len(xs) < page {
			break
		}
		after = xs[len(xs)-1].GetId()
	}
	if len(v.Rows) > listShown {
		v.Rows, v.More = v.Rows[:listShown], true
	}
	if v.Scanned >= listScan {
		v.More = true
	}
	return v, nil
}

func rowOf(x *recordv1.Execution, now time.Time) row {
	r := row{ID: x.GetId(), Tool: x.GetTool(), Actor: x.GetActor(), State: lifecycle.Name(x.GetState()),
		Outcome: explain.OutcomeName(x.GetOutcome()), Accepted: explain.TS(x.GetAcceptedAt()), Reason: x.GetReason()}
	since := x.GetUpdatedAt()
	if slices.Contains(uncertain, x.GetState()) {
		r.Uncertain = true
		if x.GetDispatchedAt() != nil {
			since = x.GetDispatchedAt() // as latch_oldest_unresolved_seconds counts
		}
	}
	if since == nil {
		since = x.GetAcceptedAt()
	}
	if since != nil {
		r.Age = age(now.Sub(since.AsTime()))
	}
	return r
}

// age is a short human duration: 45s, 12m, 3h20m, 4d2h.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// countCache keeps the counts by state for the journal size they were
// taken at: counting walks the state index, so it runs again only after
// the journal grew.
type countCache struct {
	size   int64
	at     time.Time
	counts map[recordv1.State]int64
}

func (c *Console) countByState() (map[recordv1.State]int64, error) {
	if c.cfg.Counts != nil {
		m := map[recordv1.State]int64{}
		for _, st := range states {
			m[st] = c.cfg.Counts(st)
		}
		return m, nil
	}
	c.countsMu.Lock()
	defer c.countsMu.Unlock()
	size, now := c.cfg.Store.JournalSize(), c.cfg.Clock()
	if c.counts.counts != nil && c.counts.size == size {
		return c.counts.counts, nil
	}
	m, err := c.cfg.Store.CountByState()
	if err != nil {
		return nil, err
	}
	c.counts = countCache{size: size, at: now, counts: m}
	return m, nil
}

// query renders a filter back into a query string (for links).
func (f listFilter) Query(extra ...string) template.URL {
	q := url.Values{}
	for k, val := range map[string]string{"state": f.State, "tool": f.Tool, "actor": f.Actor, "since": f.Since, "until": f.Until, "q": f.Q} {
		if val != "" {
			q.Set(k, val)
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return template.URL(q.Encode()) //nolint:gosec // url.Values.Encode escapes every value
}
