package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/hostagent/markers"
	"github.com/latchhq/latch/hostagent/proc"
	"github.com/latchhq/latch/hostagent/shim"
	"github.com/latchhq/latch/internal/redact"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// Environment variables the agent sets for every command.
const (
	EnvExecutionID = "LATCH_EXECUTION_ID"
	EnvSocket      = "LATCH_HOSTAGENT_SOCKET"
)

// inheritedEnv lists the agent's environment variables a command inherits;
// everything else comes from the request.
var inheritedEnv = []string{"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "TMPDIR"}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func validateRun(req *hostagentv1.RunRequest) error {
	if err := execdir.ValidID(req.GetExecutionId()); err != nil {
		return fmt.Errorf("%w: %v", errInvalid, err)
	}
	if len(req.GetArgv()) == 0 || req.GetArgv()[0] == "" {
		return fmt.Errorf("%w: argv is empty", errInvalid)
	}
	for _, a := range req.GetArgv() {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%w: argv element contains a NUL byte", errInvalid)
		}
	}
	if c := req.GetCwd(); c != "" && (!strings.HasPrefix(c, "/") || strings.ContainsRune(c, 0)) {
		return fmt.Errorf("%w: cwd %q must be an absolute path", errInvalid, c)
	}
	for k, v := range req.GetEnv() {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: bad environment variable name %q", errInvalid, k)
		}
	}
	for _, k := range req.GetSecretEnv() {
		// Only the name is quoted: the value is the secret.
		if _, ok := req.GetEnv()[k]; !ok {
			return fmt.Errorf("%w: secret_env names %q, which env does not set; name only entries of env", errInvalid, k)
		}
	}
	if req.GetTimeoutMs() < 0 {
		return fmt.Errorf("%w: negative timeout", errInvalid)
	}
	return nil
}

