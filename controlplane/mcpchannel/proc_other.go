//go:build !linux

package mcpchannel

import (
	"errors"
	"syscall"
)

// procAttr puts a stdio upstream in its own process group. Outside Linux
// there is no Pdeathsig and no /proc: an upstream outlives a killed control
// plane, and no pid file is kept.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

type procStat struct {
	state byte
	pgrp  int
	start uint64
}

var errNoProc = errors.New("mcpchannel: no such process")

func readProcStat(int) (procStat, error) { return procStat{}, errors.ErrUnsupported }

func groupMembers(int) []procStat { return nil }

const procSupported = false
