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
	const usage = "migrate --store URL [--dry-run [--json]] | status --store URL [--json]"
	sub, args, err := splitSubcommand(env, "store", usage, args)
	if err != nil {
		return err
	}
	fs := newFlagSet(env, "store "+sub, subcommandSynopsis("store", sub, usage))
	url := fs.String("store", "", "PostgreSQL connection string (postgres://... or key=value); required")
	level := fs.String("log-level", "info", "trace, debug, info, warn or error")
	jsonHelp := "print JSON"
	if sub == "migrate" {
		jsonHelp = "with --dry-run: print the steps as JSON"
	}
	asJSON := jsonFlag(fs, sub, jsonHelp, "status", "migrate")
	dryRun := new(bool)
	if sub == "migrate" {
		dryRun = fs.Bool("dry-run", false, "list the schema steps the database lacks, in the order they would apply, and change nothing")
	}
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
		if *asJSON {
			return usagef("--json with migrate needs --dry-run (the migration itself prints one line); usage: latch store %s", usage)
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

// storePlanJSON is `latch store migrate --dry-run --json`
// (docs/reference/cli-json.md): the database's schema version, this
// latch's, and the steps `latch store migrate` would apply, in order.
type storePlanJSON struct {
	SchemaVersion       int             `json:"schema_version"`
	BinarySchemaVersion int             `json:"binary_schema_version"`
	Steps               []storeStepJSON `json:"steps"`
}

type storeStepJSON struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

// printPlan is `latch store migrate --dry-run`: the database's schema
// version and the steps `latch store migrate` would apply. It reads only.
func printPlan(ctx context.Context, w io.Writer, url string, asJSON bool) error {
	from, steps, err := pgkv.Plan(ctx, url)
	if err != nil {
		return err
	}
	if asJSON {
		out := storePlanJSON{SchemaVersion: from, BinarySchemaVersion: pgkv.SchemaVersion, Steps: []storeStepJSON{}}
		for _, s := range steps {
			out.Steps = append(out.Steps, storeStepJSON{Version: s.Version, Name: s.Name, Summary: s.Summary})
		}
		return printJSON(w, out)
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

// storeStatusJSON is `latch store status --json`
// (docs/reference/cli-json.md): times in RFC 3339 (the database's clock),
// durations in seconds.
type storeStatusJSON struct {
	SchemaVersion       int    `json:"schema_version"`
	BinarySchemaVersion int    `json:"binary_schema_version"`
	SynchronousCommit   string `json:"synchronous_commit"`
	JournalSize         int64  `json:"journal_size"`
	KeysEstimate        int64  `json:"keys_estimate"`
	LastCommit          string `json:"last_commit"`
	Now                 string `json:"now"`
	// Lease is absent while no replica ever took it.
	Lease     *storeLeaseJSON    `json:"lease,omitempty"`
	Replicas  []storeReplicaJSON `json:"replicas"`
	StoreKeys []storeKeyJSON     `json:"store_keys"`
	// Vault is absent while no vault was created in the store.
	Vault *storeVaultJSON `json:"vault,omitempty"`
}

type storeLeaseJSON struct {
	Holder            string  `json:"holder"`
	Epoch             int64   `json:"epoch"`
	Held              bool    `json:"held"`
	Acquired          string  `json:"acquired"`
	Renewed           string  `json:"renewed"`
	Expires           string  `json:"expires"`
	AgeSeconds        float64 `json:"age_seconds"`
	RenewedSecondsAgo float64 `json:"renewed_seconds_ago"`
}

type storeReplicaJSON struct {
	Name               string  `json:"name"`
	Instance           string  `json:"instance"`
	Holder             string  `json:"holder"`
	Addr               string  `json:"addr"`
	Role               string  `json:"role"`
	Started            string  `json:"started"`
	LastSeen           string  `json:"last_seen"`
	LastSeenSecondsAgo float64 `json:"last_seen_seconds_ago"`
}

type storeKeyJSON struct {
	Name      string `json:"name"`
	CreatedBy string `json:"created_by"`
	Created   string `json:"created"`
	// Public is the key's public part ("" for a secret-only key).
	Public string `json:"public,omitempty"`
}

type storeVaultJSON struct {
	Generation int64  `json:"generation"`
	Bytes      int    `json:"bytes"`
	Updated    string `json:"updated"`
}

func statusJSON(st *pgkv.Status) storeStatusJSON {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	out := storeStatusJSON{
		SchemaVersion: st.SchemaVersion, BinarySchemaVersion: st.BinaryVersion,
		SynchronousCommit: st.SynchronousCommit, JournalSize: st.JournalSize,
		KeysEstimate: st.Keys, LastCommit: ts(st.LastCommit), Now: ts(st.Now),
		Replicas: []storeReplicaJSON{}, StoreKeys: []storeKeyJSON{},
	}
	if l := st.Lease; l != nil && l.Epoch != 0 {
		out.Lease = &storeLeaseJSON{
			Holder: l.Holder, Epoch: l.Epoch, Held: l.Expires.After(st.Now),
			Acquired: ts(l.Acquired), Renewed: ts(l.Renewed), Expires: ts(l.Expires),
			AgeSeconds: st.Now.Sub(l.Acquired).Seconds(), RenewedSecondsAgo: st.Now.Sub(l.Renewed).Seconds(),
		}
	}
	for _, r := range st.Replicas {
		out.Replicas = append(out.Replicas, storeReplicaJSON{
			Name: r.Name, Instance: r.Instance, Holder: r.Holder, Addr: r.Addr, Role: r.Role,
			Started: ts(r.StartedAt), LastSeen: ts(r.LastSeen), LastSeenSecondsAgo: st.Now.Sub(r.LastSeen).Seconds(),
		})
	}
	for _, k := range st.StoreKeys {
		out.StoreKeys = append(out.StoreKeys, storeKeyJSON{Name: k.Name, CreatedBy: k.CreatedBy, Created: ts(k.CreatedAt), Public: k.Public})
	}
	if st.Vault != nil {
		out.Vault = &storeVaultJSON{Generation: st.Vault.Generation, Bytes: st.Vault.Bytes, Updated: ts(st.Vault.Updated)}
	}
	return out
}
