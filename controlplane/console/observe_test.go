package console

import (
	"context"
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/engine"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const observeCatalog = `
targets:
  api: {channel: http, base_url: "http://127.0.0.1:9", allow_private: true, idempotency_header: Idempotency-Key, mode: observe}
tools:
  note:
    description: Note.
    input_schema: {type: object, required: [text], properties: {text: {type: string}}}
    target: api
    request: {method: POST, path: /notes, body: {text: "{{text}}"}}
    replay: idempotency_key
  undecided:
    description: Not decided yet.
    input_schema: {type: object, required: [text], properties: {text: {type: string}}}
    target: api
    request: {method: POST, path: /undecided, body: {text: "{{text}}"}}
`

// answeringChannel answers every dispatch (201).
type answeringChannel struct{ refusingChannel }

func (answeringChannel) Dispatch(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Result: &recordv1.Result{Status: 201}, Reason: "201"}
}

// TestObservePage: the observe page shows the report's counts per tool and
// links both executions of each would-attach pair; a bad since is a clear
// error.
func TestObservePage(t *testing.T) {
	st := newStackWith(t, false, observeCatalog, answeringChannel{})
	first := st.submit(t, "note", `{"text":"<b>hi</b>"}`)
	second := st.submit(t, "note", `{"text":"<b>hi</b>"}`)
	if first.GetId() == second.GetId() || second.GetObservation().GetPriorExecutionId() != first.GetId() {
		t.Fatalf("second call = %s, observation %v; want a new execution observed as a duplicate of %s", second.GetId(), second.GetObservation(), first.GetId())
	}
	c := browserless(t)
	st.signIn(t, c, "ops-bob")
	resp, body := get(t, c, st.web.URL+"/ui/observe")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /ui/observe = %d:\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`href="/ui/executions/` + first.GetId() + `"`, `href="/ui/executions/` + second.GetId() + `"`,
		`id="tool-note"`, "ready: set mode: enforce", "reached the target twice",
		`id="tool-undecided"`, "needs a contract decision: replay",
		`aria-current="page">Observe`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /ui/observe lacks %q:\n%s", want, body)
		}
	}
	if resp, body := get(t, c, st.web.URL+"/ui/observe?since=yesterday"); resp.StatusCode != 400 || !strings.Contains(body, "not a positive duration") {
		t.Errorf("GET /ui/observe?since=yesterday = %d, want 400 saying what since takes:\n%s", resp.StatusCode, body)
	}
	anon := browserless(t)
	if resp, _ := get(t, anon, st.web.URL+"/ui/observe"); resp.StatusCode != 303 {
		t.Errorf("GET /ui/observe without a session = %d, want 303 to the sign-in page", resp.StatusCode)
	}
}
