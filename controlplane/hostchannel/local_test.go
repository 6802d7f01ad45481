package hostchannel

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/testing/hostagenttest"
	"github.com/latchhq/latch/internal/testing/testbin"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func TestLocalDispatchRunsOnce(t *testing.T) {
	a := startAgent(t, "", "")
	c := newChannel(t, Config{})
	file := filepath.Join(t.TempDir(), "effects")
	call := newCall("act_local_once", localTarget(a.Socket), appendArgv(file, "ran")...)

	first := c.Dispatch(ctxT(t), call)
	want := engine.Attempt{
		Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Reason: "exit status 0",
		Result: &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_PROCESS, Exited: true, ExitCode: 0, Body: []byte("ran\n"), Summary: "exit status 0"},
	}
	if diff := cmp.Diff(want, first, protocmp.Transform()); diff != "" {
		t.Fatalf("Dispatch() mismatch (-want +got):\n%s", diff)
	}
	m1 := a.marker(t, "act_local_once")

	second := c.Dispatch(ctxT(t), call)
	if diff := cmp.Diff(want, second, protocmp.Transform()); diff != "" {
		t.Errorf("second Dispatch() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(m1, a.marker(t, "act_local_once"), protocmp.Transform()); diff != "" {
		t.Errorf("marker changed by the second Dispatch (-first +after):\n%s", diff)
	}
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line", got)
	}

	q := c.Query(ctxT(t), call)
	if diff := cmp.Diff(want, q, protocmp.Transform()); diff != "" {
		t.Errorf("Query() after completion mismatch (-want +got):\n%s", diff)
	}
}

func TestLocalOutcomes(t *testing.T) {
	a := startAgent(t, "", "")
	c := newChannel(t, Config{OutputCap: 8})
	tests := []struct {
		name      string
		argv      []string
		outcome   recordv1.Outcome
		exitCode  int32
		signal    string
		body      string
		truncated bool
	}{
		{name: "exit 0", argv: []string{"/bin/sh", "-c", "printf ok"}, outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, body: "ok"},
		{name: "exit 3", argv: []string{"/bin/sh", "-c", "echo no; exit 3"}, outcome: recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, exitCode: 3, body: "no\n"},
		{name: "signal", argv: []string{"/bin/sh", "-c", "kill -KILL $$"}, outcome: recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, exitCode: -1, signal: "KILL"},
		{name: "output capped", argv: []string{"/bin/sh", "-c", "printf 0123456789abcdef"}, outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, body: "01234567", truncated: true},
		{name: "stderr captured", argv: []string{"/bin/sh", "-c", "echo err >&2"}, outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, body: "err\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := newCall("act_outcome_"+string(rune('a'+i)), localTarget(a.Socket), tt.argv...)
			got := c.Dispatch(ctxT(t), call)
			if got.Class != engine.Observed || got.Outcome != tt.outcome {
				t.Fatalf("Dispatch(%q) = %s %v (%s), want Observed %v", tt.argv, className(got.Class), got.Outcome, got.Reason, tt.outcome)
			}
			r := got.Result
			if r.GetExitCode() != tt.exitCode || r.GetSignal() != tt.signal || string(r.GetBody()) != tt.body || r.GetBodyTruncated() != tt.truncated {
				t.Errorf("Dispatch(%q) result = exit %d signal %q body %q truncated %v; want exit %d signal %q body %q truncated %v",
					tt.argv, r.GetExitCode(), r.GetSignal(), r.GetBody(), r.GetBodyTruncated(), tt.exitCode, tt.signal, tt.body, tt.truncated)
			}
		})
	}
}

func TestLocalEnvAndCwd(t *testing.T) {
	a := startAgent(t, "", "")
	c := newChannel(t, Config{})
	dir := t.TempDir()
	call := newCall("act_env_cwd", localTarget(a.Socket), "/bin/sh", "-c", `pwd; echo "$GREETING"; echo "$LATCH_EXECUTION_ID"`)
	// A cwd argument names one directory under the template's literal prefix.
	call.Tool.Cwd = filepath.Dir(dir) + "/{{dir}}"
	call.Tool.Env = map[string]string{"GREETING": "{{greeting}}"}
	call.Arguments = map[string]any{"dir": filepath.Base(dir), "greeting": "hello; $(id)"}
	got := c.Dispatch(ctxT(t), call)
	want := dir + "\nhello; $(id)\nact_env_cwd\n"
	if got.Class != engine.Observed || string(got.Result.GetBody()) != want {
		t.Errorf("Dispatch() = %s %q (%s), want Observed %q", className(got.Class), got.Result.GetBody(), got.Reason, want)
	}
}

func TestLocalQueryUnknownID(t *testing.T) {
	a := startAgent(t, "", "")
	c := newChannel(t, Config{})
	got := c.Query(ctxT(t), newCall("act_never_seen", localTarget(a.Socket), "true"))
	if got.Class != engine.Absent || got.Durable {
		t.Errorf("Query(unknown id) = %s durable=%v (%s), want Absent, not durable (a Run on its way would still create the marker)", className(got.Class), got.Durable, got.Reason)
	}
}

