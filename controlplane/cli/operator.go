package cli

import (
	"context"
	"flag"
)

const operatorUsage = "token create NAME [--ttl D] | token list [--all] | token revoke ID|NAME"

// runOperator manages operators' console tokens: the same records and RPCs
// as agents' tokens (controlplane/tokens), marked operator, so they sign an
// operator into the console (/ui/ on the ops listener) and never
// authenticate an agent.
func runOperator(ctx context.Context, env *Env, args []string) error {
	switch {
	case len(args) == 0:
		return usagef("operator needs a subcommand: %s (latch operator -h for more)", operatorUsage)
	case isHelp(args[0]):
		printSubcommands(env.Stdout, "operator", operatorUsage)
		return flag.ErrHelp
	case args[0] != "token":
		return usagef("unknown operator subcommand %q (want token)", args[0])
	}
	return runTokens(ctx, env, operatorTokens, args[1:])
}