func (a *Agent) commandEnv(id string, extra map[string]string) []string {
	env := map[string]string{"PATH": defaultPath}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	env[EnvExecutionID] = id
	env[EnvSocket] = a.cfg.SocketPath
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// Run implements HostAgent.Run.
func (a *Agent) Run(ctx context.Context, req *hostagentv1.RunRequest) (resp *hostagentv1.RunResponse, err error) {
	created := false
	defer func() { a.cfg.Metrics.run(resp, created, err) }()
	if err := validateRun(req); err != nil {
		return nil, a.toStatus(err)
	}
	req = withTraceparent(ctx, req)
	id := req.GetExecutionId()
	uid, _ := PeerUID(ctx)
	now := a.cfg.Now().UnixNano()
	m := &hostagentv1.Marker{
		ExecutionId:     id,
		State:           hostagentv1.MarkerState_MARKER_STATE_STARTING,
		Argv:            req.GetArgv(),
		Cwd:             req.GetCwd(),
		PeerUid:         uid,
		CreatedUnixNano: now,
		UpdatedUnixNano: now,
	}
	got, created, err := a.store.Create(markers.Runs, m)
	if err != nil {
		return nil, a.toStatus(err)
	}
	if !created {
		return &hostagentv1.RunResponse{Marker: got}, nil
	}
	a.notify.fire(id)
	// Count the start as background work so that shutdown waits for it
	// before closing the store.
	a.bg.Add(1)
	defer a.bg.Done()
	log := a.log.With("execution_id", id)
	out, err := a.start(log, m, req)
	if err != nil {
		return nil, a.toStatus(err)
	}
	return &hostagentv1.RunResponse{Marker: out, Started: out.GetState() == hostagentv1.MarkerState_MARKER_STATE_RUNNING}, nil
}

// start takes a freshly created `starting` marker to `running` (or to a final
// not_started/lost when nothing could run).
//
// The secret values the request names (secret_env) stay in memory: the shim
// gets them only inside the environment on its control channel and redacts
// the output it writes; the reasons recorded here are redacted too.
func (a *Agent) start(log hclog.Logger, m *hostagentv1.Marker, req *hostagentv1.RunRequest) (*hostagentv1.Marker, error) {
	id := m.GetExecutionId()
	spec := shim.Spec{
		ExecutionID:  id,
		Argv:         req.GetArgv(),
		Cwd:          req.GetCwd(),
		Env:          a.commandEnv(id, req.GetEnv()),
		Timeout:      time.Duration(req.GetTimeoutMs()) * time.Millisecond,
		OutputCap:    a.cfg.OutputCap,
		SecretEnv:    req.GetSecretEnv(),
		SecretValues: secretValues(req),
	}
	if spec.Cwd == "" {
		spec.Cwd = "/"
	}
	red := spec.Redactor()
	settle := func(state hostagentv1.MarkerState, reason string) (*hostagentv1.Marker, error) {
		return a.settle(log, id, state, red.String(reason))
	}
	dir := execdir.Path(a.cfg.DataDir, id)
	if err := os.MkdirAll(execdir.Root(a.cfg.DataDir), 0o700); err != nil {
		return settle(hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, "create exec directory: "+err.Error())
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			// A directory without a marker: an earlier run under this ID may
			// have happened (store rebuilt?). Never run twice.
			return settle(hostagentv1.MarkerState_MARKER_STATE_LOST,
				"execution directory already existed without a marker; not run again, inspect "+dir)
		}
		return settle(hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, "create exec directory: "+err.Error())
	}
	// The new directory entry must survive a crash: a rebuilt store finds
	// executions by their directories.
	if err := execdir.SyncDir(execdir.Root(a.cfg.DataDir)); err != nil {
		return settle(hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, err.Error())
	}
	if err := execdir.WriteArgv(dir, m); err != nil {
		return settle(hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, err.Error())
	}
	h, err := shim.Spawn(dir, spec)
	if err != nil {
		return settle(hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, err.Error())
	}
	st, err := h.AwaitStarted(a.cfg.StartTimeout)
	if err != nil {
		// The gate was never opened by us; closing the channel makes a live
		// shim close it for good.
		h.Abort(err.Error())
		_ = h.Close()
		return settle(hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, "shim did not start the command: "+err.Error())
	}
	running, err := a.store.Update(markers.Runs, id, func(m *hostagentv1.Marker) error {
		if err := hostagent.CheckMarker(m.GetState(), hostagentv1.MarkerState_MARKER_STATE_RUNNING); err != nil {
			return err
		}
		m.State = hostagentv1.MarkerState_MARKER_STATE_RUNNING
		m.Pid = int32(st.PID)
		m.StartTicks = st.StartTicks
		m.BootId = st.BootID
		m.UpdatedUnixNano = a.cfg.Now().UnixNano()
		return nil
	})
	if err != nil {
		h.Abort("running marker not durable")
		_ = h.Close()
		_, _ = settle(hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, "recording running failed: "+err.Error())
		return nil, err
	}
	a.notify.fire(id)
	if !red.Empty() {
		a.redactors.Store(id, red) // supervise deletes it
	}
	if err := h.Open(); err != nil {
		log.Warn("telling the shim to open the gate failed; watching the process", "error", err)
	}
	log.Debug("command running", "pid", st.PID)
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		defer a.redactors.Delete(id)
		a.supervise(log, id, dir, h, proc.Identity{PID: st.PID, StartTicks: st.StartTicks, BootID: st.BootID})
	}()
	return running, nil
}

// redactorOf returns the redactor of the secret env values of the command
// running under id (nil when none runs, or it has no secrets).
func (a *Agent) redactorOf(id string) *redact.Redactor {
	if v, ok := a.redactors.Load(id); ok {
		return v.(*redact.Redactor)
	}
	return nil
}

// supervise waits for the shim's word, falling back to watching processes.
func (a *Agent) supervise(log hclog.Logger, id, dir string, h *shim.Handle, cmd proc.Identity) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-a.bgCtx.Done():
			_ = h.Close()
		case <-stop:
		}
	}()
	err := h.AwaitDone()
	_ = h.Close()
	if a.bgCtx.Err() != nil {
		return // shutting down: the next start reconciles this marker
	}
	if err == nil {
		a.finish(log, id, dir)
		return
	}
	log.Warn("shim channel closed before it reported; watching the command", "error", err)
	a.watch(log, id, dir, cmd)
}

