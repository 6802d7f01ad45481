package mcpfront

import (
	"encoding/json"
	"strings"
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestResultTextSaysEachThingOnce: the text block's header and the stored
// summary do not repeat each other ("exit status 0): exit status 0").
func TestResultTextSaysEachThingOnce(t *testing.T) {
	zero, three := int32(0), int32(3)
	tests := []struct {
		name string
		v    *ResultView
		want string
	}{
		{"exit 0", &ResultView{ExitCode: &zero, Summary: "exit status 0", Body: "ok"}, "Command output (exit status 0):\nok"},
		{"exit 3", &ResultView{ExitCode: &three, Summary: "exit status 3"}, "Command output (exit status 3):\n(empty body)"},
		{"signal", &ResultView{Signal: "KILL", Summary: "killed by signal KILL"}, "Command output (killed by signal KILL):\n(empty body)"},
		{"status with a summary", &ResultView{Status: 201, Summary: "created", Body: json.RawMessage(`{"id":1}`)}, "Target answer (HTTP status 201): created\n{\"id\":1}"},
		{"marker", &ResultView{kind: recordv1.AnswerKind_ANSWER_KIND_MARKER, Summary: "script marker completed"}, "Script marker result: script marker completed\n(empty body)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resultText("NOTE", tt.v)
			if want := "NOTE\n\n" + tt.want; got != want {
				t.Errorf("resultText(%+v) = %q, want %q", tt.v, got, want)
			}
		})
	}
}

// TestOutputSchemaNodesAreTyped: every property node of the output schema
// carries a type (schema linters such as the Inspector's warn otherwise).
func TestOutputSchemaNodesAreTyped(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(callResultSchema, &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		if _, ok := node["type"]; !ok {
			t.Errorf("output schema node %s has no type", path)
		}
		props, _ := node["properties"].(map[string]any)
		for name, p := range props {
			walk(path+"."+name, p.(map[string]any))
		}
	}
	walk("$", schema)
	if !strings.Contains(string(callResultSchema), `"answer"`) {
		t.Errorf("output schema does not declare result.answer")
	}
}
