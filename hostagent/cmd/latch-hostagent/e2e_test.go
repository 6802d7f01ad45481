package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/hostagent/proc"
	"github.com/latchhq/latch/internal/testing/hostagenttest"
	"github.com/latchhq/latch/internal/testing/testbin"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

const (
	stateExited     = hostagentv1.MarkerState_MARKER_STATE_EXITED
	stateRunning    = hostagentv1.MarkerState_MARKER_STATE_RUNNING
	stateNotStarted = hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED
)

func TestRunTwiceRunsOnce(t *testing.T) {
	a := startAgent(t, agentOpts{})
	file := filepath.Join(t.TempDir(), "effects")
	req := &hostagentv1.RunRequest{ExecutionId: "act_twice", Argv: appendCmd(file, "ran")}
	first := a.run(req)
	if !first.GetStarted() || first.GetMarker().GetState() != stateRunning {
		t.Fatalf("first Run = started %v state %v, want started running", first.GetStarted(), first.GetMarker().GetState())
	}
	if first.GetMarker().GetPid() <= 0 || first.GetMarker().GetStartTicks() == 0 || first.GetMarker().GetBootId() == "" {
		t.Errorf("running marker lacks identity: %v", first.GetMarker())
	}
	m := a.wait("act_twice")
	second := a.run(req)
	if second.GetStarted() {
		t.Errorf("second Run started = true, want false")
	}
	if second.GetMarker().GetState() != stateExited || second.GetMarker().GetExitCode() != 0 {
		t.Errorf("second Run marker = %v, want exited 0", second.GetMarker())
	}
	if m.GetPeerUid() != uint32(os.Getuid()) {
		t.Errorf("peer_uid = %d, want %d", m.GetPeerUid(), os.Getuid())
	}
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line", got)
	}
}

func TestConcurrentRunsRunOnce(t *testing.T) {
	a := startAgent(t, agentOpts{})
	file := filepath.Join(t.TempDir(), "effects")
	req := &hostagentv1.RunRequest{ExecutionId: "act_concurrent", Argv: appendCmd(file, "ran")}
	const n = 10
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := a.Client.Run(ctxT(t), req)
			if err != nil {
				t.Errorf("Run: %v", err)
				return
			}
			if resp.GetStarted() {
				mu.Lock()
				started++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if started != 1 {
		t.Errorf("%d of %d concurrent Runs started the command, want 1", started, n)
	}
	if m := a.wait("act_concurrent"); m.GetState() != stateExited {
		t.Errorf("marker = %v, want exited", m)
	}
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line", got)
	}
}

