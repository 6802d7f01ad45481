package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/internal/testing/testbin"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// plantedSecret has a '/', a space and quotes, so that its URL- and
// JSON-escaped forms differ from it.
const plantedSecret = `Zq9-planted/SECRET "4471"`

// secretForms are the texts that must never be seen: the value, its
// escaped forms, and its first half (what a split write leaves pending).
func secretForms() []string {
	j, _ := json.Marshal(plantedSecret)
	return []string{plantedSecret, url.QueryEscape(plantedSecret), string(j[1 : len(j)-1]), plantedSecret[:12]}
}

func assertNoSecret(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, f := range secretForms() {
		if bytes.Contains(b, []byte(f)) {
			t.Errorf("%s holds the secret (as %q):\n%s", what, f, b)
		}
	}
}

// TestSecretEnvRedactedOnTheHost runs a command that prints a secret env
// value in one write, in its escaped forms, and split over two writes with
// the agent killed and restarted between them (the shim carries on). The
// output file, the Output, Status, Wait and ListMarkers answers after the
// reconnect, the agents' logs and every file of the data dir hold
// "[REDACTED]" and never the value; mid-run, the first half of the split
// secret is held back, not on disk.
func TestSecretEnvRedactedOnTheHost(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, agentOpts{data: data})
	gate := filepath.Join(t.TempDir(), "go-on")
	const id = "act_secret_env"
	j, _ := json.Marshal(plantedSecret)
	env := map[string]string{
		"TOKEN": plantedSecret,
		// Not named secret: they carry forms of TOKEN the command prints.
		"ENC_Q": url.QueryEscape(plantedSecret), "ENC_J": string(j[1 : len(j)-1]),
		"HALF1": plantedSecret[:12], "HALF2": plantedSecret[12:],
	}
	script := `printf 'one write: %s|q=%s|j=%s\n' "$TOKEN" "$ENC_Q" "$ENC_J"; printf 'before\n%s' "$HALF1"; ` +
		`i=0; while [ ! -e "` + gate + `" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; ` +
		`printf '%s\nafter\n' "$HALF2"; echo "stderr $TOKEN" >&2; exit 4`
	resp := a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", script}, Env: env, SecretEnv: []string{"TOKEN"}})
	if !resp.GetStarted() {
		t.Fatalf("Run started = false: %v", resp.GetMarker())
	}
	outFile := filepath.Join(execdir.Path(data, id), execdir.OutputFile)
	const head = "one write: [REDACTED]|q=[REDACTED]|j=[REDACTED]\nbefore\n"
	// The shim has read "before\n" and the first half: it wrote what is
	// decided and holds the half back.
	testbin.Eventually(t, "output up to the split secret", func() bool {
		b, _ := os.ReadFile(outFile)
		return string(b) == head
	})
	mid, err := a.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if string(mid.GetData()) != head {
		t.Errorf("Output mid-run = %q, want %q", mid.GetData(), head)
	}
	a.Kill()
	b := startAgent(t, agentOpts{data: data})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m := b.wait(id)
	if m.GetState() != stateExited || m.GetExitCode() != 4 {
		t.Fatalf("marker = %v, want exited 4", m)
	}
	const want = head + "[REDACTED]\nafter\nstderr [REDACTED]\n"
	out, err := b.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if string(out.GetData()) != want || !out.GetEof() {
		t.Errorf("Output = %q eof %v, want %q eof true", out.GetData(), out.GetEof(), want)
	}
	if got, _ := os.ReadFile(outFile); string(got) != want {
		t.Errorf("output file = %q, want %q", got, want)
	}
	if m.GetOutputSize() != int64(len(want)) {
		t.Errorf("output_size = %d, want %d (the redacted size)", m.GetOutputSize(), len(want))
	}
	st, err := b.Client.Status(ctxT(t), &hostagentv1.StatusRequest{ExecutionId: id})
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.Client.ListMarkers(ctxT(t), &hostagentv1.ListMarkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []proto.Message{resp, mid, out, st, list, m} {
		bs, _ := protojson.Marshal(msg)
		assertNoSecret(t, "answer "+string(msg.ProtoReflect().Descriptor().Name()), bs)
	}
	b.Stop()
	assertNoSecret(t, "first agent's log", []byte(a.Log.String()))
	assertNoSecret(t, "second agent's log", []byte(b.Log.String()))
	assertNoSecretInDir(t, data)
}

// assertNoSecretInDir reads every regular file under dir.
func assertNoSecretInDir(t *testing.T, dir string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		bs, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		assertNoSecret(t, "data file "+strings.TrimPrefix(p, dir), bs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("the walk found no files in the data dir: it proves nothing")
	}
}

