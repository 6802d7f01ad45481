package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/latchhq/latch/controlplane/audit"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backends"
)

func runAudit(ctx context.Context, env *Env, args []string) error {
	const usage = "verify DATA_DIR|--store URL|--export FILE --key FILE | export DATA_DIR|--store URL [-o FILE] [--format F] | prove DATA_DIR|--store URL ACT_ID"
	sub, args, err := splitSubcommand(env, "audit", usage, args)
	if err != nil {
		return err
	}
	fs := newFlagSet(env, "audit "+sub, subcommandSynopsis("audit", sub, usage))
	storeURL := fs.String("store", "", "read a PostgreSQL store (postgres://… or key=value) instead of a data dir: live, from one consistent snapshot; a role with only SELECT suffices")
	// source is the data dir or store the positional arguments and
	// --store name; rest are the positional arguments after it.
	source := func(pos []string, what string) (string, []string, error) {
		if *storeURL != "" {
			if !backends.IsSpec(*storeURL) {
				return "", nil, usagef("--store takes a PostgreSQL connection string (postgres://user@host/db or \"host=… dbname=…\")")
			}
			return *storeURL, pos, nil
		}
		if len(pos) == 0 {
			return "", nil, usagef("audit %s needs a DATA_DIR or --store URL", what)
		}
		return pos[0], pos[1:], nil
	}
	switch sub {
	case "verify":
		export := fs.String("export", "", "verify an export file instead of a data dir")
		keyFile := fs.String("key", "", "verifier key file (default DATA_DIR/keys/journal.pub, or the verifier in the --store); required with --export unless a DATA_DIR or --store is given")
		vf := addVerifyFlags(fs)
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		opts, err := vf.options()
		if err != nil {
			return err
		}
		progress := newProgressLine(env.Stderr)
		defer progress.done()
		opts.Progress = progress.update
		var rep *journal.Report
		switch {
		case *export != "":
			var vkey []byte
			if *storeURL != "" && *keyFile == "" {
				// The verifier is public: the store keeps it in clear.
				v, err := audit.StoreVerifier(ctx, *storeURL)
				if err != nil {
					return err
				}
				vkey = []byte(v)
			} else {
				key := *keyFile
				if key == "" && len(pos) == 1 {
					key = datadir.Verifier(pos[0])
				}
				if key == "" {
					return usagef("--export needs the verifier key: --key FILE (a data dir's keys/journal.pub), a DATA_DIR argument or --store URL")
				}
				if vkey, err = os.ReadFile(key); err != nil {
					return fmt.Errorf("read verifier key: %w", err)
				}
			}
			f, err := os.Open(*export)
			if err != nil {
				return err
			}
			defer f.Close()
			src, err := journal.ReadExport(bufio.NewReader(f))
			if err != nil {
				return err
			}
			rep, err = journal.VerifyWith(src, strings.TrimSpace(string(vkey)), opts)
			if err != nil {
				return err
			}
		case len(pos) == 1 || *storeURL != "":
			src, rest, err := source(pos, "verify")
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return usagef("unexpected arguments %q after the data dir or --store", rest)
			}
			var state *store.StateReport
			rep, state, err = audit.VerifyAll(ctx, src, opts)
			if err != nil {
				return err
			}
			progress.done()
			fmt.Fprintln(env.Stdout, state.String())
			if !state.OK() {
				fmt.Fprintln(env.Stdout, rep.String())
				vf.verdict(env, rep) //nolint:errcheck // the state mismatch already fails the check
				return errSilent
			}
		default:
			return usagef("audit verify needs a DATA_DIR, --store URL or --export FILE")
		}
		progress.done()
		fmt.Fprintln(env.Stdout, rep.String())
		return vf.verdict(env, rep)
	case "export":
		out := fs.String("o", "", "write to this file (default stdout)")
		format := fs.String("format", audit.FormatJournal, "journal (the export latch audit verify --export reads), or a draft interop layout: mcp-audit-draft (the proposed MCP audit record: event id, time, principal, event type, tool, outcome, previous hash, event hash; one line per record), mcp-decision-draft (decision and outcome records)")
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		src, rest, err := source(pos, "export")
		if err != nil {
			return err
		}
		if len(rest) > 0 {
			return usagef("unexpected arguments %q after the data dir or --store", rest)
		}
		w := env.Stdout
		if *out != "" {
			f, err := os.Create(*out)
			if err != nil {
				return err
			}
			defer f.Close()
			bw := bufio.NewWriter(f)
			defer bw.Flush()
			w = bw
		}
		if !slices.Contains(audit.Formats, *format) {
			return usagef("--format %q: want one of %s", *format, strings.Join(audit.Formats, ", "))
		}
		return audit.ExportAs(src, w, *format)
	case "prove":
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		src, rest, err := source(pos, "prove")
		if err != nil {
			return err
		}
		if len(rest) != 1 {
			return usagef("audit prove needs DATA_DIR (or --store URL) and an execution ID")
		}
		cp, proofs, err := audit.Prove(src, rest[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "checkpoint:\n%s\n", cp)
		for _, p := range proofs {
			fmt.Fprintf(env.Stdout, "record %d leaf %s\n", p.Index, p.LeafHash)
			for _, h := range p.Hashes {
				fmt.Fprintf(env.Stdout, "  %s\n", h)
			}
		}
		fmt.Fprintf(env.Stdout, "%d record(s) of %s proved against the checkpoint (RFC 6962 inclusion proofs, checked)\n", len(proofs), rest[0])
		return nil
	}
	return usagef("unknown audit subcommand %q (want verify, export or prove)", sub)
}