func TestAgentKilledMidCommand(t *testing.T) {
	tests := []struct {
		name string
		// restartAfterExit waits for the command to finish before restarting
		// (status file picked up at start); otherwise the agent restarts while
		// the command still runs (a watcher re-attaches).
		restartAfterExit bool
	}{
		{name: "restart while running"},
		{name: "restart after exit", restartAfterExit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			a := startAgent(t, agentOpts{data: data})
			dir := t.TempDir()
			file := filepath.Join(dir, "effects")
			gate := filepath.Join(dir, "go-on")
			// The command waits for the test's go-ahead, so the agent is
			// surely dead while it runs; then it writes and exits 7.
			script := `i=0; while [ ! -e "` + gate + `" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; echo ran >> "` + file + `"; exit 7`
			id := "act_crash_" + strconv.FormatBool(tt.restartAfterExit)
			resp := a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", script}})
			if !resp.GetStarted() {
				t.Fatalf("Run started = false")
			}
			a.Kill()
			var b *agentProc
			if tt.restartAfterExit {
				if err := os.WriteFile(gate, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				testbin.Eventually(t, "status file", func() bool {
					_, err := execdir.ReadStatus(execdir.Path(data, id))
					return err == nil
				})
				b = startAgent(t, agentOpts{data: data})
			} else {
				b = startAgent(t, agentOpts{data: data})
				if !strings.Contains(b.Log.String(), "re-attached to a running command") {
					t.Errorf("restarted agent did not re-attach to the running command:\n%s", b.Log.String())
				}
				if err := os.WriteFile(gate, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			m := b.wait(id)
			if m.GetState() != stateExited || m.GetExitCode() != 7 {
				t.Errorf("marker after restart = %v, want exited 7", m)
			}
			again := b.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", script}})
			if again.GetStarted() {
				t.Errorf("Run after restart started = true, want false")
			}
			if got := testbin.ReadLines(t, file); len(got) != 1 {
				t.Errorf("effects = %q, want exactly one line", got)
			}
		})
	}
}

func TestShimKilledBeforeGateIsNotStarted(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, agentOpts{data: data, env: []string{hostagenttest.ShimPauseEnv + "=50s"}})
	file := filepath.Join(t.TempDir(), "effects")
	const id = "act_shim_killed"
	type result struct {
		resp *hostagentv1.RunResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := a.Client.Run(ctxT(t), &hostagentv1.RunRequest{ExecutionId: id, Argv: appendCmd(file, "ran")})
		done <- result{resp, err}
	}()
	dir := execdir.Path(data, id)
	var cmdID proc.Identity
	testbin.Eventually(t, "command waiting at the gate", func() bool {
		var err error
		cmdID, err = execdir.ReadIdentity(dir, execdir.CommandFile)
		return err == nil
	})
	shimID, err := execdir.ReadIdentity(dir, execdir.ShimFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(shimID.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Run = %v", r.err)
	}
	if r.resp.GetStarted() || r.resp.GetMarker().GetState() != stateNotStarted {
		t.Errorf("Run = started %v marker %v, want not started", r.resp.GetStarted(), r.resp.GetMarker())
	}
	testbin.Eventually(t, "gated command to exit", func() bool {
		ok, _ := proc.Alive(cmdID)
		return !ok
	})
	if got := testbin.ReadLines(t, file); len(got) != 0 {
		t.Errorf("effects = %q, want none: the command must never run", got)
	}
	st, err := a.Client.Status(ctxT(t), &hostagentv1.StatusRequest{ExecutionId: id})
	if err != nil || st.GetMarker().GetState() != stateNotStarted {
		t.Errorf("Status = %v, %v, want not_started", st.GetMarker(), err)
	}
}

func TestAgentRestartWithShimAtGateIsNotStarted(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, agentOpts{data: data, env: []string{hostagenttest.ShimPauseEnv + "=1s"}})
	file := filepath.Join(t.TempDir(), "effects")
	const id = "act_agent_killed_at_gate"
	go func() {
		_, _ = a.Client.Run(ctxT(t), &hostagentv1.RunRequest{ExecutionId: id, Argv: appendCmd(file, "ran")})
	}()
	dir := execdir.Path(data, id)
	var cmdID proc.Identity
	testbin.Eventually(t, "command waiting at the gate", func() bool {
		var err error
		cmdID, err = execdir.ReadIdentity(dir, execdir.CommandFile)
		return err == nil
	})
	a.Kill()
	b := startAgent(t, agentOpts{data: data})
	m := b.wait(id)
	if m.GetState() != stateNotStarted {
		t.Errorf("marker = %v, want not_started", m)
	}
	testbin.Eventually(t, "gated command to exit", func() bool {
		ok, _ := proc.Alive(cmdID)
		return !ok
	})
	if got := testbin.ReadLines(t, file); len(got) != 0 {
		t.Errorf("effects = %q, want none", got)
	}
}

// TestShimKilledMidCommandIsLost: the command ran but nobody could record its
// exit status, so the marker says lost, and the command is not run again.
func TestShimKilledMidCommandIsLost(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, agentOpts{data: data})
	dir := t.TempDir()
	file := filepath.Join(dir, "effects")
	gate := filepath.Join(dir, "go-on")
	began := filepath.Join(dir, "began")
	const id = "act_shim_killed_mid"
	// The command marks that it is past the shim's gate before it waits:
	// killing the shim earlier would close the gate and the command would
	// never run.
	argv := []string{"/bin/sh", "-c", `: > "` + began + `"; i=0; while [ ! -e "` + gate + `" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; echo ran >> "` + file + `"`}
	if resp := a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: argv}); !resp.GetStarted() {
		t.Fatalf("Run started = false")
	}
	testbin.Eventually(t, "the command past the gate", func() bool {
		_, err := os.Stat(began)
		return err == nil
	})
	shimID, err := execdir.ReadIdentity(execdir.Path(data, id), execdir.ShimFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(shimID.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m := a.wait(id)
	if m.GetState() != hostagentv1.MarkerState_MARKER_STATE_LOST {
		t.Errorf("marker = %v, want lost", m)
	}
	if again := a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: argv}); again.GetStarted() {
		t.Errorf("Run of a lost execution started = true, want false")
	}
	testbin.Eventually(t, "the command's effect", func() bool { return len(testbin.ReadLines(t, file)) > 0 })
	if got := testbin.ReadLines(t, file); len(got) != 1 {
		t.Errorf("effects = %q, want exactly one line", got)
	}
}

