package shim

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// Gate is the body of the hidden `latch-hostagent gate -- argv...`
// subcommand. It blocks reading fd 3; on 'g' it replaces itself with argv
// (syscall.Exec keeps the pid and start time the agent recorded), otherwise
// it exits 125 having run nothing. It returns only on failure, with the exit
// code to use.
func Gate(argv []string, stderr io.Writer) int {
	gate := os.NewFile(3, "gate")
	if gate == nil {
		fmt.Fprintln(stderr, "latch-hostagent gate: fd 3 is not open")
		return ExitGateClosed
	}
	var b [1]byte
	n, err := gate.Read(b[:])
	_ = gate.Close()
	if n != 1 || b[0] != 'g' {
		if err != nil && err != io.EOF {
			fmt.Fprintf(stderr, "latch-hostagent gate: %v\n", err)
		}
		return ExitGateClosed
	}
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "latch-hostagent gate: empty argv")
		return 127
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "latch-hostagent: %v\n", err)
		return 127
	}
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(stderr, "latch-hostagent: exec %s: %v\n", path, err)
	return 126
}
