package hostchannel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/tools"
)

func TestSecretEnv(t *testing.T) {
	tool := &tools.Tool{
		CommandAction: tools.CommandAction{
			Env: map[string]string{
				"TOKEN": "{{token}}", "AUTH": "Bearer {{ token }}", "PIN": "{{pin}}",
				"GREETING": "{{greeting}}", "FIXED": "literal",
			},
		},
		Fingerprint: tools.Fingerprint{Secret: []string{"token", "pin"}},
	}
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{name: "every secret entry", env: map[string]string{"TOKEN": "t", "AUTH": "Bearer t", "PIN": "1234", "GREETING": "hi", "FIXED": "literal"}, want: []string{"AUTH", "PIN", "TOKEN"}},
		{name: "an entry left out is not named", env: map[string]string{"TOKEN": "t", "AUTH": "Bearer t", "GREETING": "hi"}, want: []string{"AUTH", "TOKEN"}},
		{name: "no env", env: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, secretEnv(tool, tt.env)); diff != "" {
				t.Errorf("secretEnv (-want +got):\n%s", diff)
			}
		})
	}
	if got := secretEnv(&tools.Tool{CommandAction: tools.CommandAction{Env: tool.Env}}, map[string]string{"TOKEN": "t"}); got != nil {
		t.Errorf("secretEnv of a tool without secret arguments = %q, want none", got)
	}
}

// TestLocalSecretEnvRedactedOnTheHost: a dispatch names the env entries
// holding a secret argument, and the real host agent redacts them from the
// output it keeps and returns (the engine redacts its own copy as well).
func TestLocalSecretEnvRedactedOnTheHost(t *testing.T) {
	const secret = "Zq9-planted-SECRET-4471"
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, data, "")
	c := newChannel(t, Config{})
	call := newCall("act_secret_env", localTarget(a.Socket), "/bin/sh", "-c", `echo "$TOKEN"; echo "$AUTH"; echo "$GREETING"`)
	call.Tool.Env = map[string]string{"TOKEN": "{{token}}", "AUTH": "Bearer {{token}}", "GREETING": "{{greeting}}"}
	call.Tool.Fingerprint.Secret = []string{"token"}
	call.Arguments = map[string]any{"token": secret, "greeting": "hello"}
	got := c.Dispatch(ctxT(t), call)
	const want = "[REDACTED]\n[REDACTED]\nhello\n"
	if got.Class != engine.Observed || string(got.Result.GetBody()) != want {
		t.Errorf("Dispatch() = %s %q (%s), want Observed %q", className(got.Class), got.Result.GetBody(), got.Reason, want)
	}
	b, err := os.ReadFile(filepath.Join(execdir.Path(data, "act_secret_env"), execdir.OutputFile))
	if err != nil || string(b) != want {
		t.Errorf("the agent's output file = %q, %v; want %q", b, err, want)
	}
	if strings.Contains(a.Log.String(), secret) {
		t.Errorf("the agent's log holds the secret")
	}
}

// TestLocalEmbeddedSecretRedactedAlone: a secret that only an entry with
// text around it carries (AUTH: "Bearer {{token}}") is redacted by the real
// host agent when the command prints it alone too: the dispatch sends the
// bare value (secret_values) beside the entry's name.
func TestLocalEmbeddedSecretRedactedAlone(t *testing.T) {
	const secret = "Zq9-planted-SECRET-4471"
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, data, "")
	c := newChannel(t, Config{})
	// PIN and CRED carry forms the agent must find as they are in the env:
	// a number in its JSON form (1e+21) and an object's leaf JSON-escaped.
	call := newCall("act_embedded_secret", localTarget(a.Socket), "/bin/sh", "-c",
		`echo "$AUTH"; echo "${AUTH#Bearer }"; echo "x${AUTH#Bearer }y"; echo "${PIN#pin=}"; echo "${CRED#cred }"`)
	call.Tool.Env = map[string]string{"AUTH": "Bearer {{token}}", "PIN": "pin={{pin}}", "CRED": "cred {{cred}}"}
	call.Tool.Fingerprint.Secret = []string{"token", "pin", "cred"}
	call.Arguments = map[string]any{"token": secret, "pin": 1e21, "cred": map[string]any{"pw": `pa"ss-word`}}
	got := c.Dispatch(ctxT(t), call)
	const want = "[REDACTED]\n[REDACTED]\nx[REDACTED]y\n[REDACTED]\n{\"pw\":\"[REDACTED]\"}\n"
	if got.Class != engine.Observed || string(got.Result.GetBody()) != want {
		t.Errorf("Dispatch() = %s %q (%s), want Observed %q", className(got.Class), got.Result.GetBody(), got.Reason, want)
	}
	b, err := os.ReadFile(filepath.Join(execdir.Path(data, "act_embedded_secret"), execdir.OutputFile))
	if err != nil || string(b) != want {
		t.Errorf("the agent's output file = %q, %v; want %q", b, err, want)
	}
}
