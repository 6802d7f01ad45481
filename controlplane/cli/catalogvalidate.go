package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/tools"
)

// validateProblem is one entry of `latch catalog validate --json`
// (docs/reference/cli-json.md).
type validateProblem struct {
	File string `json:"file"`
	// Line is 1-based; 0 when the problem has no line (an unreadable file).
	Line    int    `json:"line"`
	Message string `json:"message"`
	// Severity is "error" (the catalog is refused) or "warning" (it loads,
	// but something the loader cannot check should be).
	Severity string `json:"severity"`
}

const (
	severityError   = "error"
	severityWarning = "warning"
)

// runCatalogValidate checks catalog files offline, with the validator the
// control plane loads catalogs with (the channel kinds' registry, host
// checks included): every problem of every file as file:line, exit 1 when
// there is any; warnings are printed and do not fail. It needs no control
// plane; what only a running one can check (an upstream's offered tools,
// vault credentials) is checked by `latch catalog reload`.
func runCatalogValidate(_ context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "catalog validate", "catalog validate [--json] [--no-host-checks] FILE...")
	asJSON := jsonFlag(fs, "validate", "print the problems and warnings as a JSON array of {file, line, message, severity} (for CI annotations)")
	noHost := fs.Bool("no-host-checks", false, "skip what only the control plane's machine can check (that a local target's hostagent_socket exists): for CI or any machine that is not the control plane's")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("catalog validate needs at least one catalog file: latch catalog validate FILE...")
	}
	kinds := channels.Default().Catalog().WithHostChecks(tools.HostChecks{Skip: *noHost})
	problems := []validateProblem{}
	errs := 0
	add := func(ps []tools.Problem, severity string) {
		for _, p := range ps {
			problems = append(problems, validateProblem{File: p.File, Line: p.Line, Message: p.Msg, Severity: severity})
		}
	}
	for _, f := range files {
		cat, err := kinds.Load(f)
		var le *tools.LoadError
		switch {
		case err == nil:
			add(cat.Warnings, severityWarning)
		case errors.As(err, &le):
			add(le.Problems, severityError)
			errs += len(le.Problems)
		default:
			problems = append(problems, validateProblem{File: f, Message: err.Error(), Severity: severityError})
			errs++
		}
	}
	if *asJSON {
		if err := writeJSON(env.Stdout, problems); err != nil {
			return err
		}
	} else {
		for _, p := range problems {
			prefix := ""
			if p.Severity == severityWarning {
				prefix = "warning: "
			}
			if p.Line > 0 {
				fmt.Fprintf(env.Stdout, "%s:%d: %s%s\n", p.File, p.Line, prefix, p.Message)
			} else {
				fmt.Fprintf(env.Stdout, "%s: %s%s\n", p.File, prefix, p.Message)
			}
		}
	}
	if errs > 0 {
		if !*asJSON {
			fmt.Fprintf(env.Stderr, "%d problem(s) in %d file(s); nothing was loaded\n", errs, len(files))
		}
		return errSilent
	}
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "%d catalog file(s) valid\n", len(files))
	}
	return nil
}
