package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/latchhq/latch/controlplane/store"
)

// runStore is `latch store migrate|status --store URL`: the PostgreSQL
// store's schema, outside a running control plane.
func runStore(ctx context.Context, env *Env, args []string) error {
	const usage = "migrate --store URL | status --store URL"
	sub, args, err := splitSubcommand(env, "store", usage, args)
	if err != nil {
		return err
	}
	fs := newFlagSet(env, "store "+sub, subcommandSynopsis("store", sub, usage))
	url := fs.String("store", "", "PostgreSQL connection string (postgres://... or key=value); required")
	level := fs.String("log-level", "info", "trace, debug, info, warn or error")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q; usage: latch store %s", pos, usage)
	}
	if *url == "" || !store.IsPostgresURL(*url) {
		return usagef("--store URL is required and must be a PostgreSQL connection string (the Badger store needs no migration); usage: latch store %s", usage)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	switch sub {
	case "migrate":
		from, to, err := store.MigratePostgres(ctx, *url, formattedLogger(env.Stderr, *level, "text"))
		if err != nil {
			return err
		}
		if from == to {
			fmt.Fprintf(env.Stdout, "schema is current (version %d)\n", to)
		} else {
			fmt.Fprintf(env.Stdout, "migrated schema %d -> %d\n", from, to)
		}
		return nil
	case "status":
		kv, err := store.OpenPostgres(ctx, *url, store.PostgresOptions{Logger: formattedLogger(env.Stderr, *level, "text")})
		if err != nil {
			return err
		}
		defer kv.Close()
		st, err := kv.Status(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "schema version:     %d (this latch: %d)\n", st.SchemaVersion, st.BinaryVersion)
		fmt.Fprintf(env.Stdout, "synchronous_commit: %s\n", st.SynchronousCommit)
		fmt.Fprintf(env.Stdout, "journal size:       %d\n", st.JournalSize)
		fmt.Fprintf(env.Stdout, "keys (estimate):    %d\n", st.Keys)
		fmt.Fprintf(env.Stdout, "last commit:        %s\n", st.LastCommit.UTC().Format(time.RFC3339))
		if l := st.Lease; l.Epoch == 0 {
			fmt.Fprintf(env.Stdout, "active replica:     none (the lease was never taken)\n")
		} else {
			state := "held"
			if !l.Expires.After(st.Now) {
				state = "expired"
			}
			fmt.Fprintf(env.Stdout, "active replica:     %s (epoch %d, %s)\n", l.Holder, l.Epoch, state)
			fmt.Fprintf(env.Stdout, "lease:              acquired %s ago, renewed %s ago, expires in %s\n",
				st.Now.Sub(l.Acquired).Round(time.Millisecond), st.Now.Sub(l.Renewed).Round(time.Millisecond), l.Expires.Sub(st.Now).Round(time.Millisecond))
		}
		return nil
	}
	return usagef("unknown store command %q; usage: latch store %s", sub, usage)
}
