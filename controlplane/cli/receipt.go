package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/receipt"
)

const receiptUsage = "verify FILE --key PUB [--witness-key KEY] [--json]"

// runReceipt is `latch receipt verify`: an offline check of a receipt
// (package receipt), reaching no control plane.
func runReceipt(_ context.Context, env *Env, args []string) error {
	sub, rest, err := splitSubcommand(env, "receipt", receiptUsage, args)
	if err != nil {
		return err
	}
	fs := newFlagSet(env, "receipt "+sub, "receipt "+receiptUsage+
		"\n\nChecks a receipt offline: its record's fields are the receipt's, the proof reaches the checkpoint, and the checkpoint is signed by PUB.\n"+
		"FILE (- for stdin) holds the receipt, or a tool call's structuredContent or result that carries one.")
	key := fs.String("key", "", "the journal's verifier key: the text (<origin>+<hash>+<key>) or a file holding it (a data dir's keys/journal.pub)")
	witnessKey := fs.String("witness-key", "", "also require a valid cosignature of this witness on the checkpoint: its cosignature verifier key (text or file)")
	asJSON := fs.Bool("json", false, "print {ok, execution_id, state, journal_index, checkpoint_size, origin, witnesses, error} as JSON")
	pos, err := parse(fs, rest)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("receipt verify needs exactly one FILE (- for stdin)")
	}
	if *key == "" {
		return usagef("receipt verify needs --key PUB: the journal's verifier key, e.g. --key DATA_DIR/keys/journal.pub")
	}
	vkey, err := readKey(*key)
	if err != nil {
		return err
	}
	var opts receipt.Options
	if *witnessKey != "" {
		k, err := readKey(*witnessKey)
		if err != nil {
			return err
		}
		opts.WitnessKeys = []string{k}
	}
	var data []byte
	if pos[0] == "-" {
		data, err = io.ReadAll(io.LimitReader(env.Stdin, 8<<20))
	} else {
		data, err = os.ReadFile(pos[0])
	}
	if err != nil {
		return fmt.Errorf("read the receipt: %w", err)
	}
	r, err := receipt.Parse(receiptObject(data))
	var c *receipt.Checked
	if err == nil {
		c, err = receipt.VerifyWith(r, vkey, opts)
	}
	if *asJSON {
		out := receiptVerifyJSON{OK: err == nil}
		if r != nil {
			out.ExecutionID, out.State, out.JournalIndex = r.ExecutionID, r.State, r.JournalIndex
		}
		if c != nil {
			out.CheckpointSize, out.Origin = c.Size, c.Origin
			for _, w := range c.Witnesses {
				out.Witnesses = append(out.Witnesses, w.Witness)
			}
		}
		if err != nil {
			out.Error = err.Error()
		}
		enc := json.NewEncoder(env.Stdout)
		if e := enc.Encode(out); e != nil {
			return e
		}
		if err != nil {
			return errSilent
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("receipt does NOT verify: %w", err)
	}
	fmt.Fprintf(env.Stdout, "receipt verified: %s %s (tool %s, actor %s) is journal record %d, in the checkpoint of size %d signed by %s",
		r.ExecutionID, r.State, r.Tool, r.Actor, r.JournalIndex, c.Size, c.Origin)
	for _, w := range c.Witnesses {
		fmt.Fprintf(env.Stdout, ", co-signed by witness %s at %s", w.Witness, w.Time.Format(time.RFC3339))
	}
	fmt.Fprintln(env.Stdout)
	return nil
}

// receiptVerifyJSON is `latch receipt verify --json`
// (docs/reference/cli-json.md). Fields a failed check did not reach are
// zero.
type receiptVerifyJSON struct {
	OK             bool   `json:"ok"`
	ExecutionID    string `json:"execution_id"`
	State          string `json:"state"`
	JournalIndex   uint64 `json:"journal_index"`
	CheckpointSize int64  `json:"checkpoint_size"`
	Origin         string `json:"origin"`
	// Witnesses are the witnesses whose cosignature verified (those
	// --witness-key asked for).
	Witnesses []string `json:"witnesses"`
	Error     string   `json:"error"`
}

// readKey is a verifier key given as text or as a file holding it.
func readKey(v string) (string, error) {
	if strings.Count(v, "+") >= 2 && !strings.ContainsAny(v, "\n") {
		if _, err := os.Stat(v); err != nil {
			return v, nil // the key itself
		}
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return "", usagef("--key %s: neither a verifier key (<origin>+<hash>+<key>) nor a readable file: %v", v, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// receiptObject finds the receipt in what a client saved: the receipt
// itself, an object carrying it under "receipt" (structuredContent, or
// latch_receipt's answer), or a tool result carrying that under
// "structuredContent". Anything else is handed to Parse as it is, to say
// what is wrong with it.
func receiptObject(data []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	if sc, ok := m["structuredContent"]; ok {
		return receiptObject(sc)
	}
	if r, ok := m["receipt"]; ok {
		return r
	}
	return data
}

// execReceipt is `latch exec receipt ID`: the execution's receipt, proven
// against a checkpoint signed for it, in its canonical JSON form.
func execReceipt(ctx context.Context, env *Env, t *target, pos []string) error {
	if len(pos) != 1 {
		return usagef("exec receipt needs exactly one execution ID")
	}
	c, closeFn, err := t.dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	got, err := c.Get(ctx, &controlplanev1.GetRequest{ExecutionId: pos[0], Receipt: true})
	if err != nil {
		return rpcError(err)
	}
	if got.GetReceipt() == nil {
		return errors.New("the control plane issued no receipt for " + pos[0] + " (an older version, or it failed: see its log)")
	}
	_, err = fmt.Fprintf(env.Stdout, "%s\n", receipt.Marshal(receipt.FromProto(got.GetReceipt())))
	return err
}
