package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/pgkv"
)

// runStore is `latch store migrate|status --store URL`: the PostgreSQL
// store's schema, outside a running control plane.
func runStore(ctx context.Context, env *Env, args []string) error {
	const usage = "migrate --store URL [--dry-run] | status --store URL [--json]"
	sub, args, err := splitSubcommand(env, "store", usage, args)
	if err != nil {
		return err
	}
	fs := newFlagSet(env, "store "+sub, subcommandSynopsis("store", sub, usage))
	url := fs.String("store", "", "PostgreSQL connection string (postgres://... or key=value); required")
	level := fs.String("log-level", "info", "trace, debug, info, warn or error")
	asJSON := fs.Bool("json", false, "status, migrate --dry-run: print JSON")
	dryRun := fs.Bool("dry-run", false, "migrate: list the schema steps the database lacks, in the order they would apply, and change nothing")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q; usage: latch store %s", pos, usage)
	}
	if *url == "" || !pgkv.IsURL(*url) {
		return usagef("--store URL is required and must be a PostgreSQL connection string (the Badger store needs no migration); usage: latch store %s", usage)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	switch sub {
	case "migrate":
		if *dryRun {
			return printPlan(ctx, env.Stdout, *url, *asJSON)
		}
		from, to, err := pgkv.Migrate(ctx, *url, formattedLogger(env.Stderr, *level, "text"))
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
		kv, err := pgkv.Open(ctx, *url, pgkv.Options{Logger: formattedLogger(env.Stderr, *level, "text")})
		if err != nil {
			return err
		}
		defer kv.Close()
		st, err := kv.Status(ctx)
		if err != nil {
			return err
		}
		if st.JournalSize, err = store.StoredJournalSize(kv); err != nil {
			return err
		}
		if *asJSON {
			return printJSON(env.Stdout, statusJSON(st))
		}
		printStoreStatus(env.Stdout, st)
		return nil
	}
	return usagef("unknown store command %q; usage: latch store %s", sub, usage)
}

// printPlan is `latch store migrate --dry-run`: the database's schema
// version and the steps `latch store migrate` would apply. It reads only.
func printPlan(ctx context.Context, w io.Writer, url string, asJSON bool) error {
	from, steps, err := pgkv.Plan(ctx, url)
	if err != nil {
		return err
	}
	if asJSON {
		list := []map[string]any{}
		for _, s := range steps {
			list = append(list, map[string]any{"version": s.Version, "name": s.Name, "summary": s.Summary})
		}
		return printJSON(w, map[string]any{"schema_version": from, "binary_schema_version": pgkv.SchemaVersion, "steps": list})
	}
	if len(steps) == 0 {
		fmt.Fprintf(w, "schema is current (version %d): nothing to apply\n", from)
		return nil
	}
	fmt.Fprintf(w, "schema version %d, this latch %d: `latch store migrate` would apply %d steps, in this order:\n", from, pgkv.SchemaVersion, len(steps))
	for _, s := range steps {
		fmt.Fprintf(w, "  %-22s %s\n", s.Name, s.Summary)
	}
	return nil
}

