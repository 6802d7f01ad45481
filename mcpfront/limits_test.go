package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// connectErr opens a 2025-11-25 session as actor, or returns why not.
func (st *testStack) connectErr(t testing.TB, actor string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "latch-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: st.URL, DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: st.tokens[actor], base: http.DefaultTransport}}}
	cs, err := client.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: eraSession})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// rawPost posts one JSON-RPC message as actor and returns the answer's
// status and body.
func (st *testStack) rawPost(t testing.TB, actor string, header http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, st.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.tokens[actor])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// One actor holds at most SessionsPerActor sessions: the next initialize is
// refused with 429 and a message naming the cap and the flag; closing a
// session frees its slot; another actor is unaffected; the refusal is
// counted.
func TestSessionCapPerActor(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	st := newTestStack(t, stackOptions{Limits: Limits{SessionsPerActor: 3}, Metrics: m})
	var held []*mcp.ClientSession
	for i := range 3 {
		cs, err := st.connectErr(t, "alice")
		if err != nil {
			t.Fatalf("session %d of 3: %v", i+1, err)
		}
		held = append(held, cs)
	}
	// The go-sdk client treats 429 as transient and shows only the status
	// (streamable.go checkResponse); the body, read raw below, says more.
	if _, err := st.connectErr(t, "alice"); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("4th session: Connect error = %v, want Too Many Requests", err)
	}
	code, body := st.rawPost(t, "alice", nil, initializeBody)
	if code != http.StatusTooManyRequests {
		t.Errorf("4th initialize: HTTP %d, want 429; body %s", code, body)
	}
	var answer struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		t.Fatalf("refusal body %q is not JSON-RPC: %v", body, err)
	}
	if answer.Error.Code != CodeLimit || string(answer.ID) != "1" || !strings.Contains(answer.Error.Message, "cap is 3 per actor (--max-sessions-per-actor)") ||
		!strings.Contains(answer.Error.Message, "Close sessions you no longer use") {
		t.Errorf("refusal = id %s code %d %q, want id 1, code %d and what to do", answer.ID, answer.Error.Code, answer.Error.Message, CodeLimit)
	}
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("sessions", "actor")); got != 2 {
		t.Errorf("latch_mcp_limit_refusals_total{limit=sessions,reason=actor} = %v, want 2", got)
	}

	// Another actor is not held back by alice's sessions.
	if _, err := st.connectErr(t, "bob"); err != nil {
		t.Fatalf("bob's session: %v", err)
	}
	// A closed session (DELETE) frees its slot.
	if err := held[0].Close(); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "a slot to free after a session closed", func() bool {
		_, err := st.connectErr(t, "alice")
		return err == nil
	})
	if got := testutil.ToFloat64(m.sessions); got != 4 {
		t.Errorf("latch_mcp_sessions_open = %v, want 4 (3 of alice, 1 of bob)", got)
	}
	// A session the server closes (what the idle expiry does: the SDK's
	// timer calls ServerSession.Close) frees its slot too.
	for ss := range st.Front.server.Sessions() {
		if ss.ID() == held[1].ID() {
			_ = ss.Close()
		}
	}
	testbin.Eventually(t, "a slot to free after the server closed a session", func() bool {
		_, err := st.connectErr(t, "alice")
		return err == nil
	})
}

// The total cap holds across actors and answers 503.
func TestSessionCapTotal(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	st := newTestStack(t, stackOptions{Limits: Limits{Sessions: 2}, Metrics: m})
	for _, a := range []string{"alice", "bob"} {
		if _, err := st.connectErr(t, a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	code, body := st.rawPost(t, "bob", nil, initializeBody)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "cap is 2 in total (--max-sessions)") {
		t.Errorf("3rd initialize: HTTP %d %s, want 503 naming --max-sessions", code, body)
	}
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("sessions", "total")); got != 1 {
		t.Errorf("latch_mcp_limit_refusals_total{limit=sessions,reason=total} = %v, want 1", got)
	}
}

// Open SSE GET streams hold stream slots: with two per actor and two open,
// the actor's next request is refused until one closes; another actor is
// unaffected. (A cap of one would race the client's initialized
// notification with the end of its initialize POST.)
func TestStreamCapPerActor(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	st := newTestStack(t, stackOptions{Limits: Limits{StreamsPerActor: 2}, Metrics: m})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// A client's initialized notification can overlap the end of its
	// initialize POST: the sessions are made first, one at a time, and the
	// streams opened once nothing else is in flight.
	idle := func() {
		testbin.Eventually(t, "no stream in flight", func() bool { return st.Front.streams.open() == 0 })
	}
	var ids []string
	for range 2 {
		cs, err := st.connectErr(t, "alice")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cs.ID())
		idle()
	}
	var session http.Header
	for _, id := range ids {
		session = http.Header{"Mcp-Session-Id": {id}, "Mcp-Protocol-Version": {eraSession}}
		get, err := http.NewRequestWithContext(ctx, http.MethodGet, st.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		get.Header = session.Clone()
		get.Header.Set("Authorization", "Bearer "+st.tokens["alice"])
		get.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(get)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
		}
	}
	ping := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
	if code, body := st.rawPost(t, "alice", session, ping); code != http.StatusTooManyRequests || !strings.Contains(body, "cap is 2 per actor (--max-streams-per-actor)") {
		t.Errorf("ping with two streams open: HTTP %d %s, want 429 naming --max-streams-per-actor", code, body)
	}
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("streams", "actor")); got != 1 {
		t.Errorf("latch_mcp_limit_refusals_total{limit=streams,reason=actor} = %v, want 1", got)
	}
	if _, err := st.connectErr(t, "bob"); err != nil {
		t.Errorf("bob with alice's streams open: %v", err)
	}
	cancel()
	testbin.Eventually(t, "stream slots to free after the GETs closed", func() bool {
		code, _ := st.rawPost(t, "alice", session, ping)
		return code == http.StatusOK
	})
}

func TestLimitsValidate(t *testing.T) {
	if _, err := (Limits{StreamsPerActor: -1}).withDefaults(); err == nil {
		t.Error("withDefaults accepted a negative cap")
	}
	got, err := Limits{}.withDefaults()
	want := Limits{DefaultMaxSessionsPerActor, DefaultMaxSessions, DefaultMaxStreamsPerActor, DefaultMaxStreams}
	if err != nil || got != want {
		t.Errorf("Limits{}.withDefaults() = %+v, %v, want %+v", got, err, want)
	}
}
