package cli

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
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
	sub, args, fs, t, err := adminCommand(env, "operator token", "create NAME [--ttl D] | list [--all] | revoke ID|NAME", args[1:])
	if err != nil {
		return err
	}
	ttl := fs.Duration("ttl", 0, "create: the token expires after this long (e.g. 720h); default: until revoked")
	all := fs.Bool("all", false, "list: include revoked and expired tokens")
	asJSON := fs.Bool("json", false, "list: print one JSON line per token (never the token itself: Latch keeps only its hash)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if sub != "list" && len(pos) != 1 {
		return usagef("operator token %s needs exactly one argument", sub)
	}
	if *ttl < 0 {
		return usagef("--ttl must be positive")
	}
	c, closeFn, err := adminClient(ctx, t)
	if err != nil {
		return err
	}
	defer closeFn()
	switch sub {
	case "create":
		resp, err := c.CreateToken(ctx, &controlplanev1.CreateTokenRequest{Actor: pos[0], TtlSeconds: int64(ttl.Round(time.Second) / time.Second), Operator: true})
		if err != nil {
			return rpcError(err)
		}
		exp := "never expires (latch operator token revoke " + resp.GetId() + ")"
		if resp.GetExpiresAt() != "" {
			exp = "expires " + resp.GetExpiresAt()
		}
		fmt.Fprintf(env.Stderr, "operator token %s for %s, %s (shown once; only its hash is stored). Sign in at the console (/ui/ on the ops listener) with it; decisions there are journaled as %s:\n", resp.GetId(), resp.GetActor(), exp, resp.GetActor())
		fmt.Fprintln(env.Stdout, resp.GetToken())
		return nil
	case "list":
		resp, err := c.ListTokens(ctx, &controlplanev1.ListTokensRequest{All: *all, Operator: true})
		if err != nil {
			return rpcError(err)
		}
		if *asJSON {
			return printJSONLines(env.Stdout, resp.GetTokens())
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tOPERATOR\tCREATED\tEXPIRES\tLAST USED\tREVOKED")
		for _, tk := range resp.GetTokens() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", tk.GetId(), tk.GetActor(), tk.GetCreatedAt(), or(tk.GetExpiresAt(), "never"), or(tk.GetLastUsedAt(), "-"), or(tk.GetRevokedAt(), "-"))
		}
		return tw.Flush()
	case "revoke":
		resp, err := c.RevokeToken(ctx, &controlplanev1.RevokeTokenRequest{IdOrActor: pos[0], Operator: true})
		if err != nil {
			return rpcError(err)
		}
		fmt.Fprintf(env.Stdout, "revoked %d operator token(s); console sessions signed in with them end at their next request\n", resp.GetRevoked())
		return nil
	}
	return usagef("unknown operator token subcommand %q (want create, list or revoke)", sub)
}