// printStoreStatus is `latch store status` for people. Every time is the
// database's clock (lease age, replicas' last beats), so it is right
// whatever this host's clock says.
func printStoreStatus(w io.Writer, st *pgkv.Status) {
	ago := func(t time.Time) string { return st.Now.Sub(t).Round(time.Millisecond).String() }
	fmt.Fprintf(w, "schema version:     %d (this latch: %d)\n", st.SchemaVersion, st.BinaryVersion)
	fmt.Fprintf(w, "synchronous_commit: %s\n", st.SynchronousCommit)
	fmt.Fprintf(w, "journal size:       %d\n", st.JournalSize)
	fmt.Fprintf(w, "keys (estimate):    %d\n", st.Keys)
	fmt.Fprintf(w, "last commit:        %s (%s ago)\n", st.LastCommit.UTC().Format(time.RFC3339), ago(st.LastCommit))
	if l := st.Lease; l.Epoch == 0 {
		fmt.Fprintf(w, "active replica:     none (the lease was never taken)\n")
	} else {
		state := "held"
		if !l.Expires.After(st.Now) {
			state = "expired"
		}
		fmt.Fprintf(w, "active replica:     %s (epoch %d, %s)\n", l.Holder, l.Epoch, state)
		fmt.Fprintf(w, "lease:              acquired %s ago, renewed %s ago, expires in %s\n",
			ago(l.Acquired), ago(l.Renewed), l.Expires.Sub(st.Now).Round(time.Millisecond))
	}
	fmt.Fprintf(w, "replicas seen:      %d\n", len(st.Replicas))
	for _, r := range st.Replicas {
		addr := r.Addr
		if addr == "" {
			addr = "socket only"
		}
		fmt.Fprintf(w, "  %-16s %-8s %s, started %s ago, last seen %s ago\n", r.Name, r.Role, addr, ago(r.StartedAt), ago(r.LastSeen))
	}
	if len(st.StoreKeys) == 0 {
		fmt.Fprintf(w, "keys in the store:  none yet (the first replica to start creates them)\n")
	}
	for _, k := range st.StoreKeys {
		fmt.Fprintf(w, "key %-15s sealed by the vault, created by %s at %s\n", k.Name+":", k.CreatedBy, k.CreatedAt.UTC().Format(time.RFC3339))
		if k.Public != "" {
			fmt.Fprintf(w, "  verifier:         %s\n", k.Public)
		}
	}
	if st.Vault == nil {
		fmt.Fprintf(w, "vault:              none yet (a replica started with --vault-key-file or --vault-passphrase-file creates it)\n")
	} else {
		fmt.Fprintf(w, "vault:              in the store, generation %d, %d bytes sealed, written %s ago\n", st.Vault.Generation, st.Vault.Bytes, ago(st.Vault.Updated))
	}
}

// statusJSON is `latch store status --json`: times in RFC 3339 (the
// database's clock), durations in seconds.
func statusJSON(st *pgkv.Status) map[string]any {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	out := map[string]any{
		"schema_version": st.SchemaVersion, "binary_schema_version": st.BinaryVersion,
		"synchronous_commit": st.SynchronousCommit, "journal_size": st.JournalSize,
		"keys_estimate": st.Keys, "last_commit": ts(st.LastCommit), "now": ts(st.Now),
	}
	if l := st.Lease; l.Epoch != 0 {
		out["lease"] = map[string]any{
			"holder": l.Holder, "epoch": l.Epoch, "held": l.Expires.After(st.Now),
			"acquired": ts(l.Acquired), "renewed": ts(l.Renewed), "expires": ts(l.Expires),
			"age_seconds": st.Now.Sub(l.Acquired).Seconds(), "renewed_seconds_ago": st.Now.Sub(l.Renewed).Seconds(),
		}
	}
	replicas := []map[string]any{}
	for _, r := range st.Replicas {
		replicas = append(replicas, map[string]any{
			"name": r.Name, "instance": r.Instance, "holder": r.Holder, "addr": r.Addr, "role": r.Role,
			"started": ts(r.StartedAt), "last_seen": ts(r.LastSeen), "last_seen_seconds_ago": st.Now.Sub(r.LastSeen).Seconds(),
		})
	}
	out["replicas"] = replicas
	keys := []map[string]any{}
	for _, k := range st.StoreKeys {
		m := map[string]any{"name": k.Name, "created_by": k.CreatedBy, "created": ts(k.CreatedAt)}
		if k.Public != "" {
			m["public"] = k.Public
		}
		keys = append(keys, m)
	}
	out["store_keys"] = keys
	if st.Vault != nil {
		out["vault"] = map[string]any{"generation": st.Vault.Generation, "bytes": st.Vault.Bytes, "updated": ts(st.Vault.Updated)}
	}
	return out
}
