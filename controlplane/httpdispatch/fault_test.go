package httpdispatch

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/internal/testing/faultproxy"
	"github.com/latchhq/latch/internal/testing/testlog"
	"github.com/latchhq/latch/tools"
)

// faultEnv is a demo target behind a fault proxy.
type faultEnv struct {
	demo   *demotarget.Server
	proxy  *faultproxy.Proxy
	d      *Dispatcher
	target *tools.Target
}

func newFaultEnv(tb testing.TB) *faultEnv {
	tb.Helper()
	demo, srv := startDemo(tb)
	p, err := faultproxy.Start(srv.Listener.Addr().String())
	if err != nil {
		tb.Fatalf("faultproxy.Start: %v", err)
	}
	tb.Cleanup(func() { p.Close() })
	return &faultEnv{demo: demo, proxy: p, d: newDispatcher(tb, Config{}), target: demoTarget("http", p.Addr())}
}

func (e *faultEnv) setMode(tb testing.TB, m faultproxy.Mode) {
	tb.Helper()
	if err := e.proxy.SetMode(m); err != nil {
		tb.Fatalf("SetMode(%v): %v", m, err)
	}
}

func wantClass(tb testing.TB, what string, err, class error) {
	tb.Helper()
	other := ErrNotSent
	if class == ErrNotSent {
		other = ErrOutcomeUnknown
	}
	if !errors.Is(err, class) || errors.Is(err, other) {
		tb.Fatalf("%s = %v, want %v only", what, err, class)
	}
}

func TestCutAfterWriteIsUnknown(t *testing.T) {
	e := newFaultEnv(t)
	e.setMode(t, faultproxy.Cut(0))
	_, err := e.d.Send(t.Context(), releaseCall(e.target, "exec-cut", "1"))
	wantClass(t, "Send through a cut", err, ErrOutcomeUnknown)
	if n := e.demo.Effects(demotarget.KindRelease); n != 1 {
		t.Fatalf("Effects = %d, want 1 (the target acted before the cut)", n)
	}

	// Recovery: the status endpoint tells what happened.
	e.setMode(t, faultproxy.Pass)
	st, err := e.d.Status(t.Context(), Call{ExecutionID: "exec-cut", Target: e.target})
	if err != nil || st.Status != http.StatusOK || !strings.Contains(string(st.Body), `"status":"deployed"`) {
		t.Fatalf("Status = %+v, %v; want 200 deployed", st, err)
	}
}

func TestCutMidRequestIsUnknownWithoutEffect(t *testing.T) {
	e := newFaultEnv(t)
	e.setMode(t, faultproxy.Cut(10)) // the request line is not even complete
	_, err := e.d.Send(t.Context(), releaseCall(e.target, "exec-partial", "1"))
	wantClass(t, "Send cut after 10 bytes", err, ErrOutcomeUnknown)
	if n := e.demo.Total(); n != 0 {
		t.Fatalf("Total = %d, want 0", n)
	}
}

func TestRefusedConnectionIsNotSent(t *testing.T) {
	e := newFaultEnv(t)
	e.setMode(t, faultproxy.Refuse)
	_, err := e.d.Send(t.Context(), releaseCall(e.target, "exec-refused", "1"))
	wantClass(t, "Send to a refusing proxy", err, ErrNotSent)
	if errors.Is(err, ErrRefused) {
		t.Errorf("Send = %v; a connection refusal is not a policy refusal", err)
	}
	if n, r := e.demo.Total(), e.demo.Requests(); n != 0 || r != 0 {
		t.Fatalf("Total, Requests = %d, %d; want 0, 0", n, r)
	}
	// Not sent means safe to dispatch again: it goes through once the
	// proxy passes traffic.
	e.setMode(t, faultproxy.Pass)
	obs, err := e.d.Send(t.Context(), releaseCall(e.target, "exec-refused", "1"))
	if err != nil || obs.Status != http.StatusCreated {
		t.Fatalf("Send again = %+v, %v; want 201", obs, err)
	}
}

func TestTimeoutAfterEffectThenSameKeyReplay(t *testing.T) {
	e := newFaultEnv(t)
	e.demo.SetDelay(time.Minute)
	c := releaseCall(e.target, "exec-slow", "2")
	c.Timeout = 300 * time.Millisecond
	_, err := e.d.Send(t.Context(), c)
	wantClass(t, "Send past the timeout", err, ErrOutcomeUnknown)
	if n := e.demo.Effects(demotarget.KindRelease); n != 1 {
		t.Fatalf("Effects = %d, want 1", n)
	}

	e.demo.SetDelay(0)
	waitFor(t, "the slow request to finish", func() bool { return e.demo.InFlight() == 0 })
	c.Timeout = 0
	obs, err := e.d.Send(t.Context(), c)
	if err != nil || obs.Status != http.StatusCreated || obs.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("replay = %+v, %v; want the stored 201, replayed", obs, err)
	}
	if !strings.Contains(string(obs.Body), `"release_id":"rel-000001"`) {
		t.Errorf("replay body = %s, want the first release", obs.Body)
	}
	if n := e.demo.Effects(demotarget.KindRelease); n != 1 {
		t.Fatalf("Effects after replay = %d, want 1", n)
	}
}

