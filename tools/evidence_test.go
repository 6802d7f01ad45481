package tools

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReplayNeedsTheKey walks every replay class against every way an HTTP
// request can carry the execution ID: only read_only and review load when
// the target never receives it.
func TestReplayNeedsTheKey(t *testing.T) {
	carriers := []struct {
		name    string
		header  bool   // the target has idempotency_header
		request string // the tool's request
		want    []string
	}{
		{"idempotency header", true, `{method: POST, path: /v1/orders}`, []string{"idempotency_header Idempotency-Key"}},
		{"path", false, `{method: POST, path: "/v1/orders/{{execution_id}}"}`, []string{"request.path"}},
		{"query", false, `{method: POST, path: /v1/orders, query: {key: "k-{{execution_id}}"}}`, []string{"request.query.key"}},
		{"header template", false, `{method: POST, path: /v1/orders, headers: {X-Request-Key: "{{ execution_id }}"}}`, []string{"request.headers.X-Request-Key"}},
		{"body", false, `{method: POST, path: /v1/orders, body: {order: {sku: "{{sku}}", client_ref: "{{execution_id}}"}}}`, []string{"request.body"}},
		{"none", false, `{method: POST, path: /v1/orders, body: {sku: "{{sku}}"}}`, nil},
	}
	replays := []Replay{ReplayReadOnly, ReplayIdempotencyKey, ReplayStatusQuery, ReplayReview}
	for _, c := range carriers {
		for _, r := range replays {
			t.Run(c.name+"/"+string(r), func(t *testing.T) {
				header := ""
				if c.header {
					header = "\n    idempotency_header: Idempotency-Key"
				}
				src := fmt.Sprintf(`targets:
  orders:
    channel: http
    base_url: https://orders.example.test
    status: {path: "/v1/orders/by-key/{execution_id}"}%s
tools:
  place_order:
    input_schema: {type: object, required: [sku], properties: {sku: {type: string}}}
    target: orders
    request: %s
    replay: %s
`, header, c.request, r)
				cat, err := Parse("c.yaml", []byte(src))
				refused := len(c.want) == 0 && (r == ReplayIdempotencyKey || r == ReplayStatusQuery)
				if !refused {
					if err != nil {
						t.Fatalf("Parse = %v, want the catalog loaded", err)
					}
					tool := cat.Tools["place_order"]
					if diff := cmp.Diff(c.want, tool.KeyCarriers(cat.Targets["orders"])); diff != "" {
						t.Errorf("KeyCarriers (-want +got):\n%s", diff)
					}
					return
				}
				var le *LoadError
				if !errors.As(err, &le) || len(le.Problems) != 1 {
					t.Fatalf("Parse = %v, want one problem", err)
				}
				msg := le.Problems[0].String()
				for _, want := range []string{"c.yaml:11: ", "tool place_order: ", "replay " + string(r), "set idempotency_header on target orders", "{{execution_id}} in the request's path, query, a header or the body"} {
					if !strings.Contains(msg, want) {
						t.Errorf("problem %q does not say %q", msg, want)
					}
				}
			})
		}
	}
}

// TestRenderRequestAsCarriesTheID checks that {{execution_id}} renders the
// execution ID wherever it is written, escaped like any value.
func TestRenderRequestAsCarriesTheID(t *testing.T) {
	cat, err := Parse("c.yaml", []byte(`targets:
  orders: {channel: http, base_url: "https://orders.example.test", status: {path: "/s/{execution_id}"}}
tools:
  place_order:
    input_schema: {type: object, required: [sku], properties: {sku: {type: string}}}
    target: orders
    request:
      method: POST
      path: "/v1/orders/{{execution_id}}"
      query: {ref: "{{execution_id}}"}
      headers: {X-Key: "key {{execution_id}}"}
      body: {sku: "{{sku}}", ref: "{{execution_id}}"}
    replay: status_query
`))
	if err != nil {
		t.Fatal(err)
	}
	tool := cat.Tools["place_order"]
	// An argument called execution_id (a schema without
	// additionalProperties: false lets one through) never wins.
	args := map[string]any{"sku": "a/b", ExecutionIDVar: "act_spoofed"}
	_, path, query, headers, body, err := tool.RenderRequestAs("act_01/x", args)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{path, query["ref"], headers["X-Key"], string(body)}
	want := []string{"/v1/orders/act_01%2Fx", "act_01/x", "key act_01/x", `{"ref":"act_01/x","sku":"a/b"}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RenderRequestAs (-want +got):\n%s", diff)
	}
	if args[ExecutionIDVar] != "act_spoofed" {
		t.Error("RenderRequestAs modified the caller's arguments")
	}
	if _, _, _, _, _, err := tool.RenderRequest(map[string]any{"sku": "a"}); !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("RenderRequest without the ID = %v, want ErrInvalidArguments", err)
	}
}

func TestStatusClassify(t *testing.T) {
	custom := &StatusQuery{Absent: []int{404}, InProgress: []int{200, 423}}
	none := &StatusQuery{Absent: []int{}, InProgress: []int{}}
	tests := []struct {
		sq   *StatusQuery
		code int
		want StatusAnswer
	}{
		{&StatusQuery{}, 200, StatusCompleted},
		{&StatusQuery{}, 201, StatusCompleted},
		{&StatusQuery{}, 202, StatusInProgress},
		{&StatusQuery{}, 409, StatusInProgress},
		{&StatusQuery{}, 425, StatusInProgress},
		{&StatusQuery{}, 404, StatusAbsent},
		{&StatusQuery{}, 410, StatusAbsent},
		{&StatusQuery{}, 500, StatusNoEvidence},
		{&StatusQuery{}, 401, StatusNoEvidence},
		{&StatusQuery{}, 302, StatusNoEvidence},
		{custom, 200, StatusInProgress},
		{custom, 204, StatusCompleted},
		{custom, 410, StatusNoEvidence},
		{custom, 423, StatusInProgress},
		{none, 404, StatusNoEvidence},
		{none, 202, StatusCompleted},
	}
	for _, tt := range tests {
		if got := tt.sq.Classify(tt.code); got != tt.want {
			t.Errorf("StatusQuery%+v.Classify(%d) = %v, want %v", *tt.sq, tt.code, got, tt.want)
		}
	}
}
