package opshttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNewRefusesPublicAddressWithoutTLS(t *testing.T) {
	for _, tt := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:0", true},
		{"localhost:7410", true},
		{"[::1]:7410", true},
		{"0.0.0.0:7410", false},
		{":7410", false},
		{"10.0.0.5:7410", false},
	} {
		_, err := New(Config{Addr: tt.addr, Gatherer: NewRegistry()})
		if (err == nil) != tt.ok || (!tt.ok && !errors.Is(err, ErrNotLoopback)) {
			t.Errorf("New(Addr %q) = %v, want ok %v (else ErrNotLoopback)", tt.addr, err, tt.ok)
		}
	}
	if _, err := New(Config{Addr: "0.0.0.0:7410", Gatherer: NewRegistry(), TLSCert: "c.pem"}); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("New with a certificate and no key = %v, want an error saying they go together", err)
	}
}

func TestPaths(t *testing.T) {
	broken := errors.New("the widget is unplugged: plug it in")
	ready := true
	s, err := New(Config{Addr: "127.0.0.1:0", Gatherer: NewRegistry(), Checks: []Check{
		{Name: "always", Ready: func(context.Context) error { return nil }},
		{Name: "widget", Ready: func(context.Context) error {
			if ready {
				return nil
			}
			return broken
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "latch_build_info{") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("GET /metrics = %d, want 200 with latch_build_info and the Go collector:\n%s", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusOK || !strings.Contains(body, `"ready":true`) {
		t.Errorf("GET /readyz = %d %s, want 200 ready", code, body)
	}
	ready = false
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `{"name":"widget","ready":false,"error":"the widget is unplugged: plug it in"}`) || !strings.Contains(body, `{"name":"always","ready":true}`) {
		t.Errorf("GET /readyz with a failing check = %d %s, want 503 naming it and why", code, body)
	}
	if code, _ := get("/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404", code)
	}
}

func TestServeBindsAndStops(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Gatherer: NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	resp, err := http.Get(s.URL() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/healthz = %v %v", s.URL(), resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
}

func TestStatusOnHealthAndReady(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Gatherer: NewRegistry(), Status: func() map[string]string {
		return map[string]string{"role": "standby", "epoch": "4", "holder": "a/01"}
	}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Body.String()
	}
	if got, want := get("/healthz"), "ok\nepoch: 4\nholder: a/01\nrole: standby\n"; got != want {
		t.Errorf("GET /healthz = %q, want %q", got, want)
	}
	if got := get("/readyz"); !strings.Contains(got, `"status":{"epoch":"4","holder":"a/01","role":"standby"}`) {
		t.Errorf("GET /readyz = %s, want the status object", got)
	}
}
