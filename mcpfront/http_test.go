package mcpfront

import (
	"bytes"
	"context"
	"slices"
	"testing"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func TestJSONRPCID(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"number id", `{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, `7`},
		{"string id", `{"jsonrpc":"2.0","id":"a-1","method":"tools/call"}`, `"a-1"`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled"}`, ``},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{}}`, ``},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, ``},
		{"garbage", `{"id":`, ``},
	}
	for _, tt := range tests {
		if got := jsonrpcID([]byte(tt.body)); got != tt.want {
			t.Errorf("jsonrpcID(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestAppendMarkers(t *testing.T) {
	event := []byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":2,"result":{"_meta":{"latch/delivery":"act_A"},"content":[]}}` + "\n\n")
	two := append(bytes.Clone(event), []byte(`data: {"_meta":{"latch/delivery":"act_B"}}`)...)
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{"one", event, []string{"act_A"}},
		{"two", two, []string{"act_A", "act_B"}},
		{"none", []byte(`data: {"result":{"content":[]}}`), nil},
		{"unterminated", []byte(`"latch/delivery":"act_`), nil},
	}
	for _, tt := range tests {
		if got := appendMarkers(nil, tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("appendMarkers(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func FuzzRequestParsing(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`))
	f.Add([]byte(`"latch/delivery":"act_X" "latch/delivery":"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = jsonrpcID(b)
		for _, id := range appendMarkers(nil, b) {
			if bytes.IndexByte([]byte(id), '"') >= 0 {
				t.Fatalf("appendMarkers returned %q containing a quote", id)
			}
		}
	})
}

// A target's JSON body, embedded raw in the result, that imitates a delivery
// marker marks nothing: only ids the front registered are taken.
func TestForgedDeliveryMarkerIgnored(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	// A completed execution the caller never received: the forged marker
	// names it.
	victim, err := st.CP.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "bob", Tool: "deploy_release", Arguments: []byte(`{"service":"a","version":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	st.waitState(t, victim.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	// The effect server echoes the request body {"latch/delivery": job},
	// so the result carries a forged marker.
	_, cr := call(t, cs, "failing_job", map[string]any{"job": victim.GetExecution().GetId()})
	st.waitState(t, cr.ExecutionID, recordv1.State_STATE_DELIVERED)
	_ = st.Front.Close() // every delivery record started has finished
	if got := st.get(t, victim.GetExecution().GetId()).GetState(); got != recordv1.State_STATE_COMPLETED {
		t.Errorf("the execution named by the forged marker is %v, want still completed (not delivered)", got)
	}
}
