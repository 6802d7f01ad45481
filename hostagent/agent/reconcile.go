package agent

import (
	"errors"
	"fmt"
	"os"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/hostagent/markers"
	"github.com/latchhq/latch/hostagent/proc"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// reconcile settles every open run marker left by a previous agent.
func (a *Agent) reconcile() error {
	ms, err := a.store.List(markers.Runs, 0)
	if err != nil {
		return fmt.Errorf("agent: reconcile: %w", err)
	}
	boot, err := proc.BootID()
	if err != nil {
		return fmt.Errorf("agent: reconcile: %w", err)
	}
	var watching int
	for _, m := range ms {
		if !hostagent.MarkerOpen(m.GetState()) {
			continue
		}
		id := m.GetExecutionId()
		log := a.log.With("execution_id", id)
		dir := execdir.Path(a.cfg.DataDir, id)
		status, serr := execdir.ReadStatus(dir)
		if serr != nil && !errors.Is(serr, execdir.ErrNoStatus) {
			log.Warn("status file unreadable", "error", serr)
		}
		switch {
		case m.GetState() == hostagentv1.MarkerState_MARKER_STATE_STARTING:
			// running was never recorded, so the gate never opened.
			reason := "agent stopped before the gate opened; nothing ran"
			if serr == nil && status.GetReason() != "" {
				reason = status.GetReason()
			}
			_, err = a.settle(log, id, hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED, reason)
			a.cfg.Metrics.reconcile("not_started")
		case serr == nil:
			_, err = a.apply(id, status)
			a.cfg.Metrics.reconcile("exited")
		case m.GetBootId() != boot:
			_, err = a.settle(log, id, hostagentv1.MarkerState_MARKER_STATE_LOST,
				"host rebooted while the command ran and no exit status was recorded; not re-run")
			a.cfg.Metrics.reconcile("lost")
		default:
			cmd := proc.Identity{PID: int(m.GetPid()), StartTicks: m.GetStartTicks(), BootID: m.GetBootId()}
			if a.anyAlive(dir, cmd) {
				watching++
				a.cfg.Metrics.reconcile("reattached")
				log.Info("re-attached to a running command", "pid", cmd.PID)
				a.bg.Add(1)
				go func() {
					defer a.bg.Done()
					a.watch(log, id, dir, cmd)
				}()
				continue
			}
			a.cfg.Metrics.reconcile("finished")
			a.finish(log, id, dir)
		}
		if err != nil {
			return fmt.Errorf("agent: reconcile %s: %w", id, err)
		}
	}
	if watching > 0 {
		a.log.Info("reconcile done", "still_running", watching)
	}
	return nil
}

// rebuild recreates run markers from the execution directories after the
// store was moved aside. A directory without command.pid never reported a
// started command, so its gate never opened.
func (a *Agent) rebuild() (int, error) {
	entries, err := os.ReadDir(execdir.Root(a.cfg.DataDir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("agent: rebuild: %w", err)
	}
	boot, err := proc.BootID()
	if err != nil {
		return 0, fmt.Errorf("agent: rebuild: %w", err)
	}
	n := 0
	now := a.cfg.Now().UnixNano()
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || execdir.ValidID(id) != nil {
			continue
		}
		dir := execdir.Path(a.cfg.DataDir, id)
		m, err := execdir.ReadArgv(dir)
		if err != nil {
			m = &hostagentv1.Marker{}
		}
		m.ExecutionId = id
		m.UpdatedUnixNano = now
		m.Reason = "rebuilt from the execution directory after the marker store was moved aside"
		cmd, cerr := execdir.ReadIdentity(dir, execdir.CommandFile)
		status, serr := execdir.ReadStatus(dir)
		switch {
		case serr == nil:
			execdir.ApplyStatus(m, status)
		case cerr != nil:
			m.State = hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED
			m.Reason += "; the command never reached the gate"
		case cmd.BootID == boot:
			// Alive or not, reconcile decides (watch, or status, or lost).
			m.State = hostagentv1.MarkerState_MARKER_STATE_RUNNING
			m.Pid, m.StartTicks, m.BootId = int32(cmd.PID), cmd.StartTicks, cmd.BootID
		default:
			m.State = hostagentv1.MarkerState_MARKER_STATE_LOST
			m.Reason += "; host rebooted and no exit status was recorded; not re-run"
		}
		if err := a.store.Put(markers.Runs, m); err != nil {
			return n, fmt.Errorf("agent: rebuild %s: %w", id, err)
		}
		n++
	}
	return n, nil
}
