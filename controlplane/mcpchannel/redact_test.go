package mcpchannel

import (
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/redact"
	"github.com/latchhq/latch/tools"
)

// TestCredentialEchoedEncoded: an upstream that echoes its credential in an
// encoded form (JSON's `\/`, base64, URL-escaped, HTML entities) gets none
// of it into the stored body or the summary; a
// credential too short to be redacted is refused.
func TestCredentialEchoedEncoded(t *testing.T) {
	const token = "tok/en-0123456789"
	c := newTestChannel(t, Config{MaxResult: 1 << 16})
	u := &upstream{c: c, spec: tools.Upstream{Name: "up", Credential: "cred"}}
	if err := u.setSecrets([][]byte{[]byte(token)}); err != nil {
		t.Fatalf("setSecrets = %v", err)
	}
	written := &attemptTrack{}
	written.written.Store(true)
	call := engine.Call{Tool: &tools.Tool{UpstreamAction: tools.UpstreamAction{UpstreamTool: "t"}}}
	for _, enc := range []string{
		token,
		`tok\/en-0123456789`,
		base64.StdEncoding.EncodeToString([]byte(token)),
		base64.RawURLEncoding.EncodeToString([]byte(token)),
		url.QueryEscape(token),
		"tok&#x2F;en-0123456789",
	} {
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + enc}}}
		a := c.classify(u, call, written, res, nil)
		if b := string(a.Result.GetBody()); strings.Contains(b, enc) || !strings.Contains(b, redact.Mark) {
			t.Errorf("echo %q: stored body = %s, want it redacted", enc, b)
		}
		if s := a.Result.GetSummary(); strings.Contains(s, enc) {
			t.Errorf("echo %q: summary = %q carries it", enc, s)
		}
	}
	if err := u.setSecrets([][]byte{[]byte("abc")}); !errors.Is(err, redact.ErrTooShort) {
		t.Errorf("setSecrets(short) = %v, want ErrTooShort", err)
	}
}
