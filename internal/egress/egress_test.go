package egress

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

func TestPolicyCheck(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		ip   string
		ok   bool
	}{
		{"metadata with private", Policy{AllowPrivate: true}, "169.254.169.254", false},
		{"mapped metadata", Policy{AllowPrivate: true}, "::ffff:169.254.169.254", false},
		{"nat64 metadata", Policy{AllowPrivate: true}, "64:ff9b::a9fe:a9fe", false},
		{"link-local", Policy{AllowPrivate: true, AllowLoopback: true}, "169.254.1.1", false},
		{"unspecified", Policy{AllowPrivate: true}, "0.0.0.0", false},
		{"multicast", Policy{AllowPrivate: true}, "ff02::1", false},
		{"loopback strict", Policy{}, "127.0.0.1", false},
		{"loopback with loopback", Policy{AllowLoopback: true}, "127.0.0.1", true},
		{"v6 loopback with loopback", Policy{AllowLoopback: true}, "::1", true},
		{"loopback with private", Policy{AllowPrivate: true}, "127.0.0.1", true},
		{"private with loopback only", Policy{AllowLoopback: true}, "10.0.0.1", false},
		{"private with private", Policy{AllowPrivate: true}, "10.0.0.1", true},
		{"ula strict", Policy{}, "fd12::1", false},
		{"public strict", Policy{}, "8.8.8.8", true},
		{"public v6 strict", Policy{}, "2001:4860:4860::8888", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Check(netip.MustParseAddr(tt.ip))
			if (err == nil) != tt.ok {
				t.Fatalf("%+v.Check(%q) = %v, want ok=%v", tt.p, tt.ip, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Fatalf("%+v.Check(%q) = %v, want ErrRefused", tt.p, tt.ip, err)
			}
		})
	}
}

func TestPolicyHint(t *testing.T) {
	err := Policy{Hint: "give --oauth-allow-private"}.Check(netip.MustParseAddr("10.1.1.1"))
	if err == nil || !strings.Contains(err.Error(), "--oauth-allow-private") {
		t.Errorf("Check(10.1.1.1) = %v, want the policy's hint", err)
	}
	err = Policy{}.Check(netip.MustParseAddr("10.1.1.1"))
	if err == nil || !strings.Contains(err.Error(), DefaultHint) {
		t.Errorf("Check(10.1.1.1) = %v, want the default hint", err)
	}
}

func TestControl(t *testing.T) {
	tests := []struct{ network, address string }{
		{"udp4", "8.8.8.8:53"},
		{"tcp4", "example.com:80"},
		{"tcp4", "169.254.169.254:80"},
	}
	for _, tt := range tests {
		if err := (Policy{AllowPrivate: true}).Control(tt.network, tt.address, nil); !errors.Is(err, ErrRefused) {
			t.Errorf("Control(%q, %q) = %v, want ErrRefused", tt.network, tt.address, err)
		}
	}
	if err := (Policy{}).Control("tcp6", "[2001:db8::1]:443", nil); err != nil {
		t.Errorf("Control(public) = %v, want nil", err)
	}
}

