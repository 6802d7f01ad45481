package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// tokenKind is what differs between agents' tokens (latch token) and
// operators' console tokens (latch operator token): the same records and
// RPCs, with the operator mark.
type tokenKind struct {
	command  string // "token", "operator token"
	usage    string
	operator bool
	holder   string // the list column of the actor: ACTOR, OPERATOR
	origin   bool   // the list shows the ORIGIN column
	creator  bool   // the list shows the CREATED BY column
	// created is the line on stderr above a new token; revoked says what
	// revoking n tokens does.
	created func(resp *controlplanev1.CreateTokenResponse, exp string) string
	revoked func(n int32) string
}

var (
	agentTokens = tokenKind{
		command: "token", usage: "create ACTOR [--ttl D] | list [--all] | revoke ID|ACTOR",
		holder: "ACTOR", origin: true,
		created: func(resp *controlplanev1.CreateTokenResponse, exp string) string {
			return fmt.Sprintf("token %s for actor %s, %s (shown once; only its hash is stored):", resp.GetId(), resp.GetActor(), exp)
		},
		revoked: func(n int32) string { return fmt.Sprintf("revoked %d token(s); fronts refuse them within 5s", n) },
	}
	operatorTokens = tokenKind{
		command: "operator token", usage: "create NAME [--ttl D] | list [--all] | revoke ID|NAME",
		operator: true, holder: "OPERATOR", creator: true,
		created: func(resp *controlplanev1.CreateTokenResponse, exp string) string {
			return fmt.Sprintf("operator token %s for %s, %s (shown once; only its hash is stored). Sign in at the console (/ui/ on the ops listener) with it; decisions there are journaled as %s:", resp.GetId(), resp.GetActor(), exp, resp.GetActor())
		},
		revoked: func(n int32) string {
			return fmt.Sprintf("revoked %d operator token(s); console sessions signed in with them end at their next request", n)
		},
	}
)

func runToken(ctx context.Context, env *Env, args []string) error {
	return runTokens(ctx, env, agentTokens, args)
}

// runTokens is `latch token` and `latch operator token`: create, list, revoke.
func runTokens(ctx context.Context, env *Env, k tokenKind, args []string) error {
	sub, args, fs, t, err := adminCommand(env, k.command, k.usage, args)
	if err != nil {
		return err
	}
	ttl := fs.Duration("ttl", 0, "create: the token expires after this long (e.g. 720h); default: until revoked")
	all := fs.Bool("all", false, "list: include revoked and expired tokens")
	asJSON := jsonFlag(fs, sub, "print one JSON line per token (never the token itself: Latch keeps only its hash)", "list")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if sub != "list" && len(pos) != 1 {
		return usagef("%s %s needs exactly one argument", k.command, sub)
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
		resp, err := c.CreateToken(ctx, &controlplanev1.CreateTokenRequest{Actor: pos[0], TtlSeconds: int64(ttl.Round(time.Second) / time.Second), Operator: k.operator})
		if err != nil {
			return rpcError(err)
		}
		exp := "never expires (latch " + k.command + " revoke " + resp.GetId() + ")"
		if resp.GetExpiresAt() != "" {
			exp = "expires " + resp.GetExpiresAt()
		}
		fmt.Fprintln(env.Stderr, k.created(resp, exp))
		fmt.Fprintln(env.Stdout, resp.GetToken())
		return nil
	case "list":
		resp, err := c.ListTokens(ctx, &controlplanev1.ListTokensRequest{All: *all, Operator: k.operator})
		if err != nil {
			return rpcError(err)
		}
		if *asJSON {
			return printJSONLines(env.Stdout, resp.GetTokens())
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		header := "ID\t" + k.holder + "\tCREATED\tEXPIRES\tLAST USED\tREVOKED"
		if k.origin {
			header += "\tORIGIN"
		}
		if k.creator {
			header += "\tCREATED BY"
		}
		fmt.Fprintln(tw, header)
		for _, tk := range resp.GetTokens() {
			row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", tk.GetId(), tk.GetActor(), tk.GetCreatedAt(), or(tk.GetExpiresAt(), "never"), or(tk.GetLastUsedAt(), "-"), or(tk.GetRevokedAt(), "-"))
			if k.origin {
				row += "\t" + tk.GetOrigin()
			}
			if k.creator {
				by := or(tk.GetCreatedBy(), "-")
				if tk.GetCreatedVia() != "" {
					by += " (" + tk.GetCreatedVia() + ")"
				}
				row += "\t" + by
			}
			fmt.Fprintln(tw, row)
		}
		return tw.Flush()
	case "revoke":
		resp, err := c.RevokeToken(ctx, &controlplanev1.RevokeTokenRequest{IdOrActor: pos[0], Operator: k.operator})
		if err != nil {
			return rpcError(err)
		}
		fmt.Fprintln(env.Stdout, k.revoked(resp.GetRevoked()))
		return nil
	}
	return usagef("unknown %s subcommand %q (want create, list or revoke)", k.command, sub)
}