// watch polls until the command and its shim are gone, then settles the
// marker from the status file.
func (a *Agent) watch(log hclog.Logger, id, dir string, cmd proc.Identity) {
	t := time.NewTicker(a.cfg.PollInterval)
	defer t.Stop()
	for {
		if !a.anyAlive(dir, cmd) {
			a.finish(log, id, dir)
			return
		}
		select {
		case <-a.bgCtx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) anyAlive(dir string, cmd proc.Identity) bool {
	if ok, _ := proc.Alive(cmd); ok {
		return true
	}
	if sh, err := execdir.ReadIdentity(dir, execdir.ShimFile); err == nil {
		if ok, _ := proc.Alive(sh); ok {
			return true
		}
	}
	return false
}

// finish settles a running marker from the status file, or as lost.
func (a *Agent) finish(log hclog.Logger, id, dir string) {
	status, err := execdir.ReadStatus(dir)
	switch {
	case err == nil:
		_, err = a.apply(id, status)
	case errors.Is(err, execdir.ErrNoStatus):
		_, err = a.settle(log, id, hostagentv1.MarkerState_MARKER_STATE_LOST,
			"the command ran but no exit status was recorded (shim killed?); not re-run")
	default:
		_, err = a.settle(log, id, hostagentv1.MarkerState_MARKER_STATE_LOST, "status file unreadable: "+err.Error())
	}
	if err != nil {
		log.Error("recording the outcome failed; it will be reconciled at next start", "error", err)
	}
}

// apply copies a status file into an open run marker. A status file whose
// state the marker cannot move to (a damaged file) settles it as lost: the
// command may have run, and it is never re-run.
func (a *Agent) apply(id string, status *hostagentv1.Marker) (*hostagentv1.Marker, error) {
	m, err := a.store.Update(markers.Runs, id, func(m *hostagentv1.Marker) error {
		if !hostagent.MarkerOpen(m.GetState()) {
			return nil
		}
		if err := hostagent.CheckMarker(m.GetState(), status.GetState()); err != nil {
			m.State = hostagentv1.MarkerState_MARKER_STATE_LOST
			m.Reason = fmt.Sprintf("the status file says %s, which a %s marker cannot become; outcome unknown, not re-run", hostagent.MarkerName(status.GetState()), hostagent.MarkerName(m.GetState()))
			m.UpdatedUnixNano = a.cfg.Now().UnixNano()
			return nil
		}
		execdir.ApplyStatus(m, status)
		m.UpdatedUnixNano = a.cfg.Now().UnixNano()
		return nil
	})
	if err == nil {
		a.notify.fire(id)
		a.log.Debug("execution settled", "execution_id", id, "state", m.GetState().String(), "exit_code", m.GetExitCode(), "signal", m.GetSignal())
	}
	return m, err
}

// settle moves an open run marker to a final state with a reason.
func (a *Agent) settle(log hclog.Logger, id string, state hostagentv1.MarkerState, reason string) (*hostagentv1.Marker, error) {
	if state == hostagentv1.MarkerState_MARKER_STATE_LOST {
		log.Warn("execution lost: it ran and its outcome is unknown; it will not be re-run", "reason", reason)
	} else {
		log.Info("execution settled", "state", state.String(), "reason", reason)
	}
	m, err := a.store.Update(markers.Runs, id, func(m *hostagentv1.Marker) error {
		if hostagent.CheckMarker(m.GetState(), state) != nil {
			return nil // already final: the first settlement stands
		}
		m.State = state
		m.Reason = reason
		m.UpdatedUnixNano = a.cfg.Now().UnixNano()
		return nil
	})
	if err == nil {
		a.notify.fire(id)
	}
	return m, err
}

// secretValues is the request's secret_values that occur in the value of an
// entry secret_env names, once each: the bare secrets those entries carry.
// Others are dropped, not refused: redacting them is all the field is for,
// and refusing a run over one would refuse a sound re-send of a command
// that already ran (the marker decides that, after validation).
func secretValues(req *hostagentv1.RunRequest) []string {
	var out []string
	for _, v := range req.GetSecretValues() {
		if v == "" || slices.Contains(out, v) {
			continue
		}
		if slices.ContainsFunc(req.GetSecretEnv(), func(k string) bool { return strings.Contains(req.GetEnv()[k], v) }) {
			out = append(out, v)
		}
	}
	return out
}