func TestOrigin(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://Example.COM/x", "http://example.com:80"},
		{"https://example.com/x", "https://example.com:443"},
		{"https://example.com:443/y", "https://example.com:443"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080"},
		{"http://[::1]:9/", "http://[::1]:9"},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.in)
		if got := Origin(u); got != tt.want {
			t.Errorf("Origin(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// counter is a loopback server counting the requests it gets and whether
// any carried an Authorization header or a body.
type counter struct {
	srv                   *httptest.Server
	n, withAuth, withBody atomic.Int32
}

func newCounter(t *testing.T, h http.HandlerFunc) *counter {
	t.Helper()
	c := &counter{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		if r.Header.Get("Authorization") != "" {
			c.withAuth.Add(1)
		}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			c.withBody.Add(1)
		}
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func redirectTo(loc string, code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/final" {
			io.WriteString(w, "ok")
			return
		}
		http.Redirect(w, r, loc, code)
	}
}

func loopbackClient(t *testing.T, cred string, origin string) *http.Client {
	t.Helper()
	cfg := Config{Policy: Policy{AllowLoopback: true}}
	var rt http.RoundTripper = NewTransport(cfg)
	if cred != "" {
		var err error
		rt, err = WithCredential(rt, origin, func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+cred)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return NewClient(cfg, rt)
}

// TestRedirects walks the redirect rule against real loopback servers: the
// second server (another port, so another origin) never gets a request.
func TestRedirects(t *testing.T) {
	other := newCounter(t, nil)
	tests := []struct {
		name     string
		method   string
		body     string
		code     int
		loc      string // "" : other.srv.URL+"/x"
		cred     bool
		wantOK   bool
		wantSelf int32 // requests the first server gets
	}{
		{"cross-origin GET", http.MethodGet, "", http.StatusFound, "", false, false, 1},
		{"cross-origin GET with credential", http.MethodGet, "", http.StatusTemporaryRedirect, "", true, false, 1},
		{"cross-origin POST 307", http.MethodPost, `{"jsonrpc":"2.0"}`, http.StatusTemporaryRedirect, "", true, false, 1},
		{"cross-origin POST 308", http.MethodPost, `{"jsonrpc":"2.0"}`, http.StatusPermanentRedirect, "", false, false, 1},
		{"same-origin POST 307", http.MethodPost, `{"jsonrpc":"2.0"}`, http.StatusTemporaryRedirect, "/final", true, false, 1},
		{"same-origin POST 302", http.MethodPost, `{"jsonrpc":"2.0"}`, http.StatusFound, "/final", false, false, 1},
		{"same-origin GET", http.MethodGet, "", http.StatusFound, "/final", true, true, 2},
		{"same-origin GET loop", http.MethodGet, "", http.StatusFound, "/again", false, false, maxRedirects},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := tt.loc
			if loc == "" {
				loc = other.srv.URL + "/x"
			}
			self := newCounter(t, redirectTo(loc, tt.code))
			cred := ""
			if tt.cred {
				cred = "secret-token-0123"
			}
			hc := loopbackClient(t, cred, self.srv.URL)
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, self.srv.URL+"/start", body)
			resp, err := hc.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if tt.wantOK {
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("Do = %v, %v; want 200 after the redirect", resp, err)
				}
			} else if !errors.Is(err, ErrRedirect) {
				t.Fatalf("Do = %v, %v; want ErrRedirect", resp, err)
			}
			if n := self.n.Load(); n != tt.wantSelf {
				t.Errorf("first server got %d requests, want %d", n, tt.wantSelf)
			}
			if tt.cred && self.withAuth.Load() != self.n.Load() {
				t.Errorf("first server got the credential on %d of %d requests, want all", self.withAuth.Load(), self.n.Load())
			}
			if tt.body != "" && self.withBody.Load() != 1 {
				t.Errorf("first server got %d bodies, want 1", self.withBody.Load())
			}
		})
	}
	if n := other.n.Load(); n != 0 {
		t.Errorf("the other origin got %d requests (%d with the credential, %d with a body), want 0", n, other.withAuth.Load(), other.withBody.Load())
	}
}

// TestRedirectErrorNamesOrigin: the refusal says where the redirect went.
func TestRedirectErrorNamesOrigin(t *testing.T) {
	self := newCounter(t, redirectTo("http://127.0.0.1:9/elsewhere", http.StatusTemporaryRedirect))
	resp, err := loopbackClient(t, "", "").Get(self.srv.URL)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrRedirect) || !strings.Contains(err.Error(), "http://127.0.0.1:9") || !strings.Contains(err.Error(), "307") {
		t.Errorf("Get = %v; want ErrRedirect naming http://127.0.0.1:9 and the status", err)
	}
}

// TestWithCredentialOtherOrigin: a request to another origin is refused
// before anything is sent, whatever the client's redirect rule.
func TestWithCredentialOtherOrigin(t *testing.T) {
	other := newCounter(t, nil)
	rt, err := WithCredential(NewTransport(Config{Policy: Policy{AllowLoopback: true}}), "http://127.0.0.1:1", func(r *http.Request) error {
		r.Header.Set("Authorization", "Bearer x")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A client that follows everything: the credential still does not go.
	hc := &http.Client{Transport: rt}
	resp, err := hc.Get(other.srv.URL)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrCrossOrigin) {
		t.Fatalf("Get(other origin) = %v, want ErrCrossOrigin", err)
	}
	if n := other.n.Load(); n != 0 {
		t.Errorf("the other origin got %d requests, want 0", n)
	}
	if _, err := WithCredential(rt, "not a url", nil); err == nil {
		t.Error("WithCredential(\"not a url\") = nil error, want one")
	}
}

// TestTransportRefusesLoopback: the policy runs at dial time; the loopback
// server proves no connection reached it.
func TestTransportRefusesLoopback(t *testing.T) {
	self := newCounter(t, nil)
	hc := NewClient(Config{}, nil)
	resp, err := hc.Get(self.srv.URL)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Get(loopback) under the strict policy = %v, want ErrRefused", err)
	}
	if n := self.n.Load(); n != 0 {
		t.Errorf("loopback server got %d requests, want 0", n)
	}
}
