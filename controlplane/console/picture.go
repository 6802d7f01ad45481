package console

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"

	"github.com/latchhq/latch/controlplane/explain"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The picture of an execution: its story (explain.Tell) drawn on one time
// axis as an SVG made here, on the server, with no script. One lane per
// source, top to bottom: the calls that reached Latch (session, client,
// JSON-RPC id), the execution's states (a band per state, from the record
// that entered it to the next), every send to the target with a line to its
// answer, the recovery queries with their verdicts (filled: evidence;
// hollow: not), the approval trail, and delivery. Every mark carries a
// <title> (what a pointer or a screen reader gets) and data-kind, which the
// browser test counts.

// Geometry of the picture, in SVG units (the page shows it 1:1 in a
// scrolling box, so a phone scrolls it sideways instead of shrinking it
// past reading).
const (
	picWidth  = 960
	picLabelW = 92 // the lanes' names
	picRight  = 24
	picTop    = 14
	picLane   = 46
	picAxis   = 34 // under the lanes: the time axis
)

// lanes, top to bottom.
var lanes = []string{"calls", "states", "sends", "recovery", "approvals", "delivery"}

// mark is one thing drawn: at a time, in a lane, until another time (a
// band or a send's line to its answer) or a point.
type mark struct {
	lane       int
	at, until  time.Time
	kind       string // data-kind: call, state, send, answer, query, approval, delivery
	label      string // short, drawn
	title      string // whole, the <title>
	class      string // a state name (for its colour) or ok/unk
	hollow     bool
	answerText string
}

// picture draws r; "" when r has no timed record.
func picture(r explain.Report) template.HTML {
	ms := marksOf(r)
	if len(ms) == 0 {
		return ""
	}
	lo, hi := ms[0].at, ms[0].at
	for _, m := range ms {
		for _, t := range []time.Time{m.at, m.until} {
			if t.IsZero() {
				continue
			}
			if t.Before(lo) {
				lo = t
			}
			if t.After(hi) {
				hi = t
			}
		}
	}
	span := hi.Sub(lo)
	x0, x1 := float64(picLabelW), float64(picWidth-picRight)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return x0
		}
		return x0 + (x1-x0)*float64(t.Sub(lo))/float64(span)
	}
	height := picTop + len(lanes)*picLane + picAxis
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="picture" class="picture" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="picture-title">`, picWidth, height, picWidth, height)
	fmt.Fprintf(&b, `<title id="picture-title">%s</title>`, esc(fmt.Sprintf("What happened to %s, from %s to %s (%s)", r.ExecutionID, lo.UTC().Format(time.RFC3339Nano), hi.UTC().Format(time.RFC3339Nano), span.Round(time.Millisecond))))
	for i, name := range lanes {
		y := picTop + i*picLane
		fmt.Fprintf(&b, `<g class="lane" data-lane="%s"><rect class="lane-bg" x="0" y="%d" width="%d" height="%d"></rect><text class="lane-name" x="6" y="%d">%s</text></g>`,
			name, y, picWidth, picLane, y+picLane/2+4, name)
	}
	// The axis: start, end and three ticks between, with the time since
	// the start.
	ay := picTop + len(lanes)*picLane
	fmt.Fprintf(&b, `<g class="axis"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d"></line>`, x0, ay, x1, ay)
	for i := 0; i <= 4; i++ {
		tx := x0 + (x1-x0)*float64(i)/4
		label := "+" + (span * time.Duration(i) / 4).Round(time.Millisecond).String()
		anchor := "middle"
		switch i {
		case 0:
			label, anchor = lo.UTC().Format("15:04:05.000")+" UTC", "start"
		case 4:
			anchor = "end"
		}
		if span <= 0 && i > 0 {
			break
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"></line><text x="%.1f" y="%d" text-anchor="%s">%s</text>`, tx, ay, tx, ay+5, tx, ay+18, anchor, esc(label))
	}
	b.WriteString(`</g>`)
	for i, m := range ms {
		y := float64(picTop + m.lane*picLane)
		mid := y + picLane/2
		// Labels alternate above and below the mark so that neighbours
		// do not write over each other.
		ly := y + 13
		if i%2 == 1 {
			ly = y + picLane - 5
		}
		fmt.Fprintf(&b, `<g class="mark %s" data-kind="%s"><title>%s</title>`, esc(m.class), m.kind, esc(m.title))
		switch m.kind {
		case "state":
			until := m.until
			if until.IsZero() {
				until = hi
			}
			w := max(x(until)-x(m.at), 3)
			fmt.Fprintf(&b, `<rect class="band" x="%.1f" y="%.1f" width="%.1f" height="%d" rx="3"></rect>`, x(m.at), mid-9, w, 18)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`, x(m.at)+3, mid+4, esc(clip(m.label, int(w/7))))
		case "send":
			if !m.until.IsZero() {
				fmt.Fprintf(&b, `<line class="answer-line" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"></line>`, x(m.at), mid, x(m.until), mid)
				fmt.Fprintf(&b, `<circle class="answer" data-kind="answer" cx="%.1f" cy="%.1f" r="5"><title>%s</title></circle>`, x(m.until), mid, esc(m.answerText))
			}
			fmt.Fprintf(&b, `<path class="send" d="M%.1f %.1f l9 6 l-9 6 z"></path>`, x(m.at)-4, mid-6)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`, x(m.at), ly, esc(clip(m.label, 28)))
		default:
			fill := ""
			if m.hollow {
				fill = ` class="hollow"`
			}
			fmt.Fprintf(&b, `<circle%s cx="%.1f" cy="%.1f" r="6"></circle>`, fill, x(m.at), mid)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`, x(m.at), ly, esc(clip(m.label, 28)))
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every text and attribute value above is escaped (esc) or a number
}

