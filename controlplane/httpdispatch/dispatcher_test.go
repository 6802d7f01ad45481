package httpdispatch

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/testlog"
	"github.com/latchhq/latch/tools"
)

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"negative max body", Config{MaxBody: -1}},
		{"set-cookie in result headers", Config{ResultHeaders: []string{"Location", "set-cookie"}}},
		{"authorization in result headers", Config{ResultHeaders: []string{"Authorization"}}},
		{"bad header name", Config{ResultHeaders: []string{"bad header"}}},
		{"negative timeout", Config{DefaultTimeout: -1}},
		{"negative idle conns", Config{MaxIdleConnsPerHost: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d, err := New(tt.cfg); err == nil {
				d.Close()
				t.Fatalf("New(%s) = nil error, want one", tt.name)
			}
		})
	}
}

func TestSendStoresObservation(t *testing.T) {
	demo, srv := startDemo(t)
	d := newDispatcher(t, Config{})
	tg := demoTarget("http", srv.Listener.Addr().String())

	obs, err := d.Send(t.Context(), releaseCall(tg, "exec-01", "1.2.3"))
	if err != nil {
		t.Fatalf("Send = %v", err)
	}
	if obs.Status != http.StatusCreated || obs.Truncated {
		t.Fatalf("Send = status %d truncated %v, want 201, false", obs.Status, obs.Truncated)
	}
	wantHeaders := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "exec-01"}
	if diff := cmp.Diff(wantHeaders, obs.Headers); diff != "" {
		t.Errorf("Send headers (-want +got):\n%s", diff)
	}
	var body map[string]string
	if err := json.Unmarshal(obs.Body, &body); err != nil {
		t.Fatalf("Send body %q: %v", obs.Body, err)
	}
	want := map[string]string{"release_id": "rel-000001", "service": "api", "version": "1.2.3", "region": "eu-west-1", "status": "deployed"}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("Send body (-want +got):\n%s", diff)
	}
	if n := demo.Effects("release"); n != 1 {
		t.Errorf("Effects(release) = %d, want 1", n)
	}

	// The status endpoint returns the stored response.
	st, err := d.Status(t.Context(), Call{ExecutionID: "exec-01", Target: tg})
	if err != nil || st.Status != http.StatusOK || !bytes.Equal(st.Body, obs.Body) {
		t.Fatalf("Status = %+v, %v; want 200 with the stored body %s", st, err, obs.Body)
	}
	st, err = d.Status(t.Context(), Call{ExecutionID: "exec-never", Target: tg})
	if err != nil || st.Status != http.StatusNotFound {
		t.Fatalf("Status(unknown) = %+v, %v; want 404", st, err)
	}
}

func TestSendCapsBody(t *testing.T) {
	big := strings.Repeat("x", 1000)
	tests := []struct {
		name      string
		maxBody   int64
		wantLen   int
		truncated bool
	}{
		{"under the cap", 4096, 1000, false},
		{"exactly the cap", 1000, 1000, false},
		{"over the cap", 100, 100, true},
	}
	srv, _ := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(big))
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDispatcher(t, Config{MaxBody: tt.maxBody})
			tg := demoTarget("http", srv.Listener.Addr().String())
			obs, err := d.Send(t.Context(), Call{ExecutionID: "e", Target: tg, Method: "GET", Path: "/big"})
			if err != nil {
				t.Fatalf("Send = %v", err)
			}
			if len(obs.Body) != tt.wantLen || obs.Truncated != tt.truncated {
				t.Fatalf("Send body len %d truncated %v, want %d, %v", len(obs.Body), obs.Truncated, tt.wantLen, tt.truncated)
			}
		})
	}
}