func TestSameKeyDifferentPayload(t *testing.T) {
	e := newFaultEnv(t)
	if obs, err := e.d.Send(t.Context(), releaseCall(e.target, "exec-k", "1")); err != nil || obs.Status != http.StatusCreated {
		t.Fatalf("Send = %+v, %v; want 201", obs, err)
	}
	obs, err := e.d.Send(t.Context(), releaseCall(e.target, "exec-k", "2"))
	if err != nil || obs.Status != http.StatusUnprocessableEntity {
		t.Fatalf("Send(other payload) = %+v, %v; want 422", obs, err)
	}
	if n := e.demo.Total(); n != 1 {
		t.Fatalf("Total = %d, want 1", n)
	}
}

func TestSameKeyInFlight(t *testing.T) {
	e := newFaultEnv(t)
	e.demo.SetDelay(time.Minute)
	type result struct {
		obs *Observation
		err error
	}
	first := make(chan result, 1)
	go func() {
		obs, err := e.d.Send(t.Context(), releaseCall(e.target, "exec-busy", "1"))
		first <- result{obs, err}
	}()
	waitFor(t, "the first request to be in flight", func() bool { return e.demo.InFlight() == 1 })
	obs, err := e.d.Send(t.Context(), releaseCall(e.target, "exec-busy", "1"))
	if err != nil || obs.Status != http.StatusConflict {
		t.Fatalf("Send while in flight = %+v, %v; want 409", obs, err)
	}
	e.demo.SetDelay(0)
	r := <-first
	if r.err != nil || r.obs.Status != http.StatusCreated {
		t.Fatalf("first Send = %+v, %v; want 201", r.obs, r.err)
	}
	if n := e.demo.Total(); n != 1 {
		t.Fatalf("Total = %d, want 1", n)
	}
}

// TestNoTransportRetryOfWrittenRequest cuts a kept-alive connection after
// the request was written. net/http would re-send a replayable request here
// (see TestFixtureSeesTransportRetry); the dispatcher must not.
func TestNoTransportRetryOfWrittenRequest(t *testing.T) {
	for _, method := range []string{"POST", "GET"} {
		t.Run(method, func(t *testing.T) {
			e := newFaultEnv(t)
			warm := releaseCall(e.target, "exec-warm", "1")
			if _, err := e.d.Send(t.Context(), warm); err != nil {
				t.Fatalf("Send(warm) = %v", err)
			}
			e.setMode(t, faultproxy.Cut(0))
			c := releaseCall(e.target, "exec-once", "1")
			if method == "GET" {
				c.Method, c.Path, c.Body = "GET", "/v1/releases/api", nil
			}
			_, err := e.d.Send(t.Context(), c)
			wantClass(t, "Send on a cut kept-alive connection", err, ErrOutcomeUnknown)
			if n := e.demo.Requests(); n != 2 {
				t.Fatalf("target received %d requests, want 2 (warm-up and one attempt)", n)
			}
			if n := e.proxy.Conns(); n != 1 {
				t.Fatalf("proxy accepted %d connections, want 1 (the kept-alive one)", n)
			}
		})
	}
}

// TestFixtureSeesTransportRetry shows the fixture above detects a re-send:
// a plain net/http client does re-send a written request carrying an
// Idempotency-Key header and a rewindable body.
func TestFixtureSeesTransportRetry(t *testing.T) {
	e := newFaultEnv(t)
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	post := func(key string) error {
		req, err := http.NewRequestWithContext(t.Context(), "POST", "http://"+e.proxy.Addr()+"/v1/releases",
			bytes.NewReader([]byte(`{"service":"api","version":"1","region":"r"}`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body) // so the connection is kept alive
			resp.Body.Close()
		}
		return err
	}
	if err := post("warm"); err != nil {
		t.Fatalf("warm-up POST: %v", err)
	}
	e.setMode(t, faultproxy.Cut(0))
	if err := post("again"); err == nil {
		t.Fatal("POST through a cut succeeded")
	}
	if n := e.demo.Requests(); n != 3 {
		t.Fatalf("target received %d requests, want 3 (net/http re-sent the cut request)", n)
	}
}

func TestTLSTarget(t *testing.T) {
	log := testlog.New(t, hclog.Trace)
	demo := demotarget.New(demotarget.Config{Logger: log})
	srv := httptest.NewTLSServer(demo)
	t.Cleanup(srv.Close)
	p, err := faultproxy.Start(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	d := newDispatcher(t, Config{TLSConfig: &tls.Config{RootCAs: roots}})
	tg := demoTarget("https", p.Addr())

	obs, err := d.Send(t.Context(), releaseCall(tg, "exec-tls", "1"))
	if err != nil || obs.Status != http.StatusCreated {
		t.Fatalf("Send over TLS = %+v, %v; want 201", obs, err)
	}
	d.Close() // the next call needs a new connection

	// A connection dropped during the TLS handshake never carried the
	// request.
	if err := p.SetMode(faultproxy.Drop); err != nil {
		t.Fatal(err)
	}
	_, err = d.Send(t.Context(), releaseCall(tg, "exec-tls-2", "1"))
	wantClass(t, "Send with the handshake dropped", err, ErrNotSent)
	if n := demo.Total(); n != 1 {
		t.Fatalf("Total = %d, want 1", n)
	}

	// An untrusted certificate is not sent either.
	if err := p.SetMode(faultproxy.Pass); err != nil {
		t.Fatal(err)
	}
	untrusting := newDispatcher(t, Config{})
	_, err = untrusting.Send(t.Context(), releaseCall(tg, "exec-tls-3", "1"))
	wantClass(t, "Send to an untrusted certificate", err, ErrNotSent)
	if n := demo.Total(); n != 1 {
		t.Fatalf("Total = %d, want 1", n)
	}
}
