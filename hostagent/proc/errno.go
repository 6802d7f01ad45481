package proc

import "syscall"

// errESRCH is what reading /proc/<pid>/stat returns when the process exits
// between open and read.
var errESRCH = syscall.ESRCH