func TestLocalRefusals(t *testing.T) {
	a := startAgent(t, "", "")
	missing := filepath.Join(hostagenttest.ShortDir(t), "missing.sock")
	c := newChannel(t, Config{})
	tests := []struct {
		name        string
		call        func() (id string, sock string, argv []string)
		template    string
		dispatch    engine.AttemptClass
		query       engine.AttemptClass
		wantMention string
	}{
		{name: "agent not running", call: func() (string, string, []string) { return "act_nosock", missing, []string{"true"} },
			dispatch: engine.NotSent, query: engine.Unknown, wantMention: "latch-hostagent runs"},
		{name: "id the agent refuses", call: func() (string, string, []string) { return "bad id/../x", a.Socket, []string{"true"} },
			dispatch: engine.NotSent, query: engine.Absent, wantMention: "refused"},
		{name: "template references a missing argument", call: func() (string, string, []string) { return "act_tmpl", a.Socket, []string{"echo", "{{nope}}"} },
			dispatch: engine.NotSent, query: engine.Absent, wantMention: "command template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, sock, argv := tt.call()
			call := newCall(id, localTarget(sock), argv...)
			got := c.Dispatch(ctxT(t), call)
			if got.Class != tt.dispatch || !strings.Contains(got.Reason, tt.wantMention) {
				t.Errorf("Dispatch() = %s (%s), want %s mentioning %q", className(got.Class), got.Reason, className(tt.dispatch), tt.wantMention)
			}
			if q := c.Query(ctxT(t), call); q.Class != tt.query {
				t.Errorf("Query() = %s (%s), want %s", className(q.Class), q.Reason, className(tt.query))
			}
		})
	}
}

// TestLocalAgentKilledMidCommand kills the agent while a command runs: the
// dispatch cannot see the outcome (Unknown), and after a restart the marker
// answers for it; the command ran exactly once.
func TestLocalAgentKilledMidCommand(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, data, "")
	c := newChannel(t, Config{WaitSlice: 200e6})
	dir := t.TempDir()
	file, gate := filepath.Join(dir, "effects"), filepath.Join(dir, "gate")
	const id = "act_agent_killed"
	call := newCall(id, localTarget(a.Socket), gatedAppendArgv(gate, file)...)

	done := make(chan engine.Attempt, 1)
	go func() { done <- c.Dispatch(ctxT(t), call) }()
	// Past the shim's gate, not only marked running: an agent killed
	// before it opens the gate leaves a command that never runs.
	testbin.Eventually(t, "command past the gate", func() bool {
		_, err := os.Stat(file + ".began")
		return err == nil
	})
	a.Kill()
	got := <-done
	if got.Class != engine.Unknown {
		t.Fatalf("Dispatch() with the agent killed = %s (%s), want Unknown", className(got.Class), got.Reason)
	}
	if q := c.Query(ctxT(t), call); q.Class != engine.Unknown {
		t.Errorf("Query() with the agent down = %s (%s), want Unknown", className(q.Class), q.Reason)
	}

	b := startAgent(t, data, a.Socket)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	q := queryUntilSettled(t, c, call)
	if q.Class != engine.Observed || q.Outcome != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("Query() after restart = %s %v (%s), want Observed succeeded", className(q.Class), q.Outcome, q.Reason)
	}
	// A re-dispatch (an idempotency_key replay) starts nothing.
	if again := c.Dispatch(ctxT(t), call); again.Class != engine.Observed {
		t.Errorf("Dispatch() after restart = %s (%s), want Observed", className(again.Class), again.Reason)
	}
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line\nagent log:\n%s", got, b.Log.String())
	}
}

func TestClassifyMarkers(t *testing.T) {
	c := newChannel(t, Config{})
	st := func(s hostagentv1.MarkerState) *hostagentv1.Marker {
		return &hostagentv1.Marker{ExecutionId: "act_x", State: s, Reason: "why", ResultJson: `{"rows":3}`, Pid: 42}
	}
	tests := []struct {
		state            hostagentv1.MarkerState
		dispatch, query  engine.AttemptClass
		outcome          recordv1.Outcome
		wantReasonPhrase string
	}{
		{hostagentv1.MarkerState_MARKER_STATE_STARTING, engine.Unknown, engine.Unknown, 0, "still running"},
		{hostagentv1.MarkerState_MARKER_STATE_RUNNING, engine.Unknown, engine.Unknown, 0, "pid 42"},
		{hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, engine.NotSent, engine.Absent, 0, "nothing ran"},
		{hostagentv1.MarkerState_MARKER_STATE_LOST, engine.Unsupported, engine.Unsupported, 0, "outcome is lost"},
		{hostagentv1.MarkerState_MARKER_STATE_BEGUN, engine.Unknown, engine.Unknown, 0, "still running"},
		{hostagentv1.MarkerState_MARKER_STATE_COMPLETED, engine.Observed, engine.Observed, recordv1.Outcome_OUTCOME_SUCCEEDED, "completed"},
		{hostagentv1.MarkerState_MARKER_STATE_FAILED, engine.Observed, engine.Observed, recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, "failed: why"},
		{hostagentv1.MarkerState_MARKER_STATE_UNSPECIFIED, engine.Unknown, engine.Unknown, 0, "upgrade"},
	}
	for _, tt := range tests {
		t.Run(tt.state.String(), func(t *testing.T) {
			for _, q := range []bool{false, true} {
				want := tt.dispatch
				if q {
					want = tt.query
				}
				got := c.classify(ctxT(t), nil, "db-01", st(tt.state), q)
				if got.Class != want || got.Outcome != tt.outcome || !strings.Contains(got.Reason, tt.wantReasonPhrase) {
					t.Errorf("classify(%v, query=%v) = %s %v (%s), want %s %v mentioning %q",
						tt.state, q, className(got.Class), got.Outcome, got.Reason, className(want), tt.outcome, tt.wantReasonPhrase)
				}
			}
		})
	}
	if got := c.classify(ctxT(t), nil, "db-01", st(hostagentv1.MarkerState_MARKER_STATE_COMPLETED), true); string(got.Result.GetBody()) != `{"rows":3}` {
		t.Errorf("classify(completed) body = %q, want the marker's result_json", got.Result.GetBody())
	}
}