// verifyFlags are the flags of `audit verify` about anchoring: a
// checkpoint copy, and whether records not yet anchored fail the check.
type verifyFlags struct {
	fs              *flag.FlagSet
	copyPath        *string
	requireAnchored *bool
	witnessKey      *string
}

func addVerifyFlags(fs *flag.FlagSet) *verifyFlags {
	return &verifyFlags{
		fs:       fs,
		copyPath: fs.String("checkpoints", "", "checkpoint copy (the JSON lines --checkpoint-copy writes): its checkpoints are checked too, and only they count as anchors"),
		requireAnchored: fs.Bool("require-anchored", false,
			"exit 1 when records come after the newest checkpoint (not yet anchored); on by default with --checkpoints, off with --require-anchored=false"),
		witnessKey: fs.String("witness-key", "", "a witness's cosignature verifier key (text or file): report the records and checkpoints it never co-signed, and a co-signed checkpoint these records do not reproduce as a fork"),
	}
}

// options reads the checkpoint copy, when given.
func (v *verifyFlags) options() (journal.Options, error) {
	var opts journal.Options
	if *v.witnessKey != "" {
		k, err := readKey(*v.witnessKey)
		if err != nil {
			return opts, err
		}
		opts.WitnessKeys = []string{k}
	}
	if *v.copyPath == "" {
		return opts, nil
	}
	notes, err := readCheckpointCopy(*v.copyPath)
	if err != nil {
		return opts, err
	}
	opts.CheckpointCopy = &journal.CheckpointCopy{Name: *v.copyPath, Notes: notes}
	return opts, nil
}

// required reports whether records not yet anchored fail the check, and
// why: as --require-anchored says when given, else when a copy was given.
func (v *verifyFlags) required() (bool, string) {
	set := false
	v.fs.Visit(func(f *flag.Flag) { set = set || f.Name == "require-anchored" })
	if set {
		return *v.requireAnchored, "--require-anchored"
	}
	return *v.copyPath != "", "the default with --checkpoints"
}

// verdict is the exit of `audit verify` once the report is printed:
// errSilent (exit 1) on any problem, or on records not yet anchored when
// they are required to be.
func (v *verifyFlags) verdict(env *Env, rep *journal.Report) error {
	if !rep.OK() {
		return errSilent
	}
	if required, why := v.required(); required && rep.Unanchored() > 0 {
		what := fmt.Sprintf("%d records are", rep.Unanchored())
		if rep.Unanchored() == 1 {
			what = "1 record is"
		}
		fmt.Fprintf(env.Stdout, "refused: %s not yet anchored (%s): no checkpoint vouches for them; pass --require-anchored=false to accept them unanchored\n", what, why)
		return errSilent
	}
	return nil
}

func readCheckpointCopy(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint copy: %w", err)
	}
	var out [][]byte
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var rec struct {
			Note string `json:"note"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Note == "" {
			return nil, fmt.Errorf("%s:%d: not a checkpoint line", path, i+1)
		}
		out = append(out, []byte(rec.Note))
	}
	return out, nil
}
