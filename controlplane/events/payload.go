package events

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Event is the JSON body a json sink receives (the Standard Webhooks
// shape: type, timestamp, data).
type Event struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp string    `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is what the event is about.
type EventData struct {
	ExecutionID  string `json:"execution_id,omitempty"`
	SessionID    string `json:"session_id,omitempty"`
	Actor        string `json:"actor,omitempty"`
	Tool         string `json:"tool,omitempty"`
	State        string `json:"state,omitempty"`
	Outcome      string `json:"outcome,omitempty"`
	TargetStatus int32  `json:"target_status,omitempty"`
	Reason       string `json:"reason,omitempty"`
	ResolvedBy   string `json:"resolved_by,omitempty"`
	ResultRef    string `json:"result_ref,omitempty"`
	JournalIndex uint64 `json:"journal_index"`
	// ConsoleURL opens the execution (or the sessions page) in the console.
	ConsoleURL string `json:"console_url,omitempty"`
}

// DeepLink is the console page of ev under console (the console's base
// URL, "https://latch.example.com/ui/"; "" for none).
func DeepLink(console string, ev *recordv1.OutboxEvent) string {
	if console == "" {
		return ""
	}
	base := strings.TrimSuffix(console, "/")
	if ev.GetExecutionId() != "" {
		return base + "/executions/" + url.PathEscape(ev.GetExecutionId())
	}
	return base + "/sessions"
}

// Payload is ev's JSON body.
func Payload(ev *recordv1.OutboxEvent, console string) ([]byte, error) {
	out := Event{ID: ev.GetId(), Type: "latch." + KindName(ev.GetKind()), Timestamp: ev.GetTime().AsTime().UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		Data: EventData{ExecutionID: ev.GetExecutionId(), SessionID: ev.GetSessionId(), Actor: ev.GetActor(), Tool: ev.GetTool(),
			TargetStatus: ev.GetTargetStatus(), Reason: ev.GetReason(), ResolvedBy: ev.GetResolvedBy(), ResultRef: ev.GetResultRef(),
			JournalIndex: ev.GetJournalIndex(), ConsoleURL: DeepLink(console, ev)}}
	if ev.GetExecutionId() != "" {
		out.Data.State = lifecycle.Name(ev.GetState())
		if ev.GetOutcome() != recordv1.Outcome_OUTCOME_UNSPECIFIED {
			out.Data.Outcome = strings.ToLower(strings.TrimPrefix(ev.GetOutcome().String(), "OUTCOME_"))
		}
	}
	return json.Marshal(out)
}

// Slack is a Slack incoming-webhook message: text is the notification's
// fallback, blocks the message (section and context blocks of mrkdwn text).
type Slack struct {
	Text   string       `json:"text"`
	Blocks []SlackBlock `json:"blocks"`
}

// SlackBlock is a section (Text) or a context (Elements) block.
type SlackBlock struct {
	Type     string      `json:"type"`
	Text     *SlackText  `json:"text,omitempty"`
	Elements []SlackText `json:"elements,omitempty"`
}

// SlackText is a text object.
type SlackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// headline is one line saying what happened, for people.
func headline(ev *recordv1.OutboxEvent) string {
	x := ev.GetExecutionId()
	switch ev.GetKind() {
	case recordv1.EventKind_EVENT_KIND_APPROVAL_REQUESTED:
		return fmt.Sprintf("Approval requested: %s by %s (%s)", ev.GetTool(), ev.GetActor(), x)
	case recordv1.EventKind_EVENT_KIND_SESSION_AWAITING_AUTHORIZATION:
		return fmt.Sprintf("Agent session of %s awaits authorization (%s)", ev.GetActor(), ev.GetSessionId())
	case recordv1.EventKind_EVENT_KIND_OUTCOME_UNKNOWN:
		return fmt.Sprintf("Outcome still unknown: %s by %s (%s)", ev.GetTool(), ev.GetActor(), x)
	case recordv1.EventKind_EVENT_KIND_NEEDS_REVIEW:
		return fmt.Sprintf("Needs review: %s by %s (%s)", ev.GetTool(), ev.GetActor(), x)
	case recordv1.EventKind_EVENT_KIND_OUTCOME_RESOLVED:
		return fmt.Sprintf("Outcome resolved: %s by %s is %s (%s)", ev.GetTool(), ev.GetActor(), lifecycle.Name(ev.GetState()), x)
	case recordv1.EventKind_EVENT_KIND_COMPLETED:
		return fmt.Sprintf("Completed: %s by %s (%s)", ev.GetTool(), ev.GetActor(), x)
	}
	return "Latch event " + ev.GetId()
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// SlackPayload is ev as a Slack incoming-webhook message.
func SlackPayload(ev *recordv1.OutboxEvent, console string) ([]byte, error) {
	head := headline(ev)
	text := "*" + slackEscape.Replace(head) + "*"
	if r := ev.GetReason(); r != "" {
		text += "\n" + slackEscape.Replace(r)
	}
	if link := DeepLink(console, ev); link != "" {
		text += "\n<" + link + "|Open in the Latch console>"
	}
	ctx := "event " + ev.GetId() + " · " + KindName(ev.GetKind())
	if ev.GetResolvedBy() != "" {
		ctx += " · resolved by " + ev.GetResolvedBy()
	}
	msg := Slack{Text: head, Blocks: []SlackBlock{
		{Type: "section", Text: &SlackText{Type: "mrkdwn", Text: text}},
		{Type: "context", Elements: []SlackText{{Type: "mrkdwn", Text: slackEscape.Replace(ctx)}}},
	}}
	return json.Marshal(msg)
}