func TestExitStatuses(t *testing.T) {
	a := startAgent(t, agentOpts{})
	tests := []struct {
		name       string
		argv       []string
		timeoutMs  int64
		wantState  hostagentv1.MarkerState
		wantCode   int32
		wantSignal string
		wantReason string
	}{
		{name: "zero", argv: []string{"true"}, wantState: stateExited},
		{name: "code", argv: []string{"/bin/sh", "-c", "exit 42"}, wantState: stateExited, wantCode: 42},
		{name: "killed by signal", argv: []string{"/bin/sh", "-c", "kill -KILL $$"}, wantState: stateExited, wantCode: -1, wantSignal: "SIGKILL"},
		{name: "timeout kills the group", argv: []string{"/bin/sh", "-c", "sleep 30 & sleep 30"}, timeoutMs: 200,
			wantState: stateExited, wantCode: -1, wantSignal: "SIGTERM", wantReason: "timed out"},
		{name: "not found", argv: []string{"/nonexistent/cmd"}, wantState: stateExited, wantCode: 127},
		{name: "bad cwd", argv: []string{"true"}, wantState: stateNotStarted, wantReason: "start command"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "act_exit_" + strconv.Itoa(i)
			req := &hostagentv1.RunRequest{ExecutionId: id, Argv: tt.argv, TimeoutMs: tt.timeoutMs}
			if tt.name == "bad cwd" {
				req.Cwd = "/nonexistent/dir"
			}
			a.run(req)
			m := a.wait(id)
			if m.GetState() != tt.wantState || m.GetExitCode() != tt.wantCode || m.GetSignal() != tt.wantSignal {
				t.Errorf("marker = %v, want state %v code %d signal %q", m, tt.wantState, tt.wantCode, tt.wantSignal)
			}
			if !strings.Contains(m.GetReason(), tt.wantReason) {
				t.Errorf("reason = %q, want it to contain %q", m.GetReason(), tt.wantReason)
			}
		})
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	a := startAgent(t, agentOpts{})
	pidFile := filepath.Join(t.TempDir(), "bg.pid")
	const id = "act_timeout_group"
	a.run(&hostagentv1.RunRequest{
		ExecutionId: id,
		Argv:        []string{"/bin/sh", "-c", `sleep 30 & echo $! > "` + pidFile + `"; wait`},
		TimeoutMs:   300,
	})
	m := a.wait(id)
	if m.GetSignal() != "SIGTERM" || !strings.Contains(m.GetReason(), "timed out") {
		t.Errorf("marker = %v, want killed by SIGTERM on timeout", m)
	}
	lines := testbin.ReadLines(t, pidFile)
	if len(lines) != 1 {
		t.Fatalf("background pid file = %q", lines)
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "background child of the timed-out command to die", func() bool {
		st, err := proc.ReadStat(pid)
		return err != nil || st.State == 'Z'
	})
}

