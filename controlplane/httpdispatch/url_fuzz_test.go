package httpdispatch

import (
	"net/url"
	"strings"
	"testing"

	"github.com/latchhq/latch/tools"
)

// FuzzTargetURL checks that no path or query moves a request off the
// target's host or out of its base path.
func FuzzTargetURL(f *testing.F) {
	for _, s := range []string{"/v1/releases", "//evil.example/x", "/@evil.example", "/a%2F..%2Fb", "/../x", "/a?b#c", "/%zz", "/a\\b", "/ok/%40x", "/%2E%2E/admin", "/a/%2e/b"} {
		f.Add(s, "q", "v")
	}
	tg := &tools.Target{Name: "t", HTTPTarget: tools.HTTPTarget{BaseURL: "https://api.example.com:8443/base"}}
	f.Fuzz(func(t *testing.T, path, qk, qv string) {
		u, err := targetURL(tg, path, map[string]string{qk: qv})
		if err != nil {
			return
		}
		back, err := url.Parse(u.String())
		if err != nil {
			t.Fatalf("targetURL(%q) = %q, which does not parse: %v", path, u, err)
		}
		if back.Scheme != "https" || back.Host != "api.example.com:8443" || back.User != nil {
			t.Fatalf("targetURL(%q) = %q, which leaves the target", path, u)
		}
		if !strings.HasPrefix(back.EscapedPath(), "/base/") {
			t.Fatalf("targetURL(%q) = %q, which leaves the base path", path, u)
		}
		for _, el := range strings.Split(back.EscapedPath(), "/") {
			if un, _ := url.PathUnescape(el); un == "." || un == ".." {
				t.Fatalf("targetURL(%q) = %q has a dot segment", path, u)
			}
		}
		if u.RequestURI() != back.RequestURI() {
			t.Fatalf("targetURL(%q): request URI %q changes to %q on re-parse", path, u.RequestURI(), back.RequestURI())
		}
	})
}
