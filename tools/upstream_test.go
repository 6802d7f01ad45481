package tools

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseUpstreams(t *testing.T) {
	data, err := os.ReadFile("testdata/good_upstreams.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := Parse("testdata/good_upstreams.yaml", data)
	if err != nil {
		t.Fatalf("Parse(good_upstreams.yaml) = %v", err)
	}
	wantUp := map[string]*Upstream{
		"tracker": {Name: "tracker", Transport: TransportStdio, Command: []string{"/usr/local/bin/tracker-mcp", "--stdio"},
			Env: map[string]string{"LOG_LEVEL": "info"}, Cwd: "/var/lib/tracker", Credential: "tracker-token", CredentialEnv: "TRACKER_TOKEN", Timeout: DefaultHTTPTimeout},
		"payments": {Name: "payments", Transport: TransportHTTP, URL: "https://mcp.payments.example.test/mcp", Credential: "payments", Timeout: 45 * time.Second},
	}
	if diff := cmp.Diff(wantUp, cat.Upstreams); diff != "" {
		t.Errorf("Upstreams mismatch (-want +got):\n%s", diff)
	}
	wantTargets := map[string]*Target{
		"tracker":  {Name: "tracker", Channel: ChannelMCP, Credential: "tracker-token", Timeout: DefaultHTTPTimeout, Settle: DefaultSettle},
		"payments": {Name: "payments", Channel: ChannelMCP, Credential: "payments", Timeout: 45 * time.Second, Settle: DefaultSettle},
	}
	if diff := cmp.Diff(wantTargets, cat.Targets, cmpopts.IgnoreUnexported(Target{})); diff != "" {
		t.Errorf("Targets mismatch (-want +got):\n%s", diff)
	}
	wantTools := map[string]*Tool{
		"tracker.create_issue": {Name: "tracker.create_issue", Target: "tracker", UpstreamAction: UpstreamAction{Upstream: "tracker", UpstreamTool: "create_issue", IdempotencyArgument: "request_id"},
			Mode: ModeEnforce, Replay: ReplayIdempotencyKey, AttachWindow: 2 * time.Hour, Approval: ApprovalSession, Fingerprint: Fingerprint{Ignore: []string{"labels"}}},
		"payments.get-balance": {Name: "payments.get-balance", Description: "Read the balance.", Target: "payments", UpstreamAction: UpstreamAction{Upstream: "payments", UpstreamTool: "get-balance"},
			Mode: ModeEnforce, Replay: ReplayReadOnly, Approval: ApprovalNone},
		"payments.refund": {Name: "payments.refund", Target: "payments", UpstreamAction: UpstreamAction{Upstream: "payments", UpstreamTool: "refund"},
			Mode: ModeEnforce, Replay: ReplayReview, UntilResolved: true, Approval: ApprovalEveryCall},
	}
	if diff := cmp.Diff(wantTools, cat.Tools, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Tools mismatch (-want +got):\n%s", diff)
	}
	if got := cat.UpstreamOf(cat.Tools["payments.refund"]); got != cat.Upstreams["payments"] {
		t.Errorf("UpstreamOf(payments.refund) = %v, want the payments upstream", got)
	}
}

func TestBindUpstreamSchema(t *testing.T) {
	base := &Tool{Name: "t.create", UpstreamAction: UpstreamAction{Upstream: "t", UpstreamTool: "create", IdempotencyArgument: "request_id"}, Replay: ReplayIdempotencyKey,
		Fingerprint: Fingerprint{Secret: []string{"token"}}}
	for _, tc := range []struct {
		name, schema string
		tool         *Tool
		want         string // the bound schema, or
		wantErr      string // a part of the error
		defaults     map[string]any
	}{
		{
			name:     "idempotency argument leaves the advertised schema",
			schema:   `{"type":"object","required":["title","request_id"],"properties":{"title":{"type":"string"},"request_id":{"type":"string"},"token":{"type":"string"},"n":{"type":"integer","default":3}}}`,
			tool:     base,
			want:     `{"type":"object","required":["title"],"properties":{"n":{"type":"integer","default":3},"title":{"type":"string"},"token":{"type":"string"}}}`,
			defaults: map[string]any{"n": 3.0},
		},
		{name: "missing idempotency argument", schema: `{"type":"object","properties":{"token":{"type":"string"}}}`, tool: base, wantErr: `idempotency_argument "request_id" is not a property`},
		{name: "non-string key", schema: `{"type":"object","properties":{"request_id":{"type":"integer"},"token":{"type":"string"}}}`, tool: base, wantErr: "has type integer"},
		{name: "fingerprint names a missing property", schema: `{"type":"object","properties":{"request_id":{"type":"string"}}}`, tool: base, wantErr: `fingerprint names "token"`},
		{name: "not an object", schema: `{"type":"string"}`, tool: &Tool{Name: "t.x", UpstreamAction: UpstreamAction{Upstream: "t"}, Replay: ReplayReview}, wantErr: "type: object"},
		{name: "reserved repeat_of", schema: `{"type":"object","properties":{"repeat_of":{"type":"string"}}}`, tool: &Tool{Name: "t.x", UpstreamAction: UpstreamAction{Upstream: "t"}, Replay: ReplayReview}, wantErr: "repeat_of"},
		{name: "not JSON Schema", schema: `{"type":"object","properties":[]}`, tool: &Tool{Name: "t.x", UpstreamAction: UpstreamAction{Upstream: "t"}, Replay: ReplayReview}, wantErr: "not a JSON Schema"},
		{name: "no schema takes no arguments", schema: ``, tool: &Tool{Name: "t.x", UpstreamAction: UpstreamAction{Upstream: "t"}, Replay: ReplayReview}, want: defaultInputSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.tool.BindUpstreamSchema(json.RawMessage(tc.schema))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("BindUpstreamSchema(%s) = %v, want an error with %q", tc.schema, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("BindUpstreamSchema(%s) = %v", tc.schema, err)
			}
			var g, w any
			json.Unmarshal(got.InputSchema, &g)
			json.Unmarshal([]byte(tc.want), &w)
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("bound schema (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.defaults, got.Defaults); diff != "" {
				t.Errorf("defaults (-want +got):\n%s", diff)
			}
			if tc.tool.InputSchema != nil {
				t.Errorf("BindUpstreamSchema changed the tool it was called on")
			}
			// The bound tool checks arguments against the upstream's schema.
			if tc.tool == base {
				if _, err := got.PrepareArguments(json.RawMessage(`{"token":"x"}`)); err == nil {
					t.Errorf("PrepareArguments without the required title succeeded")
				}
				if _, err := got.PrepareArguments(json.RawMessage(`{"title":"x"}`)); err != nil {
					t.Errorf("PrepareArguments(title) = %v", err)
				}
			}
		})
	}
}

