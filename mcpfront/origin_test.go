package mcpfront

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestOriginPolicy(t *testing.T) {
	p, err := newOriginPolicy([]string{"https://Console.Example.com:443", "http://tools.internal:8080"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		origin string
		want   bool
	}{
		{"http://localhost:5173", true},
		{"http://127.0.0.1:8080", true},
		{"http://127.9.9.9", true},
		{"https://[::1]:3000", true},
		{"HTTP://LOCALHOST", true},
		{"https://console.example.com", true},     // pinned, default port dropped
		{"https://console.example.com:443", true}, // same origin
		{"https://CONSOLE.example.com", true},
		{"http://tools.internal:8080", true},
		{"http://tools.internal", false},            // another port is another origin
		{"http://console.example.com", false},       // another scheme
		{"https://console.example.com:8443", false}, // another port
		{"https://console.example.com.evil.example", false},
		{"https://evil.example", false},
		{"null", false},
		{"", false},
		{"http://127.0.0.1@evil.example", false}, // userinfo: the host is evil.example
		{"http://localhost:80@evil.example", false},
		{"http://127.0.0.1.evil.example", false}, // starts like loopback, is not
		{"http://localhost.evil.example", false},
		{"http://localhost.", false}, // trailing dot
		{"http://evil.example#@127.0.0.1", false},
		{"http://evil.example/127.0.0.1", false},
		{"http://localhost/", false}, // not a serialised origin
		{"http://localhost/path", false},
		{"http://localhost?x", false},
		{"http://localhost:", false},
		{"http://localhost:0", false},
		{"http://localhost:65536", false},
		{"http://localhost:080", false},
		{"http://localhost:8o", false},
		{"ftp://localhost", false},
		{"file://", false},
		{"chrome-extension://abcdef", false},
		{"localhost:8080", false},
		{"//localhost", false},
		{"http:localhost", false},
		{"http://[::1%25eth0]", false},
		{"http://[fe80::1]", false},
		{"http://0x7f.0.0.1", false}, // not an address Go or browsers would send
		{"http://2130706433", false}, // integer form
		{"http://local host", false},
		{"http://localhost\r\nX: y", false},
		{"http://lo%63alhost", false},
		{"http://xn--80ak6aa92e.com", false}, // a valid foreign name
		{"http://127.0.0.1 .evil.example", false},
	}
	for _, tt := range tests {
		err := p.check(tt.origin)
		if got := err == nil; got != tt.want {
			t.Errorf("check(%q) = %v, want allowed=%v", tt.origin, err, tt.want)
		}
	}
}

func TestNewRefusesBadAllowedOrigins(t *testing.T) {
	for _, o := range []string{"console.example.com", "https://console.example.com/", "https://u@console.example.com", "null", "*"} {
		if _, err := newOriginPolicy([]string{o}); !errors.Is(err, ErrBadOrigin) || !strings.Contains(err.Error(), "scheme://host[:port]") {
			t.Errorf("newOriginPolicy(%q) = %v, want ErrBadOrigin saying what an origin looks like", o, err)
		}
	}
}

// TestOriginRuleOnHTTP: the front answers 403 before authentication for a
// refused origin, and says how to allow one; two Origin headers are refused.
func TestOriginRuleOnHTTP(t *testing.T) {
	f := &Front{origins: originPolicy{}, log: hclog.NewNullLogger()}
	reached := false
	h := f.wrapHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	for _, tt := range []struct {
		origins []string
		want    int
	}{
		{nil, http.StatusOK},
		{[]string{"http://127.0.0.1:9"}, http.StatusOK},
		{[]string{"http://127.0.0.1@evil.example"}, http.StatusForbidden},
		{[]string{"http://127.0.0.1", "https://evil.example"}, http.StatusForbidden},
	} {
		reached = false
		req := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		for _, o := range tt.origins {
			req.Header.Add("Origin", o)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want || reached != (tt.want == http.StatusOK) {
			t.Errorf("Origin %q: status %d (handler reached %v), want %d", tt.origins, rec.Code, reached, tt.want)
		}
		if rec.Code == http.StatusForbidden && !strings.Contains(rec.Body.String(), "--allow-origin") {
			t.Errorf("Origin %q: body %q does not say how to allow an origin", tt.origins, rec.Body.String())
		}
	}
}

// FuzzParseOrigin: whatever ParseOrigin accepts is an http(s) origin whose
// normal form parses back to itself, with the same host, and no userinfo,
// path, query or fragment.
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"http://localhost:5173", "https://[::1]:3000", "http://127.0.0.1@evil.example", "null",
		"HTTPS://Console.Example.com:443", "http://a.b-c.d:65535", "http://[::ffff:127.0.0.1]", "http://x#y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, host, err := ParseOrigin(s)
		if err != nil {
			if !errors.Is(err, ErrBadOrigin) {
				t.Fatalf("ParseOrigin(%q) error %v does not wrap ErrBadOrigin", s, err)
			}
			return
		}
		n2, host2, err := ParseOrigin(n)
		if err != nil || n2 != n || host2 != host {
			t.Fatalf("ParseOrigin(%q) = %q, %q; its normal form parses to %q, %q, %v", s, n, host, n2, host2, err)
		}
		u, err := url.Parse(n)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.ToLower(u.Hostname()) != host {
			t.Fatalf("ParseOrigin(%q) = %q (host %q), which is not a plain origin of that host: %+v %v", s, n, host, u, err)
		}
	})
}