// TestLocalStopWaiting covers the two ways Dispatch stops waiting for a
// running command (the engine shutting down, MaxWait passing): both leave
// the outcome Unknown, and the marker answers later.
func TestLocalStopWaiting(t *testing.T) {
	a := startAgent(t, "", "")
	tests := []struct {
		name    string
		cfg     Config
		cancel  bool
		mention string
	}{
		// The cancel can land while Run's answer is still on its way (the
		// marker is running before Run returns) or in the Wait that
		// follows; either way the outcome is unknown and nothing is re-sent.
		{name: "engine shutdown", cfg: Config{WaitSlice: 100e6}, cancel: true, mention: "stopped waiting|may have reached the host agent"},
		{name: "max wait", cfg: Config{WaitSlice: 100e6, MaxWait: 300e6}, mention: "still running"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChannel(t, tt.cfg)
			dir := t.TempDir()
			file, gate := filepath.Join(dir, "effects"), filepath.Join(dir, "gate")
			id := "act_stop_waiting_" + string(rune('a'+i))
			call := newCall(id, localTarget(a.Socket), gatedAppendArgv(gate, file)...)
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			done := make(chan engine.Attempt, 1)
			go func() { done <- c.Dispatch(ctx, call) }()
			testbin.Eventually(t, "command running", func() bool {
				return a.marker(t, id).GetState() == hostagentv1.MarkerState_MARKER_STATE_RUNNING
			})
			if tt.cancel {
				cancel()
			}
			got := <-done
			if got.Class != engine.Unknown || !regexp.MustCompile(tt.mention).MatchString(got.Reason) {
				t.Errorf("Dispatch() = %s (%s), want Unknown mentioning %q", className(got.Class), got.Reason, tt.mention)
			}
			if q := c.Query(ctxT(t), call); q.Class != engine.Unknown || !strings.Contains(q.Reason, "still running") {
				t.Errorf("Query() while running = %s (%s), want Unknown still running", className(q.Class), q.Reason)
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if q := queryUntilSettled(t, c, call); q.Class != engine.Observed {
				t.Errorf("Query() after the command ended = %s (%s), want Observed", className(q.Class), q.Reason)
			}
			if got := testbin.ReadLines(t, file); len(got) != 1 {
				t.Errorf("effects = %q, want exactly one line", got)
			}
		})
	}
}

// TestLocalRecoveryDispatchDoesNotWait checks that a replay by the engine's
// recovery (Call.Recovery) answers at once for a running command, and starts
// nothing a second time.
func TestLocalRecoveryDispatchDoesNotWait(t *testing.T) {
	a := startAgent(t, "", "")
	c := newChannel(t, Config{WaitSlice: 100e6})
	dir := t.TempDir()
	file, gate := filepath.Join(dir, "effects"), filepath.Join(dir, "gate")
	const id = "act_recovery_replay"
	call := newCall(id, localTarget(a.Socket), gatedAppendArgv(gate, file)...)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan engine.Attempt, 1)
	go func() { done <- c.Dispatch(ctx, call) }()
	testbin.Eventually(t, "command running", func() bool {
		return a.marker(t, id).GetState() == hostagentv1.MarkerState_MARKER_STATE_RUNNING
	})

	replay := call
	replay.Recovery = true
	if got := c.Dispatch(ctxT(t), replay); got.Class != engine.Unknown || !strings.Contains(got.Reason, "still running") {
		t.Errorf("recovery Dispatch() of a running command = %s (%s), want Unknown still running", className(got.Class), got.Reason)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.Class != engine.Observed {
		t.Errorf("first Dispatch() = %s (%s), want Observed", className(got.Class), got.Reason)
	}
	cancel()
	if got := c.Dispatch(ctxT(t), replay); got.Class != engine.Observed {
		t.Errorf("recovery Dispatch() after exit = %s (%s), want Observed", className(got.Class), got.Reason)
	}
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line", got)
	}
}