func TestRunRejectsBadRequests(t *testing.T) {
	a := startAgent(t, agentOpts{})
	tests := []struct {
		name string
		req  *hostagentv1.RunRequest
	}{
		{"no id", &hostagentv1.RunRequest{Argv: []string{"true"}}},
		{"path id", &hostagentv1.RunRequest{ExecutionId: "../x", Argv: []string{"true"}}},
		{"no argv", &hostagentv1.RunRequest{ExecutionId: "act_x"}},
		{"relative cwd", &hostagentv1.RunRequest{ExecutionId: "act_x", Argv: []string{"true"}, Cwd: "tmp"}},
		{"bad env", &hostagentv1.RunRequest{ExecutionId: "act_x", Argv: []string{"true"}, Env: map[string]string{"A=B": "c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Client.Run(ctxT(t), tt.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("Run(%v) = %v, want InvalidArgument", tt.req, err)
			}
		})
	}
	if _, err := a.Client.Status(ctxT(t), &hostagentv1.StatusRequest{ExecutionId: "act_x"}); status.Code(err) != codes.NotFound {
		t.Errorf("Status(act_x) after refused Runs = %v, want NotFound (nothing recorded)", err)
	}
}

func TestOutputCappedAndReadableFromOffset(t *testing.T) {
	a := startAgent(t, agentOpts{flags: []string{"--output-cap", "1000"}})
	const id = "act_output"
	// 5000 bytes: "0123456789" × 500, on stdout and stderr alternately.
	script := `i=0; while [ $i -lt 250 ]; do printf 0123456789; printf 0123456789 >&2; i=$((i+1)); done`
	a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", script}, Env: map[string]string{"X": "1"}})
	m := a.wait(id)
	if m.GetOutputSize() != 1000 || !m.GetOutputTruncated() {
		t.Errorf("marker output_size %d truncated %v, want 1000 true", m.GetOutputSize(), m.GetOutputTruncated())
	}
	want := bytes.Repeat([]byte("0123456789"), 100)
	tests := []struct {
		offset, limit int64
		want          []byte
		eof           bool
	}{
		{0, 300, want[:300], false},
		{900, 0, want[900:], true},
		{995, 3, want[995:998], false},
		{1000, 10, nil, true},
		{5000, 10, nil, true},
	}
	for _, tt := range tests {
		resp, err := a.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id, Offset: tt.offset, Limit: int32(tt.limit)})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(resp.GetData(), tt.want) || resp.GetEof() != tt.eof || !resp.GetTruncated() {
			t.Errorf("Output(%d, %d) = %q eof %v truncated %v, want %q eof %v truncated true",
				tt.offset, tt.limit, resp.GetData(), resp.GetEof(), resp.GetTruncated(), tt.want, tt.eof)
		}
		if wantNext := tt.offset + int64(len(tt.want)); resp.GetNextOffset() != wantNext {
			t.Errorf("Output(%d, %d) next_offset = %d, want %d", tt.offset, tt.limit, resp.GetNextOffset(), wantNext)
		}
	}
}

func TestCommandSeesExecutionIDAndEnv(t *testing.T) {
	a := startAgent(t, agentOpts{})
	const id = "act_01HZZZENVTEST"
	a.run(&hostagentv1.RunRequest{
		ExecutionId: id,
		Argv:        []string{"/bin/sh", "-c", `printf '%s|%s|%s' "$LATCH_EXECUTION_ID" "$GREETING" "$(pwd)"`},
		Env:         map[string]string{"GREETING": "hi", "LATCH_EXECUTION_ID": "spoofed"},
		Cwd:         "/tmp",
	})
	a.wait(id)
	resp, err := a.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.GetData()), id+"|hi|/tmp"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// TestMigrationScript runs a shell script through the agent; the script uses
