package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

func runSession(ctx context.Context, env *Env, args []string) error {
	sub, args, fs, t, err := adminCommand(env, "session", "list | authorize ID | revoke ID --reason R", args)
	if err != nil {
		return err
	}
	reason := fs.String("reason", "", "revoke: why (required; shown to the agent)")
	operator := fs.String("operator", orDefault(env.Getenv("USER"), "operator"), "who decides (journaled)")
	limit := fs.Int("limit", 100, "list: at most this many")
	asJSON := jsonFlag(fs, sub, "print one JSON line per session (its record)", "list")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if sub != "list" && len(pos) != 1 {
		return usagef("session %s needs exactly one session ID (latch session list shows them)", sub)
	}
	if sub == "revoke" && strings.TrimSpace(*reason) == "" {
		return usagef("session revoke needs --reason")
	}
	c, closeFn, err := t.dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	switch sub {
	case "list":
		resp, err := c.ListSessions(ctx, &controlplanev1.ListSessionsRequest{Limit: int32(*limit)})
		if err != nil {
			return rpcError(err)
		}
		if *asJSON {
			return printJSONLines(env.Stdout, resp.GetSessions())
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tACTOR\tKEY\tSTATE\tCLIENT\tPEER\tSTARTED\tLAST SEEN")
		for _, s := range resp.GetSessions() {
			st := strings.ToLower(strings.TrimPrefix(s.GetState().String(), "SESSION_STATE_"))
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetId(), s.GetActor(), s.GetKey(), st, s.GetClientName(), s.GetPeerAddress(), ts(s.GetStartedAt()), ts(s.GetLastSeenAt()))
		}
		return tw.Flush()
	case "authorize":
		resp, err := c.AuthorizeSession(ctx, &controlplanev1.AuthorizeSessionRequest{SessionId: pos[0], Operator: *operator})
		if err != nil {
			return rpcError(err)
		}
		fmt.Fprintf(env.Stdout, "session %s (actor %s) authorized; its waiting executions proceed\n", resp.GetSession().GetId(), resp.GetSession().GetActor())
		return nil
	case "revoke":
		resp, err := c.RevokeSession(ctx, &controlplanev1.RevokeSessionRequest{SessionId: pos[0], Operator: *operator, Reason: *reason})
		if err != nil {
			return rpcError(err)
		}
		fmt.Fprintf(env.Stdout, "session %s (actor %s) revoked; its pending executions were rejected\n", resp.GetSession().GetId(), resp.GetSession().GetActor())
		return nil
	}
	return usagef("unknown session subcommand %q (want list, authorize or revoke)", sub)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
