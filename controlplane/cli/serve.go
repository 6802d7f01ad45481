package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/latchhq/latch/tools"
)

func runServe(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	data := fs.String("data", "", "data dir (Badger store, keys, vault, API socket); required")
	catalogPath := fs.String("catalog", "", "tool catalog (YAML); required")
	ckptCopy := fs.String("checkpoint-copy", "", "append every signed checkpoint to this file (keep it off the data dir's disk)")
	vaultPath := fs.String("vault", "", "vault file (default DATA/vault.json)")
	vaultKey := fs.String("vault-key-file", "", "unlock the vault at start with this 32-byte key file, creating both when absent (else the vault starts locked and denies every action until `latch vault unlock`)")
	level := fs.String("log-level", "info", "trace, debug, info, warn or error")
	var actors, trusted listFlag
	fs.Var(&actors, "actor", "an actor known without a token, e.g. a stdio front's actor (repeatable)")
	fs.Var(&trusted, "trusted-actor", "an actor whose agent sessions need no authorization (repeatable)")
	openSessions := fs.Bool("open-sessions", false, "do not require authorization of new agent sessions (not for production)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *data == "" || *catalogPath == "" {
		return usagef("--data and --catalog are required (tools/examples/catalog.yaml is an example catalog)")
	}
	cat, err := tools.Load(*catalogPath)
	if err != nil {
		return fmt.Errorf("catalog refused:\n%v", err)
	}
	st, err := newStack(stackConfig{
		Logger: newLogger(env, *level), DataDir: *data, Catalog: cat, CheckpointCopy: *ckptCopy,
		VaultPath: *vaultPath, VaultKeyFile: *vaultKey, Actors: actors, Trusted: trusted, OpenSessions: *openSessions,
	})
	if err != nil {
		return err
	}
	defer st.close()
	return st.srv.Run(ctx)
}

func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", dir, err)
	}
	return nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
