package demotarget

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/testing/testbin"
	"github.com/latchhq/latch/internal/testing/testlog"
)

func start(tb testing.TB) (*Server, string) {
	tb.Helper()
	s := New(Config{Logger: testlog.New(tb, hclog.Trace)})
	srv := httptest.NewServer(s)
	tb.Cleanup(srv.Close)
	return s, srv.URL
}

type answer struct {
	status   int
	body     string
	replayed string
}

func do(tb testing.TB, method, url, key, body string) answer {
	tb.Helper()
	a, err := send(tb.Context(), method, url, key, body)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// send is do for goroutines other than the test's.
func send(ctx context.Context, method, url, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		req.Header.Set(DefaultKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: reading body: %w", method, url, err)
	}
	return answer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")}, nil
}

func TestIdempotencyKeySemantics(t *testing.T) {
	s, url := start(t)
	rel := `{"service":"api","version":"1.0","region":"eu"}`
	steps := []struct {
		name       string
		method     string
		path, key  string
		body       string
		wantStatus int
		wantBody   string // substring
		replayed   string
		effects    int
	}{
		{"missing key", "POST", "/v1/releases", "", rel, 400, "missing Idempotency-Key", "", 0},
		{"invalid payload stores nothing", "POST", "/v1/releases", "k1", `{"service":"api"}`, 400, "required", "", 0},
		{"first", "POST", "/v1/releases", "k1", rel, 201, `"release_id":"rel-000001"`, "", 1},
		{"same key same payload, other spelling", "POST", "/v1/releases", "k1",
			`{ "region":"eu", "version":"1.0", "service":"api" }`, 201, `"release_id":"rel-000001"`, "true", 1},
		{"same key other payload", "POST", "/v1/releases", "k1", `{"service":"api","version":"2.0","region":"eu"}`, 422, "different payload", "", 1},
		{"new key", "POST", "/v1/releases", "k2", `{"service":"api","version":"2.0","region":"eu"}`, 201, `"release_id":"rel-000002"`, "", 2},
		{"current release", "GET", "/v1/releases/api", "", "", 200, `"version":"2.0"`, "", 2},
		{"no release", "GET", "/v1/releases/web", "", "", 404, "no release", "", 2},
		{"status of k1", "GET", "/v1/releases/by-key/k1", "", "", 200, `"release_id":"rel-000001"`, "", 2},
		{"status of unknown key", "GET", "/v1/releases/by-key/nope", "", "", 404, "no request", "", 2},
		{"ticket", "POST", "/v1/tickets", "k1", `{"title":"disk full"}`, 201, `"ticket_id":"tkt-000001"`, "", 3},
		{"ticket status", "GET", "/v1/tickets/by-key/k1", "", "", 200, `"title":"disk full"`, "", 3},
		{"rotate", "POST", "/v1/credentials/rotate", "r1", `{"name":"db"}`, 200, `"version":1`, "", 4},
		{"rotate replay", "POST", "/v1/credentials/rotate", "r1", `{"name":"db"}`, 200, `"version":1`, "true", 4},
		{"rotate again", "POST", "/v1/credentials/rotate", "r2", `{"name":"db"}`, 200, `"version":2`, "", 5},
		{"rotation status", "GET", "/v1/credentials/by-key/r2", "", "", 200, `"version":2`, "", 5},
		{"not JSON", "POST", "/v1/tickets", "k9", `title=x`, 400, "not a JSON object", "", 5},
	}
	for _, st := range steps {
		got := do(t, st.method, url+st.path, st.key, st.body)
		if got.status != st.wantStatus || !strings.Contains(got.body, st.wantBody) || got.replayed != st.replayed {
			t.Fatalf("%s: %s %s = %d %s (replayed %q), want %d containing %s (replayed %q)",
				st.name, st.method, st.path, got.status, got.body, got.replayed, st.wantStatus, st.wantBody, st.replayed)
		}
		if n := s.Total(); n != st.effects {
			t.Fatalf("%s: Total() = %d, want %d", st.name, n, st.effects)
		}
	}
	if r, tk, rot := s.Effects(KindRelease), s.Effects(KindTicket), s.Effects(KindRotation); r != 2 || tk != 1 || rot != 2 {
		t.Fatalf("Effects = release %d, ticket %d, rotation %d; want 2, 1, 2", r, tk, rot)
	}
	if n := s.Requests(); n != len(steps) {
		t.Fatalf("Requests() = %d, want %d", n, len(steps))
	}
}

func TestInFlightConflict(t *testing.T) {
	s, url := start(t)
	s.Hold()
	rel := `{"service":"api","version":"1.0","region":"eu"}`
	type result struct {
		a   answer
		err error
	}
	first := make(chan result, 1)
	go func() {
		a, err := send(t.Context(), "POST", url+"/v1/releases", "k", rel)
		first <- result{a, err}
	}()
	testbin.Eventually(t, "the first request in flight", func() bool { return s.InFlight() == 1 })
	if n := s.Effects(KindRelease); n != 1 {
		t.Fatalf("Effects during the delay = %d, want 1 (effect before the delay)", n)
	}
	if got := do(t, "POST", url+"/v1/releases", "k", rel); got.status != http.StatusConflict {
		t.Fatalf("same key in flight = %d %s, want 409", got.status, got.body)
	}
	if got := do(t, "GET", url+"/v1/releases/by-key/k", "", ""); got.status != http.StatusConflict {
		t.Fatalf("status in flight = %d %s, want 409", got.status, got.body)
	}
	s.Release() // ends the hold in progress
	if got := <-first; got.err != nil || got.a.status != http.StatusCreated {
		t.Fatalf("first = %+v, want 201", got)
	}
	if got := do(t, "POST", url+"/v1/releases", "k", rel); got.status != http.StatusCreated || got.replayed != "true" {
		t.Fatalf("after = %d %s replayed %q, want stored 201", got.status, got.body, got.replayed)
	}
	if n := s.Total(); n != 1 {
		t.Fatalf("Total() = %d, want 1", n)
	}
}

func TestFailNext(t *testing.T) {
	s, url := start(t)
	rel := `{"service":"api","version":"1.0","region":"eu"}`
	s.SetFailNext(http.StatusServiceUnavailable)
	if got := do(t, "POST", url+"/v1/releases", "k", rel); got.status != http.StatusServiceUnavailable {
		t.Fatalf("failed request = %d, want 503", got.status)
	}
	if n := s.Total(); n != 0 {
		t.Fatalf("Total() after failure = %d, want 0", n)
	}
	// The failure stored nothing: the same key now performs the effect.
	if got := do(t, "POST", url+"/v1/releases", "k", rel); got.status != http.StatusCreated || got.replayed != "" {
		t.Fatalf("retry = %d replayed %q, want a fresh 201", got.status, got.replayed)
	}
	if n := s.Total(); n != 1 {
		t.Fatalf("Total() = %d, want 1", n)
	}
}

func TestCustomKeyHeader(t *testing.T) {
	s := New(Config{KeyHeader: "X-Request-Key"})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/tickets", strings.NewReader(`{"title":"t"}`))
	req.Header.Set("X-Request-Key", "a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Request-Key") != "a" {
		t.Fatalf("POST with X-Request-Key = %d key %q, want 201 echoing a", resp.StatusCode, resp.Header.Get("X-Request-Key"))
	}
}
