package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/tools"
)

// validateProblem is one problem of `latch catalog validate --json`.
type validateProblem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// runCatalogValidate checks catalog files offline, with the validator the
// control plane loads catalogs with (tools.Load): every problem of every
// file as file:line, exit 1 when there is any. It needs no control plane;
// what only a running one can check (an upstream's offered tools, vault
// credentials) is checked by `latch catalog reload`.
func runCatalogValidate(_ context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "catalog validate", "catalog validate [--json] FILE...")
	asJSON := fs.Bool("json", false, "print the problems as a JSON array of {file, line, message} (for CI annotations)")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("catalog validate needs at least one catalog file: latch catalog validate FILE...")
	}
	problems := []validateProblem{}
	for _, f := range files {
		_, err := channels.Default().Catalog().Load(f)
		var le *tools.LoadError
		switch {
		case err == nil:
		case errors.As(err, &le):
			for _, p := range le.Problems {
				problems = append(problems, validateProblem{File: p.File, Line: p.Line, Message: p.Msg})
			}
		default:
			problems = append(problems, validateProblem{File: f, Message: err.Error()})
		}
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(problems); err != nil {
			return err
		}
	} else {
		for _, p := range problems {
			if p.Line > 0 {
				fmt.Fprintf(env.Stdout, "%s:%d: %s\n", p.File, p.Line, p.Message)
			} else {
				fmt.Fprintf(env.Stdout, "%s: %s\n", p.File, p.Message)
			}
		}
	}
	if len(problems) > 0 {
		if !*asJSON {
			fmt.Fprintf(env.Stderr, "%d problem(s) in %d file(s); nothing was loaded\n", len(problems), len(files))
		}
		return errSilent
	}
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "%d catalog file(s) valid\n", len(files))
	}
	return nil
}