func TestIdempotencyHeader(t *testing.T) {
	srv, seen := startRecorder(t, nil)
	d := newDispatcher(t, Config{})
	tg := demoTarget("http", srv.Listener.Addr().String())
	tg.IdempotencyHeader = "X-Request-Key"

	if _, err := d.Send(t.Context(), releaseCall(tg, "exec-key-1", "1")); err != nil {
		t.Fatalf("Send = %v", err)
	}
	if _, err := d.Status(t.Context(), Call{ExecutionID: "exec-key-1", Target: tg}); err != nil {
		t.Fatalf("Status = %v", err)
	}
	tg.IdempotencyHeader = ""
	if _, err := d.Send(t.Context(), releaseCall(tg, "exec-key-2", "1")); err != nil {
		t.Fatalf("Send = %v", err)
	}
	got := seen()
	if len(got) != 3 {
		t.Fatalf("server saw %d requests, want 3", len(got))
	}
	if v := got[0].header.Get("X-Request-Key"); v != "exec-key-1" {
		t.Errorf("Send header X-Request-Key = %q, want exec-key-1", v)
	}
	if got[1].uri != "/v1/releases/by-key/exec-key-1" || got[1].header.Get("X-Request-Key") != "" {
		t.Errorf("Status request = %s with key %q, want the status path and no key", got[1].uri, got[1].header.Get("X-Request-Key"))
	}
	if v := got[2].header.Get("X-Request-Key"); v != "" {
		t.Errorf("Send without idempotency header sent X-Request-Key = %q", v)
	}
	if ct := got[0].header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Send Content-Type = %q, want application/json", ct)
	}
}

func TestCredentials(t *testing.T) {
	const secret = "s3cr3t-t0ken-value"
	basic := base64.StdEncoding.EncodeToString([]byte("deployer:" + secret))
	tests := []struct {
		name       string
		cred       Credential
		header     string
		wantHeader string
	}{
		{"bearer", vault.Bearer{Token: secret}, "Authorization", "Bearer " + secret},
		{"basic", vault.Basic{Username: "deployer", Password: secret}, "Authorization", "Basic " + basic},
		{"header", vault.Header{Name: "x-api-key", Value: secret}, "X-Api-Key", secret},
	}
	// A careless target that echoes the credential everywhere.
	srv, seen := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []string{"Authorization", "X-Api-Key"} {
			if v := r.Header.Get(h); v != "" {
				w.Header().Set(h, v)
				w.Header().Set("X-Echo", v)
			}
		}
		w.Header().Set("Set-Cookie", "session="+secret)
		w.Header().Set("Location", "/done")
		fmt.Fprintf(w, `{"you_sent":%q,"also":%q}`, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"), secret)
	})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := testlog.New(t, hclog.Trace)
			d := newDispatcher(t, Config{
				Logger:        logs,
				ResultHeaders: []string{"Location", "X-Api-Key", "X-Echo", "Content-Type"},
			})
			tg := demoTarget("http", srv.Listener.Addr().String())
			cred := tt.cred
			obs, err := d.Send(t.Context(), Call{ExecutionID: "e", Target: tg, Method: "POST", Path: "/x", Body: []byte("{}"), Credential: cred})
			if err != nil {
				t.Fatalf("Send = %v", err)
			}
			if got := seen()[i].header.Get(tt.header); got != tt.wantHeader {
				t.Errorf("target saw %s = %q, want %q", tt.header, got, tt.wantHeader)
			}
			for _, h := range []string{"Authorization", "Set-Cookie", "X-Api-Key"} {
				if v, ok := obs.Headers[h]; ok {
					t.Errorf("observation kept header %s = %q", h, v)
				}
			}
			if obs.Headers["Location"] != "/done" {
				t.Errorf("observation Location = %q, want /done", obs.Headers["Location"])
			}
			dump := fmt.Sprintf("%v %+v %#v %s", obs.Headers, obs, cred, obs.Body)
			for _, s := range []string{secret, basic} {
				if strings.Contains(dump, s) {
					t.Errorf("observation or formatted credential contains the secret: %s", dump)
				}
				if strings.Contains(logs.Logged(), s) {
					t.Errorf("log contains the secret: %s", logs.Logged())
				}
			}
			if !strings.Contains(string(obs.Body), "[REDACTED]") {
				t.Errorf("body %s was not redacted", obs.Body)
			}
		})
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	srv, seen := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			http.Redirect(w, r, "/b", http.StatusTemporaryRedirect)
		}
	})
	d := newDispatcher(t, Config{})
	tg := demoTarget("http", srv.Listener.Addr().String())
	obs, err := d.Send(t.Context(), Call{ExecutionID: "e", Target: tg, Method: "POST", Path: "/a", Body: []byte("{}")})
	if err != nil {
		t.Fatalf("Send = %v", err)
	}
	if obs.Status != http.StatusTemporaryRedirect || obs.Headers["Location"] != "/b" {
		t.Fatalf("Send = %d Location %q, want 307 /b", obs.Status, obs.Headers["Location"])
	}
	if n := len(seen()); n != 1 {
		t.Fatalf("server saw %d requests, want 1 (redirect not followed)", n)
	}
}