// marksOf is what picture draws, from the story alone.
func marksOf(r explain.Report) []mark {
	var ms []mark
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}
		}
		return t
	}
	for _, c := range r.Calls {
		t := at(c.Time)
		if t.IsZero() {
			continue
		}
		who := strings.Join(nonEmpty("session "+c.MCPSession, "client "+c.Client, "id "+c.JSONRPC), ", ")
		ms = append(ms, mark{lane: 0, at: t, kind: "call", label: c.Call, class: "call",
			title: fmt.Sprintf("%s at %s: %s (%s)", c.Call, c.Time, who, c.Transport)})
	}
	// States: a band from each record that changed the state to the next.
	var prev *mark
	for _, s := range r.Steps {
		t := at(s.Time)
		if t.IsZero() || s.State == "" || (prev != nil && prev.label == s.State) {
			continue
		}
		if prev != nil {
			prev.until = t
		}
		ms = append(ms, mark{lane: 1, at: t, kind: "state", label: s.State, class: "state " + s.State,
			title: fmt.Sprintf("%s from %s (journal #%d): %s", s.State, s.Time, s.Index, s.Reason)})
		prev = &ms[len(ms)-1]
	}
	for _, s := range r.Sends {
		t := at(s.Time)
		if t.IsZero() {
			continue
		}
		m := mark{lane: 2, at: t, kind: "send", label: fmt.Sprintf("%d %s", s.N, s.Kind), class: "send " + s.AnswerState,
			title: fmt.Sprintf("send %d (%s) at %s; answer: %s", s.N, s.Kind, s.Time, s.Answer)}
		if s.AnswerState != "" {
			m.until, m.answerText = at(s.AnswerTime), s.AnswerState+": "+s.Answer
			m.label += " → " + s.AnswerState
		}
		ms = append(ms, m)
	}
	for _, q := range r.Queries {
		t := at(q.Time)
		if t.IsZero() {
			continue
		}
		class, short := "unk", "not evidence"
		if q.Evidence {
			class, short = "ok", "evidence"
		}
		ms = append(ms, mark{lane: 3, at: t, kind: "query", label: short, class: class, hollow: !q.Evidence,
			title: fmt.Sprintf("%s at %s saw: %s. %s", q.Kind, q.Time, q.Saw, q.Verdict)})
	}
	for _, d := range r.Trail {
		t := at(d.Time)
		if t.IsZero() {
			continue
		}
		ms = append(ms, mark{lane: 4, at: t, kind: "approval", label: d.What, class: "approval",
			title: fmt.Sprintf("%s at %s: %s", d.What, d.Time, d.Reason)})
	}
	delivered, left := false, false
	for _, s := range r.Steps {
		switch {
		case !delivered && s.State == "delivered" && s.EntryKind == recordv1.EntryKind_ENTRY_KIND_TRANSITION:
			if t := at(s.Time); !t.IsZero() {
				delivered = true
				ms = append(ms, mark{lane: 5, at: t, kind: "delivery", label: "delivered", class: "ok",
					title: fmt.Sprintf("result delivered to the caller at %s (journal #%d)", s.Time, s.Index)})
			}
		case !left && s.EntryKind == lifecycle.CallerLeftKind:
			if t := at(s.Time); !t.IsZero() {
				left = true
				ms = append(ms, mark{lane: 5, at: t, kind: "delivery", label: "caller left", class: "unk", hollow: true,
					title: fmt.Sprintf("not delivered: the caller left before the answer, recorded at %s (journal #%d)", s.Time, s.Index)})
			}
		}
	}
	return ms
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if _, v, _ := strings.Cut(s, " "); v != "" {
			out = append(out, s)
		}
	}
	return out
}

// clip shortens s to n runes (with an ellipsis).
func clip(s string, n int) string {
	r := []rune(s)
	if n < 2 {
		return ""
	}
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func esc(s string) string { return html.EscapeString(s) }
