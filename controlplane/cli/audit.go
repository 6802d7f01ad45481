package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/latchhq/latch/controlplane/audit"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/controlplane/store"
)

func runAudit(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 {
		return usagef("audit needs a subcommand: verify DATA_DIR | verify --export FILE --key FILE | export DATA_DIR [-o FILE] | prove DATA_DIR ACT_ID")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("audit "+sub, flag.ContinueOnError)
	switch sub {
	case "verify":
		export := fs.String("export", "", "verify an export file instead of a data dir")
		keyFile := fs.String("key", "", "verifier key file (default DATA_DIR/keys/journal.pub); required with --export unless a DATA_DIR is given")
		copies := fs.String("checkpoints", "", "external checkpoint copy (JSON lines written by --checkpoint-copy) to check too")
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		var extra [][]byte
		if *copies != "" {
			if extra, err = readCheckpointCopy(*copies); err != nil {
				return err
			}
		}
		var rep *journal.Report
		switch {
		case *export != "":
			key := *keyFile
			if key == "" && len(pos) == 1 {
				key = server.VerifierPath(pos[0])
			}
			if key == "" {
				return usagef("--export needs the verifier key: --key FILE (a data dir's keys/journal.pub) or a DATA_DIR argument")
			}
			vkey, err := os.ReadFile(key)
			if err != nil {
				return fmt.Errorf("read verifier key: %w", err)
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
			rep, err = journal.Verify(audit.WithCheckpoints(src, extra), strings.TrimSpace(string(vkey)))
			if err != nil {
				return err
			}
		case len(pos) == 1:
			var state *store.StateReport
			rep, state, err = audit.VerifyAll(ctx, pos[0], extra)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, state.String())
			if !state.OK() {
				fmt.Fprintln(env.Stdout, rep.String())
				return errSilent
			}
		default:
			return usagef("audit verify needs a DATA_DIR or --export FILE")
		}
		fmt.Fprintln(env.Stdout, rep.String())
		if !rep.OK() {
			return errSilent
		}
		return nil
	case "export":
		out := fs.String("o", "", "write to this file (default stdout)")
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("audit export needs a DATA_DIR")
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
		return audit.Export(pos[0], w)
	case "prove":
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 2 {
			return usagef("audit prove needs DATA_DIR and an execution ID")
		}
		cp, proofs, err := audit.Prove(pos[0], pos[1])
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
		fmt.Fprintf(env.Stdout, "%d record(s) of %s proved against the checkpoint (RFC 6962 inclusion proofs, checked)\n", len(proofs), pos[1])
		return nil
	}
	return usagef("unknown audit subcommand %q (want verify, export or prove)", sub)
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