func TestRequestShape(t *testing.T) {
	srv, seen := startRecorder(t, nil)
	d := newDispatcher(t, Config{})
	tg := demoTarget("http", srv.Listener.Addr().String())
	tg.BaseURL += "/api/"
	tests := []struct {
		name    string
		call    Call
		wantURI string
		wantTE  []string
		wantLen int64
	}{
		{"escaped path and query", Call{Method: "GET", Path: "/v1/svc/a%2Fb", Query: map[string]string{"q": "x y", "a": "1"}},
			"/api/v1/svc/a%2Fb?a=1&q=x+y", nil, 0},
		{"at sign stays in the path", Call{Method: "GET", Path: "/@evil.example/x"}, "/api/@evil.example/x", nil, 0},
		{"empty POST", Call{Method: "POST", Path: "/rotate"}, "/api/rotate", []string{"chunked"}, -1},
		{"POST with body", Call{Method: "POST", Path: "/p", Body: []byte(`{"a":1}`)}, "/api/p", nil, 7},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.call
			c.ExecutionID, c.Target = "e", tg
			if _, err := d.Send(t.Context(), c); err != nil {
				t.Fatalf("Send = %v", err)
			}
			got := seen()[i]
			if got.uri != tt.wantURI || !cmp.Equal(got.te, tt.wantTE) || got.length != tt.wantLen {
				t.Fatalf("server saw %s TE %v length %d, want %s TE %v length %d", got.uri, got.te, got.length, tt.wantURI, tt.wantTE, tt.wantLen)
			}
			if string(got.body) != string(c.Body) {
				t.Fatalf("server saw body %q, want %q", got.body, c.Body)
			}
		})
	}
}

