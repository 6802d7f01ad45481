package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/latchhq/latch/controlplane/journal"
)

// Bounds of the live-update stream.
const (
	// maxEventRecords is how many new journal records one event reads to
	// name the executions that moved; past it the event says "many".
	maxEventRecords = 1000
	// heartbeat keeps proxies from closing an idle stream and notices a
	// session that ended.
	heartbeat = 15 * time.Second
	// maxStream ends a stream after this long; EventSource reconnects.
	maxStream = 30 * time.Minute
)

// change is the data of one "journal" event.
type change struct {
	Size       int64    `json:"size"`
	Executions []string `json:"executions"`
	Many       bool     `json:"many,omitempty"`
}

// events is GET /ui/events: a server-sent event stream that says, each time
// the journal grew, which executions moved. The pages fetch their new
// state themselves (a page without JavaScript reloads by hand).
func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		c.fail(w, r, s, http.StatusInternalServerError, "This server cannot stream events; reload the page instead.")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	last := c.cfg.Store.JournalSize()
	fmt.Fprintf(w, "retry: 2000\nevent: hello\ndata: {\"size\":%d}\n\n", last)
	fl.Flush()
	tick := time.NewTicker(c.cfg.Poll)
	defer tick.Stop()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	end := time.NewTimer(maxStream)
	defer end.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.stopped:
			return
		case <-end.C:
			return
		case <-beat.C:
			if c.session(r) == nil {
				fmt.Fprint(w, "event: signedout\ndata: {}\n\n")
				fl.Flush()
				return
			}
			fmt.Fprint(w, ": heartbeat\n\n")
			fl.Flush()
		case <-tick.C:
			size := c.cfg.Store.JournalSize()
			if size <= last {
				continue
			}
			ch := c.changed(last, size)
			last = size
			b, _ := json.Marshal(ch)
			fmt.Fprintf(w, "event: journal\ndata: %s\n\n", b)
			fl.Flush()
		}
	}
}

// changed names the executions of journal records [from, to).
func (c *Console) changed(from, to int64) change {
	ch := change{Size: to, Executions: []string{}}
	if to-from > maxEventRecords {
		ch.Many = true
		return ch
	}
	seen := map[string]bool{}
	for i := from; i < to; i++ {
		data, err := c.cfg.Store.JournalEntry(i)
		if err != nil {
			ch.Many = true // unreadable here: let the page refresh all
			continue
		}
		e, err := journal.DecodeEntry(data)
		if err != nil || e.GetExecutionId() == "" || seen[e.GetExecutionId()] {
			continue
		}
		seen[e.GetExecutionId()] = true
		ch.Executions = append(ch.Executions, e.GetExecutionId())
	}
	return ch
}
