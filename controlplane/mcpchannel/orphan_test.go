package mcpchannel_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// TestStdioUpstreamStopsWithControlPlane: a SIGKILLed control plane takes
// its stdio upstream with it (it is not left running beside the next run's
// copy), and at its next start the control plane stops a process group a
// pid file of an earlier run names, but never a process whose pid was
// recycled (its start time differs).
func TestStdioUpstreamStopsWithControlPlane(t *testing.T) {
	up := newCounter(t)
	// It does not end with its stdin: only the kernel's death signal (or a
	// process-group kill) stops it.
	if err := os.WriteFile(filepath.Join(up.dir, "linger"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	catalog := stdioCatalog(t, up, "review")
	l := startLatch(t, data, catalog)
	var pid int
	testbin.Eventually(t, "the upstream to start", func() bool {
		_, err := os.Stat(filepath.Join(up.dir, "pid"))
		return err == nil
	})
	pid = up.pid()
	pidFile := filepath.Join(data, "upstream-pids", strconv.Itoa(pid)+".pid")
	if b, err := os.ReadFile(pidFile); err != nil || !bytes.HasPrefix(b, fmt.Appendf(nil, "%d %d counter", pid, startTime(t, pid))) {
		t.Errorf("pid file %s = %q (%v), want the pid, its start time and the upstream", pidFile, b, err)
	}
	l.kill()
	testbin.Eventually(t, "the upstream to end with the SIGKILLed control plane", func() bool { return exited(pid) })

	// An orphan of an earlier run (here: one the test started, in its own
	// group, recorded as a killed run would have left it) and a process
	// whose pid file names the wrong start time (the pid recycled).
	orphan, orphanDone := startIdle(t)
	decoy, decoyDone := startIdle(t)
	dir := filepath.Join(data, "upstream-pids")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.pid", orphan)), fmt.Appendf(nil, "%d %d counter\n", orphan, startTime(t, orphan)), 0o600)
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.pid", decoy)), fmt.Appendf(nil, "%d %d counter\n", decoy, startTime(t, decoy)+1), 0o600)

	startLatch(t, data, catalog)
	select {
	case <-orphanDone:
	case <-time.After(30 * time.Second):
		t.Errorf("the orphan (pid %d) a pid file names is still running after the next start", orphan)
	}
	select {
	case <-decoyDone:
		t.Errorf("the process whose pid file has another start time (pid %d, a recycled pid) was killed", decoy)
	default:
	}
	for _, p := range []int{orphan, decoy} {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%d.pid", p))); err == nil {
			t.Errorf("pid file %d.pid of the earlier run is still there", p)
		}
	}
	testbin.Eventually(t, "the next run to start its own upstream", func() bool {
		b, err := os.ReadFile(filepath.Join(up.dir, "pid"))
		return err == nil && string(b) != strconv.Itoa(pid)
	})
}

// startIdle starts a process that waits on its stdin, in its own process
// group; done is closed once it has ended (and been reaped).
func startIdle(t *testing.T) (int, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(countupBin, "--state", t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); stdin.Close(); <-done })
	return cmd.Process.Pid, done
}

// startTime is field 22 of /proc/PID/stat.
func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	n, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
