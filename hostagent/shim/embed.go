package shim

import (
	"flag"
	"io"

	"github.com/hashicorp/go-hclog"
)

// Reexec runs the hidden subcommands the agent re-executes its own binary
// with ("gate -- argv..." and "shim --dir DIR"), for any binary that embeds
// the agent (latch-hostagent, and latch for `latch dev`). It reports whether
// args named one; call it first in main, before signal handling: the gate
// must not catch signals while it waits.
func Reexec(args []string, stderr io.Writer) (code int, handled bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "gate":
		argv := args[1:]
		if len(argv) > 0 && argv[0] == "--" {
			argv = argv[1:]
		}
		return Gate(argv, stderr), true
	case "shim":
		fs := flag.NewFlagSet("shim", flag.ContinueOnError)
		fs.SetOutput(stderr)
		dir := fs.String("dir", "", "execution directory")
		if err := fs.Parse(args[1:]); err != nil || *dir == "" {
			return 2, true
		}
		log := hclog.New(&hclog.LoggerOptions{Name: "latch-hostagent.shim", Level: hclog.Info, Output: stderr})
		return Main(*dir, log), true
	}
	return 0, false
}
