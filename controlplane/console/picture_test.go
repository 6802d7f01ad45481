package console

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/explain"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestPictureDrawsTheStory: the picture has a mark for every call, state,
// send (with its answer), recovery query, approval and the delivery of the
// story, all on one time axis, as well-formed SVG with everything escaped.
func TestPictureDrawsTheStory(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ts := func(ms int) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	ev := &recordv1.Evidence{Transport: "streamable-http", ClientName: "<agent>", McpSessionId: "mcp-1", JsonrpcId: "7"}
	x := &recordv1.Execution{Id: "act_1", Target: "api", State: recordv1.State_STATE_DELIVERED, DispatchedAt: ts(100), LastSentAt: ts(900), Attempts: 2}
	hist := []*recordv1.JournalEntry{
		{Index: 1, Time: ts(0), To: recordv1.State_STATE_ACCEPTED, Kind: "transition", Execution: &recordv1.Execution{Evidence: ev}},
		{Index: 2, Time: ts(10), From: recordv1.State_STATE_ACCEPTED, To: recordv1.State_STATE_AWAITING_APPROVAL, Kind: "transition", Reason: "rule"},
		{Index: 3, Time: ts(50), From: recordv1.State_STATE_AWAITING_APPROVAL, To: recordv1.State_STATE_AUTHORIZED, Kind: "approval", Reason: "approved by ops: ok"},
		{Index: 4, Time: ts(100), From: recordv1.State_STATE_AUTHORIZED, To: recordv1.State_STATE_DISPATCHED, Kind: "transition"},
		{Index: 5, Time: ts(400), From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Kind: "transition", Reason: "EOF"},
		{Index: 6, Time: ts(500), Kind: "attach", From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Evidence: ev},
		{Index: 7, Time: ts(600), Kind: "recovery_query", From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Reason: "absent"},
		{Index: 8, Time: ts(900), Kind: "recovery_replay", From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_OUTCOME_UNKNOWN},
		{Index: 9, Time: ts(950), Kind: "recovery", From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_COMPLETED, Reason: "200",
			Execution: &recordv1.Execution{TargetStatus: 200, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED}},
		{Index: 10, Time: ts(1000), From: recordv1.State_STATE_COMPLETED, To: recordv1.State_STATE_DELIVERED, Kind: "transition"},
	}
	svg := string(picture(explain.Tell(x, hist, explain.Contract{})))
	kinds := map[string]int{}
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("picture is not well-formed SVG: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == "data-kind" {
					kinds[a.Value]++
				}
			}
		}
	}
	want := map[string]int{"call": 2, "state": 7, "send": 2, "answer": 2, "query": 2, "approval": 2, "delivery": 1}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("picture marks by kind (-want +got):\n%s", diff)
	}
	if strings.Contains(svg, "<agent>") || !strings.Contains(svg, "client &lt;agent&gt;") || !strings.Contains(svg, "session mcp-1") || !strings.Contains(svg, "id 7") {
		t.Errorf("picture does not name the calls' session, client and JSON-RPC id, escaped:\n%s", svg)
	}
	if strings.Contains(svg, "<script") || strings.Contains(svg, "style=") {
		t.Error("picture carries script or inline style (the console's CSP allows neither)")
	}
	if picture(explain.Report{}) != "" {
		t.Error("picture of an empty story is not empty")
	}
}

// TestPictureMarksTheCallerLeaving: a caller_left record is its own hollow
// mark on the delivery lane, next to the delivery to the retry.
func TestPictureMarksTheCallerLeaving(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ts := func(ms int) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	x := &recordv1.Execution{Id: "act_2", Target: "api", State: recordv1.State_STATE_DELIVERED, DispatchedAt: ts(10), Attempts: 1}
	hist := []*recordv1.JournalEntry{
		{Index: 1, Time: ts(0), To: recordv1.State_STATE_ACCEPTED, Kind: "transition"},
		{Index: 2, Time: ts(10), From: recordv1.State_STATE_ACCEPTED, To: recordv1.State_STATE_DISPATCHED, Kind: "transition"},
		{Index: 3, Time: ts(200), From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_DISPATCHED, Kind: "caller_left", Reason: "not delivered"},
		{Index: 4, Time: ts(300), From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_COMPLETED, Kind: "transition"},
		{Index: 5, Time: ts(400), From: recordv1.State_STATE_COMPLETED, To: recordv1.State_STATE_DELIVERED, Kind: "transition"},
	}
	svg := string(picture(explain.Tell(x, hist, explain.Contract{})))
	if n := strings.Count(svg, `data-kind="delivery"`); n != 2 || !strings.Contains(svg, "caller left") || !strings.Contains(svg, "the caller left before the answer") {
		t.Errorf("picture has %d delivery marks, want 2: the caller leaving (hollow, titled) and the delivery:\n%s", n, svg)
	}
}
