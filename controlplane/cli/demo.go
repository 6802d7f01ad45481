package cli

import (
	"context"
)

func runDemo(ctx context.Context, env *Env, args []string) error {
	return usagef("demo: not available yet")
}