// TestScriptMarkerOfASecretRunRedacted: a migration script run with a
// secret env value writes it into its script marker's op and failure
// reason; the marker store, the mirror log and the answers hold
// "[REDACTED]" instead.
func TestScriptMarkerOfASecretRunRedacted(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, agentOpts{data: data})
	const id = "act_secret_script"
	script := `"$1" marker begin --op "migrate $TOKEN" && "$1" marker fail --reason "connect failed: password=$TOKEN"; echo "fail=$?"`
	a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", script, "sh", binPath},
		Env: map[string]string{"TOKEN": plantedSecret}, SecretEnv: []string{"TOKEN"}})
	if m := a.wait(id); m.GetState() != stateExited || m.GetExitCode() != 0 {
		t.Fatalf("run marker = %v, want exited 0", m)
	}
	list, err := a.Client.ListMarkers(ctxT(t), &hostagentv1.ListMarkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var script1 *hostagentv1.Marker
	for _, m := range list.GetMarkers() {
		if m.GetState() == hostagentv1.MarkerState_MARKER_STATE_FAILED {
			script1 = m
		}
	}
	if script1.GetOp() != "migrate [REDACTED]" || script1.GetReason() != "connect failed: password=[REDACTED]" {
		t.Errorf("script marker = %v, want op and reason redacted", script1)
	}
	out, err := a.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id})
	// The marker CLI prints the markers it got back: redacted already.
	if err != nil || !strings.HasSuffix(string(out.GetData()), "fail=0\n") || !strings.Contains(string(out.GetData()), `password=[REDACTED]`) {
		t.Errorf("Output = %q, %v; want the redacted markers, then fail=0", out.GetData(), err)
	}
	bs, _ := protojson.Marshal(list)
	assertNoSecret(t, "ListMarkers", bs)
	a.Stop()
	assertNoSecret(t, "agent log", []byte(a.Log.String()))
	assertNoSecretInDir(t, data)
}

// TestSecretEnvAbsentRedactsNothing: a control plane that does not send
// secret_env (older than the field) gets the output as it was printed.
func TestSecretEnvAbsentRedactsNothing(t *testing.T) {
	a := startAgent(t, agentOpts{})
	const id = "act_no_secret_env"
	a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", `printf '%s' "$TOKEN"`}, Env: map[string]string{"TOKEN": plantedSecret}})
	a.wait(id)
	out, err := a.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if string(out.GetData()) != plantedSecret {
		t.Errorf("Output = %q, want the value as printed", out.GetData())
	}
}

// TestSecretEnvMustNameAnEnvEntry: a name env does not set is refused
// before a marker exists, and the refusal quotes no env value.
func TestSecretEnvMustNameAnEnvEntry(t *testing.T) {
	a := startAgent(t, agentOpts{})
	const id = "act_bad_secret_env"
	_, err := a.Client.Run(ctxT(t), &hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/true"},
		Env: map[string]string{"TOKEN": plantedSecret}, SecretEnv: []string{"TOKEN", "MISSING"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"MISSING"`) {
		t.Fatalf("Run = %v, want InvalidArgument naming MISSING", err)
	}
	assertNoSecret(t, "refusal", []byte(err.Error()))
	if _, err := a.Client.Status(ctxT(t), &hostagentv1.StatusRequest{ExecutionId: id}); status.Code(err) != codes.NotFound {
		t.Errorf("Status after the refusal = %v, want NotFound", err)
	}
}

// TestSecretValuesOutsideTheEnvAreIgnored: a secret_values entry that no
// env value secret_env names carries (or an empty one) does not refuse the
// run (a refusal would refuse a sound re-send of a command that already
// ran); it is dropped, and only the values the entries carry are redacted.
func TestSecretValuesOutsideTheEnvAreIgnored(t *testing.T) {
	a := startAgent(t, agentOpts{})
	const id = "act_stray_secret_values"
	resp := a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", `echo "${AUTH#Bearer }"; echo stray-value-1234`},
		Env: map[string]string{"AUTH": "Bearer " + plantedSecret}, SecretEnv: []string{"AUTH"},
		SecretValues: []string{"", "stray-value-1234", plantedSecret, plantedSecret}})
	if !resp.GetStarted() {
		t.Fatalf("Run started = false: %v", resp.GetMarker())
	}
	if m := a.wait(id); m.GetState() != stateExited || m.GetExitCode() != 0 {
		t.Fatalf("marker = %v, want exited 0", m)
	}
	out, err := a.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[REDACTED]\nstray-value-1234\n"; string(out.GetData()) != want {
		t.Errorf("Output = %q, want %q (the bare secret redacted, the stray value not)", out.GetData(), want)
	}
}

// TestScriptResultStaysJSONWhenRedacted: a script whose result carries a
// secret as a bare JSON number (and inside a string) gets a result that
// still parses, with the number turned into the string "[REDACTED]".
func TestScriptResultStaysJSONWhenRedacted(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, agentOpts{data: data})
	const id = "act_secret_result"
	const pin = "73195286"
	script := `"$1" marker begin --op migrate && "$1" marker complete --result "{\"pin\":$PIN,\"dsn\":\"user:$PIN@db\",\"rows\":3}"`
	a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", script, "sh", binPath},
		Env: map[string]string{"PIN": pin}, SecretEnv: []string{"PIN"}})
	if m := a.wait(id); m.GetState() != stateExited || m.GetExitCode() != 0 {
		t.Fatalf("run marker = %v, want exited 0", m)
	}
	list, err := a.Client.ListMarkers(ctxT(t), &hostagentv1.ListMarkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, m := range list.GetMarkers() {
		if m.GetState() == hostagentv1.MarkerState_MARKER_STATE_COMPLETED {
			got = m.GetResultJson()
		}
	}
	const want = `{"pin":"[REDACTED]","dsn":"user:[REDACTED]@db","rows":3}`
	if got != want {
		t.Errorf("script result = %s, want %s", got, want)
	}
	if strings.Contains(got, pin) {
		t.Errorf("script result %s holds the secret", got)
	}
}
