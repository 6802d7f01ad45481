package sshtest

import "syscall"

// sshdProcAttr makes the kernel stop sshd when the test process dies
// without running its cleanups (killed, or its output pipe closed), so no
// sshd outlives its test. Test harness only: the host agent must not use
// Pdeathsig (see NOTES.md).
func sshdProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