// the marker CLI with the ID the agent exported.
func TestMigrationScript(t *testing.T) {
	a := startAgent(t, agentOpts{})
	script := `
B="$1"
"$B" marker begin --op add-column; echo "begin=$?"
"$B" marker begin; echo "again=$?"
"$B" marker complete --result '{"rows":3}'; echo "complete=$?"
"$B" marker begin; echo "after-complete=$?"
"$B" marker begin other-step; echo "other=$?"
"$B" marker fail other-step --reason "disk full"; echo "fail=$?"
"$B" marker begin other-step; echo "after-fail=$?"
"$B" marker complete never-begun; echo "unknown=$?"
"$B" marker complete --result 'not json'; echo "badjson=$?"
"$B" marker begin --socket /nonexistent.sock x; echo "unreachable=$?"
`
	path := filepath.Join(t.TempDir(), "migrate.sh")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	const id = "act_migration"
	a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", path, binPath}})
	if m := a.wait(id); m.GetState() != stateExited {
		t.Fatalf("script marker = %v, want exited", m)
	}
	resp, err := a.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(resp.GetData()), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") && !strings.HasPrefix(k, "{") {
			got[k] = v
		}
	}
	want := map[string]string{
		"begin":          strconv.Itoa(hostagent.ExitOK),
		"again":          strconv.Itoa(hostagent.ExitInProgress),
		"complete":       strconv.Itoa(hostagent.ExitOK),
		"after-complete": strconv.Itoa(hostagent.ExitAlreadyCompleted),
		"other":          strconv.Itoa(hostagent.ExitOK),
		"fail":           strconv.Itoa(hostagent.ExitOK),
		"after-fail":     strconv.Itoa(hostagent.ExitFailedBefore),
		"unknown":        strconv.Itoa(hostagent.ExitNoMarker),
		"badjson":        strconv.Itoa(hostagent.ExitUsage),
		"unreachable":    strconv.Itoa(hostagent.ExitUnreachable),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("script exit codes (-want +got):\n%s\noutput:\n%s", diff, resp.GetData())
	}
	// The run marker and the script marker of one ID live side by side.
	st, err := a.Client.Status(ctxT(t), &hostagentv1.StatusRequest{ExecutionId: id})
	if err != nil || st.GetMarker().GetState() != stateExited {
		t.Errorf("Status(%s) = %v, %v, want the run marker (exited)", id, st.GetMarker(), err)
	}
	list, err := a.Client.ListMarkers(ctxT(t), &hostagentv1.ListMarkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, m := range list.GetMarkers() {
		states = append(states, m.GetExecutionId()+":"+m.GetState().String())
	}
	wantStates := []string{
		"act_migration:MARKER_STATE_EXITED",
		"act_migration:MARKER_STATE_COMPLETED",
		"other-step:MARKER_STATE_FAILED",
	}
	if diff := cmp.Diff(wantStates, states); diff != "" {
		t.Errorf("ListMarkers (-want +got):\n%s", diff)
	}
}

func TestMarkerCLIUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		want int
	}{
		{"no command", nil, nil, hostagent.ExitUsage},
		{"unknown command", []string{"frobnicate"}, nil, hostagent.ExitUsage},
		{"no id and no env", []string{"marker", "begin"}, []string{"LATCH_EXECUTION_ID="}, hostagent.ExitUsage},
		{"fail without reason", []string{"marker", "fail", "x"}, nil, hostagent.ExitUsage},
		{"unknown verb", []string{"marker", "frob", "x"}, nil, hostagent.ExitUsage},
		{"unreachable", []string{"marker", "status", "x", "--socket", "/nonexistent/agent.sock"}, nil, hostagent.ExitUnreachable},
		{"serve without data", []string{"serve"}, nil, hostagent.ExitUsage},
		{"help", []string{"help"}, nil, hostagent.ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binPath, tt.args...)
			cmd.Env = append(os.Environ(), tt.env...)
			out, _ := cmd.CombinedOutput()
			if got := cmd.ProcessState.ExitCode(); got != tt.want {
				t.Errorf("latch-hostagent %q exit = %d, want %d\n%s", tt.args, got, tt.want, out)
			}
		})
	}
}

