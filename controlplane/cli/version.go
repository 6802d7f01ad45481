package cli

import (
	"context"
	"encoding/json"

	"github.com/latchhq/latch/internal/buildinfo"
)

func runVersion(_ context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "version", "version [--json]")
	asJSON := jsonFlag(fs, "version", "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("version takes no arguments")
	}
	v := buildinfo.Read()
	if *asJSON {
		return json.NewEncoder(env.Stdout).Encode(v) // versionJSON
	}
	v.Print(env.Stdout, "latch")
	return nil
}
