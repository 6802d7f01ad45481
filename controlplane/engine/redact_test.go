package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func TestRedactAttempt(t *testing.T) {
	h := newHarness(t, "", nil)
	x := &recordv1.Execution{Id: "act_r", Tool: "pay"}
	tests := []struct {
		name   string
		secret any
		in     *recordv1.Result
		reason string
		want   *recordv1.Result
		wantR  string
	}{
		{name: "body headers summary reason", secret: "s3cr3t-Value",
			in:     &recordv1.Result{Status: 200, Headers: map[string]string{"Etag": `"s3cr3t-Value"`, "X-s3cr3t-Value": "k"}, Body: []byte(`{"echo":"s3cr3t-Value"}`), Summary: "printed s3cr3t-Value"},
			reason: "failed: s3cr3t-Value",
			want:   &recordv1.Result{Status: 200, Headers: map[string]string{"Etag": `"[REDACTED]"`, "X-[REDACTED]": "k"}, Body: []byte(`{"echo":"[REDACTED]"}`), Summary: "printed [REDACTED]"},
			wantR:  "failed: [REDACTED]"},
		{name: "escaped forms", secret: `a"b/c <d>&é`,
			in:   &recordv1.Result{Body: []byte(`j1 a\"b/c \u003cd\u003e\u0026é j2 a\"b/c <d>&é q a%22b%2Fc+%3Cd%3E%26%C3%A9 p a%22b%2Fc%20%3Cd%3E&%C3%A9`)},
			want: &recordv1.Result{Body: []byte(`j1 [REDACTED] j2 [REDACTED] q [REDACTED] p [REDACTED]`)}},
		{name: "object secret, field by field", secret: map[string]any{"user": "svc-account", "pass": "hunter22", "pin": 1234567.0, "on": true},
			in:   &recordv1.Result{Body: []byte(`user svc-account pass hunter22 pin 1234567 on true`)},
			want: &recordv1.Result{Body: []byte(`user [REDACTED] pass [REDACTED] pin [REDACTED] on true`)}},
		{name: "short secret left alone", secret: "abc",
			in:   &recordv1.Result{Body: []byte(`abcabc`)},
			want: &recordv1.Result{Body: []byte(`abcabc`)}},
		{name: "truncated body ending in part of the secret", secret: "TOPSECRET99",
			in:   &recordv1.Result{Body: []byte(`ok TOPSECRET99 then TOPSEC`), BodyTruncated: true},
			want: &recordv1.Result{Body: []byte(`ok [REDACTED] then `), BodyTruncated: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.e.secrets[x.GetId()] = map[string]any{"amount": 1.0, "secret_memo": tt.secret}
			in := tt.in
			orig := string(in.GetBody())
			got := h.e.redactAttempt(x, Attempt{Class: Observed, Result: in, Reason: tt.reason})
			if diff := cmp.Diff(tt.want, got.Result, protocmp.Transform()); diff != "" {
				t.Errorf("redactAttempt result (-want +got):\n%s", diff)
			}
			if got.Reason != tt.wantR {
				t.Errorf("redactAttempt reason = %q, want %q", got.Reason, tt.wantR)
			}
			if string(in.GetBody()) != orig {
				t.Errorf("redactAttempt modified its input: %q", in.GetBody())
			}
			again := h.e.redactAttempt(x, got)
			if diff := cmp.Diff(got.Result, again.Result, protocmp.Transform()); diff != "" && !strings.Contains(tt.name, "truncated") {
				t.Errorf("redacting twice changed the result (-once +twice):\n%s", diff)
			}
		})
	}
	// No secrets in memory, or a tool without secret arguments: unchanged.
	delete(h.e.secrets, x.GetId())
	r := &recordv1.Result{Body: []byte("s3cr3t-Value")}
	if got := h.e.redactAttempt(x, Attempt{Result: r}); got.Result != r {
		t.Errorf("without secrets in memory the result was rewritten")
	}
}

// TestRedactAttemptEncodedForms: a secret argument with a "/" echoed in any
// encoded form (JSON's `\/`, \u00XX in either case, URL, base64, HTML
// entities) is gone from every stored surface: body, header values, summary,
// signal and reason.
func TestRedactAttemptEncodedForms(t *testing.T) {
	h := newHarness(t, "", nil)
	x := &recordv1.Execution{Id: "act_f", Tool: "pay"}
	const secret = "a/b-secret-123"
	forms := map[string]string{
		"raw":            secret,
		"json \\/":       `a\/b-secret-123`,
		"json \\u002f":   `a\u002fb-secret-123`,
		"json \\u002F":   `a\u002Fb-secret-123`,
		"url query":      "a%2Fb-secret-123",
		"url lower":      "a%2fb-secret-123",
		"base64 std":     "YS9iLXNlY3JldC0xMjM=",
		"base64 raw url": "YS9iLXNlY3JldC0xMjM",
		"html hex":       "a&#x2F;b-secret-123",
		"html decimal":   "a&#47;b-secret-123",
	}
	h.e.secrets[x.GetId()] = map[string]any{"amount": 1.0, "secret_memo": secret}
	for name, enc := range forms {
		t.Run(name, func(t *testing.T) {
			in := &recordv1.Result{Status: 200, Headers: map[string]string{"X-Echo": "v=" + enc}, Body: []byte(`{"echo":"` + enc + `"}`),
				Summary: "printed " + enc, Signal: enc}
			got := h.e.redactAttempt(x, Attempt{Class: Observed, Result: in, Reason: "failed: " + enc})
			for surface, v := range map[string]string{
				"body": string(got.Result.GetBody()), "header": got.Result.GetHeaders()["X-Echo"],
				"summary": got.Result.GetSummary(), "signal": got.Result.GetSignal(), "reason": got.Reason,
			} {
				if strings.Contains(v, enc) || !strings.Contains(v, redactedMark) {
					t.Errorf("%s = %q, want the %s form %q redacted", surface, v, name, enc)
				}
			}
		})
	}
}
