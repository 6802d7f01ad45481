package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/explain"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// maxEventsShown bounds each list of the notifications page.
const maxEventsShown = 100

// notificationsView is the notifications page: the events Latch sends to
// the operator's sinks and each sink's delivery, dead letters first. It
// reads and replays through the Admin API (the CLI's latch events).
type notificationsView struct {
	Sinks        []string
	Dead, Recent eventTable
	// Off says why there is nothing to show (no sink configured).
	Off  string
	Done string
}

type eventView struct {
	ID, Kind, Time, Execution, Session, Actor, Tool, Reason string
	Deliveries                                              []deliveryView
	Dead                                                    bool
}

type deliveryView struct{ Sink, State, Detail string }

// eventTable is one table of the page (its replay forms need the CSRF token).
type eventTable struct {
	ID, CSRF string
	Events   []*eventView
}

func eventViewOf(ev *recordv1.OutboxEvent) *eventView {
	v := &eventView{ID: ev.GetId(), Kind: events.KindName(ev.GetKind()), Time: explain.TS(ev.GetTime()), Execution: ev.GetExecutionId(),
		Session: ev.GetSessionId(), Actor: ev.GetActor(), Tool: ev.GetTool(), Reason: ev.GetReason()}
	for _, d := range ev.GetDeliveries() {
		state, detail := events.DescribeDelivery(d)
		v.Deliveries = append(v.Deliveries, deliveryView{Sink: d.GetSink(), State: state, Detail: detail})
		v.Dead = v.Dead || state == events.DeliveryDead
	}
	return v
}

func (c *Console) notificationsPage(w http.ResponseWriter, r *http.Request, s *session) {
	adm := controlplanev1.NewAdminClient(c.conn)
	ctx := asOperator(r.Context(), s)
	v := notificationsView{Dead: eventTable{ID: "dead", CSRF: s.csrf}, Recent: eventTable{ID: "recent", CSRF: s.csrf}}
	if n := r.URL.Query().Get("replayed"); n != "" {
		v.Done = "Queued again: " + n + " event(s), under the same IDs. Receivers that keep webhook-id act once."
	}
	recent, err := adm.ListEvents(ctx, &controlplanev1.ListEventsRequest{Limit: maxEventsShown})
	if code := status.Code(err); code == codes.FailedPrecondition || code == codes.Unimplemented {
		v.Off = "This control plane keeps no event outbox. Configure a sink with latch serve --event-sink (see docs/how-to/notifications.md)."
		c.render(w, r, http.StatusOK, "notifications", view{Title: "Notifications", Operator: s.operator, CSRF: s.csrf, Nav: "notifications", Page: v})
		return
	}
	if err != nil {
		c.refused(w, r, s, err, Prefix)
		return
	}
	dead, err := adm.ListEvents(ctx, &controlplanev1.ListEventsRequest{Dead: true, Limit: maxEventsShown})
	if err != nil {
		c.refused(w, r, s, err, Prefix)
		return
	}
	v.Sinks = recent.GetSinks()
	if len(v.Sinks) == 0 {
		v.Off = "No event sink is configured: nothing is sent. Add one with latch serve --event-sink (see docs/how-to/notifications.md)."
	}
	for _, ev := range dead.GetEvents() {
		v.Dead.Events = append(v.Dead.Events, eventViewOf(ev))
	}
	for _, ev := range recent.GetEvents() {
		v.Recent.Events = append(v.Recent.Events, eventViewOf(ev))
	}
	c.render(w, r, http.StatusOK, "notifications", view{Title: "Notifications", Operator: s.operator, CSRF: s.csrf, Nav: "notifications", Page: v})
}

// replayEvents queues the event named by the form's id again, or every
// dead-lettered one when id is empty. A replay re-sends a notification
// under its ID; it changes no execution, so it needs no confirmation page.
func (c *Console) replayEvents(w http.ResponseWriter, r *http.Request, s *session) {
	id := strings.TrimSpace(r.PostFormValue("id"))
	req := &controlplanev1.ReplayEventsRequest{}
	if id != "" {
		if !strings.HasPrefix(id, "evt_") || len(id) > 128 {
			c.fail(w, r, s, http.StatusBadRequest, "Not an event ID: "+id+" (event IDs start with evt_; the notifications page lists them). Nothing was queued.")
			return
		}
		req.Ids = []string{id}
	}
	resp, err := controlplanev1.NewAdminClient(c.conn).ReplayEvents(asOperator(r.Context(), s), req)
	if err != nil {
		c.refused(w, r, s, err, Prefix+"notifications")
		return
	}
	c.log.Info("console event replay", "operator", s.operator, "event_id", id, "requeued", resp.GetRequeued())
	http.Redirect(w, r, Prefix+"notifications?replayed="+url.QueryEscape(strconv.Itoa(int(resp.GetRequeued()))), http.StatusSeeOther)
}