func TestHelpDocumentsEveryExitCode(t *testing.T) {
	out, err := exec.Command(binPath, "help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{hostagent.ExitOK, hostagent.ExitRuntime, hostagent.ExitUsage, hostagent.ExitUnreachable,
		hostagent.ExitAlreadyCompleted, hostagent.ExitInProgress, hostagent.ExitFailedBefore, hostagent.ExitNoMarker} {
		if !strings.Contains(string(out), "\n  "+strconv.Itoa(code)+" ") {
			t.Errorf("help text does not document exit code %d:\n%s", code, out)
		}
	}
}

func TestCorruptStoreMovedAsideAndRebuilt(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, agentOpts{data: data})
	a.run(&hostagentv1.RunRequest{ExecutionId: "act_before", Argv: []string{"/bin/sh", "-c", "exit 3"}})
	a.wait("act_before")
	for _, args := range [][]string{
		{"marker", "begin", "mig_done", "--socket", a.Socket},
		{"marker", "complete", "mig_done", "--socket", a.Socket},
		{"marker", "begin", "mig_open", "--socket", a.Socket},
	} {
		if out, err := exec.Command(binPath, args...).CombinedOutput(); err != nil {
			t.Fatalf("latch-hostagent %q: %v\n%s", args, err, out)
		}
	}
	a.Stop()
	manifest := filepath.Join(data, "markers", "MANIFEST")
	if err := os.WriteFile(manifest, []byte("garbage, not a badger manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startAgent(t, agentOpts{data: data})
	aside, _ := filepath.Glob(filepath.Join(data, "markers.corrupt-*"))
	if len(aside) != 1 {
		t.Errorf("moved-aside stores = %q, want one", aside)
	}
	if !strings.Contains(b.Log.String(), "MARKER STORE WOULD NOT OPEN") {
		t.Errorf("agent log does not say loudly that the store was moved aside:\n%s", b.Log.String())
	}
	st, err := b.Client.Status(ctxT(t), &hostagentv1.StatusRequest{ExecutionId: "act_before"})
	if err != nil {
		t.Fatal(err)
	}
	if m := st.GetMarker(); m.GetState() != stateExited || m.GetExitCode() != 3 {
		t.Errorf("rebuilt marker = %v, want exited 3", m)
	}
	if resp := b.run(&hostagentv1.RunRequest{ExecutionId: "act_before", Argv: []string{"true"}}); resp.GetStarted() {
		t.Errorf("Run of a rebuilt execution started = true, want false")
	}
	for _, tt := range []struct {
		id   string
		want int
	}{{"mig_done", hostagent.ExitAlreadyCompleted}, {"mig_open", hostagent.ExitInProgress}} {
		cmd := exec.Command(binPath, "marker", "begin", tt.id, "--socket", b.Socket)
		out, _ := cmd.CombinedOutput()
		if got := cmd.ProcessState.ExitCode(); got != tt.want {
			t.Errorf("marker begin %s after rebuild exit = %d, want %d\n%s", tt.id, got, tt.want, out)
		}
	}
	b.run(&hostagentv1.RunRequest{ExecutionId: "act_after", Argv: []string{"true"}})
	if m := b.wait("act_after"); m.GetState() != stateExited {
		t.Errorf("new run on the fresh store = %v, want exited", m)
	}
}

func TestSocketMode(t *testing.T) {
	a := startAgent(t, agentOpts{})
	fi, err := os.Stat(a.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode = %v, want socket with 0660", fi.Mode())
	}
}

func TestSecondAgentOnSameDataRefused(t *testing.T) {
	a := startAgent(t, agentOpts{})
	cmd := exec.Command(binPath, "serve", "--data", a.Data, "--socket", filepath.Join(hostagenttest.ShortDir(t), "b.sock"))
	out, _ := cmd.CombinedOutput()
	if got := cmd.ProcessState.ExitCode(); got != hostagent.ExitRuntime || !strings.Contains(string(out), "in use") {
		t.Errorf("second agent exit = %d, want %d with 'in use'\n%s", got, hostagent.ExitRuntime, out)
	}
}
