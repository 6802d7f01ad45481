package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/events"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestSlackPayloadShape holds the Slack payload against Slack's documented
// incoming-webhook shape: a top-level "text" fallback string and a
// "blocks" array of section blocks (a "text" object) and context blocks
// (an "elements" array), every text object {"type":"mrkdwn","text":...},
// nothing else at the top level, and <, >, & escaped in user text.
func TestSlackPayloadShape(t *testing.T) {
	ev := &recordv1.OutboxEvent{Id: "evt_000000000000002a", Kind: recordv1.EventKind_EVENT_KIND_APPROVAL_REQUESTED, Time: timestamppb.Now(),
		ExecutionId: "act_01J", Actor: "alice", Tool: "deploy_release", Reason: "every_call <approval> & more"}
	raw, err := events.SlackPayload(ev, "https://latch.example/ui/")
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	for k := range top {
		if k != "text" && k != "blocks" {
			t.Errorf("top-level key %q: Slack's incoming webhook takes text and blocks", k)
		}
	}
	var text string
	if err := json.Unmarshal(top["text"], &text); err != nil || text == "" {
		t.Fatalf("text = %s: want a non-empty fallback string", top["text"])
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(top["blocks"], &blocks); err != nil || len(blocks) == 0 {
		t.Fatalf("blocks = %s: want an array of blocks", top["blocks"])
	}
	checkText := func(where string, raw json.RawMessage) string {
		var o map[string]string
		if err := json.Unmarshal(raw, &o); err != nil || o["type"] != "mrkdwn" || o["text"] == "" || len(o) != 2 {
			t.Errorf("%s = %s, want {\"type\":\"mrkdwn\",\"text\":...}", where, raw)
		}
		return o["text"]
	}
	var all string
	for i, b := range blocks {
		var typ string
		json.Unmarshal(b["type"], &typ)
		switch typ {
		case "section":
			all += checkText("section text", b["text"])
		case "context":
			var els []json.RawMessage
			if err := json.Unmarshal(b["elements"], &els); err != nil || len(els) == 0 || len(els) > 10 {
				t.Errorf("context block %d elements = %s, want 1-10 text objects", i, b["elements"])
			}
			for _, e := range els {
				all += checkText("context element", e)
			}
		default:
			t.Errorf("block %d has type %q, want section or context", i, typ)
		}
	}
	if strings.Contains(all, "<approval>") || !strings.Contains(all, "&lt;approval&gt; &amp; more") {
		t.Errorf("mrkdwn text does not escape the reason: %q", all)
	}
	if !strings.Contains(all, "<https://latch.example/ui/executions/act_01J|") {
		t.Errorf("mrkdwn text lacks the console deep link: %q", all)
	}
}

func TestPayloadCarriesDeepLinkAndEvidence(t *testing.T) {
	ev := &recordv1.OutboxEvent{Id: "evt_0000000000000007", Kind: recordv1.EventKind_EVENT_KIND_OUTCOME_RESOLVED, Time: timestamppb.Now(),
		ExecutionId: "act_9", Tool: "t", State: recordv1.State_STATE_COMPLETED, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED,
		ResolvedBy: "recovery", ResultRef: "sha256:ab", Reason: "status query found it", JournalIndex: 7}
	raw, err := events.Payload(ev, "https://latch.example/ui")
	if err != nil {
		t.Fatal(err)
	}
	var got events.Event
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := events.EventData{ExecutionID: "act_9", Tool: "t", State: "completed", Outcome: "succeeded", ResolvedBy: "recovery",
		ResultRef: "sha256:ab", Reason: "status query found it", JournalIndex: 7, ConsoleURL: "https://latch.example/ui/executions/act_9"}
	if got.ID != ev.Id || got.Type != "latch.outcome_resolved" || got.Data != want {
		t.Errorf("Payload = %+v, want id %s, type latch.outcome_resolved, data %+v", got, ev.Id, want)
	}
}

func TestParseSink(t *testing.T) {
	for _, tc := range []struct{ name, spec, want string }{
		{"ok", "ops url=https://hooks.example/latch secret=ops-webhook events=approval_requested,needs_review", ""},
		{"slack without secret", "chat url=https://hooks.slack.com/services/T/B/X format=slack", ""},
		{"json needs secret", "ops url=https://hooks.example/latch", "needs secret="},
		{"http off loopback", "ops url=http://hooks.example/latch secret=s", "must be https"},
		{"credentials in url", "ops url=https://u:p@hooks.example/ secret=s", "carries credentials"},
		{"unknown kind", "ops url=https://h.example/ secret=s events=approval", "unknown event kind"},
		{"unknown key", "ops url=https://h.example/ secret=s retries=3", "unknown key"},
		{"no name", "url=https://h.example/", "starts with the sink's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := events.ParseSink(tc.spec)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ParseSink(%q) = %v, want nil", tc.spec, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, events.ErrBadSink)):
				t.Errorf("ParseSink(%q) = %v, want ErrBadSink saying %q", tc.spec, err, tc.want)
			}
		})
	}
}