func TestInvalidCalls(t *testing.T) {
	srv, seen := startRecorder(t, nil)
	d := newDispatcher(t, Config{})
	good := func() Call {
		return releaseCall(demoTarget("http", srv.Listener.Addr().String()), "e", "1")
	}
	tests := []struct {
		name string
		edit func(*Call)
	}{
		{"no target", func(c *Call) { c.Target = nil }},
		{"ssh target", func(c *Call) { c.Target.Channel = tools.ChannelSSH }},
		{"lower-case method", func(c *Call) { c.Method = "post" }},
		{"CONNECT", func(c *Call) { c.Method = "CONNECT" }},
		{"relative path", func(c *Call) { c.Path = "v1/releases" }},
		{"scheme-relative path", func(c *Call) { c.Path = "//evil.example/x" }},
		{"dot segment", func(c *Call) { c.Path = "/v1/../admin" }},
		{"encoded dot segment", func(c *Call) { c.Path = "/v1/%2E%2e/admin" }},
		{"query in path", func(c *Call) { c.Path = "/v1/releases?x=1" }},
		{"ftp base", func(c *Call) { c.Target.BaseURL = "ftp://127.0.0.1" }},
		{"user info in base", func(c *Call) { c.Target.BaseURL = "http://u:p@" + srv.Listener.Addr().String() }},
		{"host header", func(c *Call) { c.Headers = map[string]string{"Host": "evil.example"} }},
		{"transfer-encoding header", func(c *Call) { c.Headers = map[string]string{"transfer-encoding": "chunked"} }},
		{"template sets the key", func(c *Call) { c.Headers = map[string]string{"idempotency-key": "other"} }},
		{"header with newline", func(c *Call) { c.Headers = map[string]string{"X-A": "a\r\nX-B: b"} }},
		{"no execution ID", func(c *Call) { c.ExecutionID = "" }},
		{"credential kind that cannot present itself", func(c *Call) { c.Credential = unpresentable{} }},
		{"empty bearer", func(c *Call) { c.Credential = vault.Bearer{} }},
		{"credential header is Host", func(c *Call) { c.Credential = vault.Header{Name: "Host", Value: "x"} }},
		{"credential header is the idempotency header", func(c *Call) {
			c.Credential = vault.Header{Name: "Idempotency-Key", Value: "secret-value"}
		}},
		{"template overrides credential", func(c *Call) {
			c.Credential = vault.Bearer{Token: "tok"}
			c.Headers = map[string]string{"Authorization": "Bearer mine"}
		}},
	}
	// Every header the catalog loader refuses is refused here too, from the
	// one list (tools.ReservedHeaders), whatever its case.
	for _, h := range tools.ReservedHeaders() {
		tests = append(tests, struct {
			name string
			edit func(*Call)
		}{"reserved header " + h, func(c *Call) { c.Headers = map[string]string{strings.ToLower(h): "x"} }})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.edit(&c)
			obs, err := d.Send(t.Context(), c)
			if !errors.Is(err, ErrInvalidCall) || !errors.Is(err, ErrNotSent) {
				t.Fatalf("Send = %v, %v; want ErrInvalidCall and ErrNotSent", obs, err)
			}
		})
	}
	if n := len(seen()); n != 0 {
		t.Fatalf("server saw %d requests, want 0", n)
	}
	// The unedited call is valid, so each case above failed for its edit.
	if _, err := d.Send(t.Context(), good()); err != nil {
		t.Fatalf("Send(good) = %v", err)
	}
}

func TestStatusPath(t *testing.T) {
	srv, seen := startRecorder(t, nil)
	d := newDispatcher(t, Config{})
	tg := demoTarget("http", srv.Listener.Addr().String())
	tests := []struct {
		name    string
		call    Call
		wantReq string
	}{
		{"from the target, escaped", Call{ExecutionID: "exec/1 x", Target: tg}, "GET /v1/releases/by-key/exec%2F1%20x"},
		{"given by the caller", Call{ExecutionID: "e", Target: tg, Method: "HEAD", Path: "/v1/status/e"}, "HEAD /v1/status/e"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := d.Status(t.Context(), tt.call); err != nil {
				t.Fatalf("Status = %v", err)
			}
			got := seen()[i]
			if req := got.method + " " + got.uri; req != tt.wantReq {
				t.Fatalf("Status sent %q, want %q", req, tt.wantReq)
			}
		})
	}
	noStatus := *tg
	noStatus.Status = nil
	if _, err := d.Status(t.Context(), Call{Target: tg}); !errors.Is(err, ErrInvalidCall) {
		t.Fatalf("Status(no execution ID) = %v, want ErrInvalidCall", err)
	}
	if _, err := d.Status(t.Context(), Call{ExecutionID: "e", Target: &noStatus}); !errors.Is(err, ErrInvalidCall) {
		t.Fatalf("Status(no status endpoint) = %v, want ErrInvalidCall", err)
	}
}

func TestTrackerWritten(t *testing.T) {
	conn := &countingConn{}
	conn.writes.Store(5)
	tests := []struct {
		name string
		tk   func() *tracker
		want bool
	}{
		{"no connection yet", func() *tracker { return &tracker{} }, false},
		{"connection, nothing written", func() *tracker { return &tracker{gotConn: true, conn: conn, mark: 5} }, false},
		{"connection, a write since", func() *tracker { return &tracker{gotConn: true, conn: conn, mark: 4} }, true},
		{"write hook fired", func() *tracker {
			tk := &tracker{gotConn: true, conn: conn, mark: 5}
			tk.wrote.Store(true)
			return tk
		}, true},
		{"foreign connection", func() *tracker { return &tracker{gotConn: true} }, true},
	}
	for _, tt := range tests {
		if got := tt.tk().written(); got != tt.want {
			t.Errorf("%s: written() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
