//go:build !linux

package sshtest

import "syscall"

func sshdProcAttr() *syscall.SysProcAttr { return nil }