func TestIsUpstreamToolName(t *testing.T) {
	for name, want := range map[string]bool{"tracker.create_issue": true, "everything.get-sum": true, "gh.createIssue": true, "create": false, "Bad.x": false, "a.": false, "a.b c": false} {
		if got := IsUpstreamToolName(name); got != want {
			t.Errorf("IsUpstreamToolName(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzBindUpstreamSchema: an upstream's schema is input from outside Latch;
// binding never panics, and a bound schema validates arguments.
func FuzzBindUpstreamSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","required":["title","request_id"],"properties":{"title":{"type":"string"},"request_id":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"number"}}}`,
		`{"type":"object","additionalProperties":false}`, `{}`, `[]`, `null`,
	} {
		f.Add([]byte(s), []byte(`{"title":"x"}`))
	}
	tool := &Tool{Name: "t.x", UpstreamAction: UpstreamAction{Upstream: "t", UpstreamTool: "x", IdempotencyArgument: "request_id"}, Replay: ReplayIdempotencyKey}
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		b, err := tool.BindUpstreamSchema(schema)
		if err != nil {
			return
		}
		b.PrepareArguments(args) //nolint:errcheck // must not panic
	})
}

func TestChannelMCPIsKnown(t *testing.T) {
	if !ChannelMCP.Known() {
		t.Errorf("ChannelMCP.Known() = false: upstream calls would lose their channel label")
	}
}
