package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/controlplane/stack"
	"github.com/latchhq/latch/internal/actorname"
	"github.com/latchhq/latch/internal/buildinfo"
	"github.com/latchhq/latch/internal/tlsfiles"
)

func runServe(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "serve", "serve --data DIR --catalog FILE [flags]")
	data := fs.String("data", "", "data dir (Badger store, keys, vault, API socket); required")
	storeURL := fs.String("store", "", "PostgreSQL store: a postgres:// URL or key=value connection string (several hosts with target_session_attrs=read-write reach the primary); default the Badger store in DATA/db")
	replica := fs.String("replica", "", "with a PostgreSQL --store: this replica's name in the lease (default the host name)")
	leaseTTL := fs.Duration("lease-ttl", stack.DefaultLeaseTTL, "with a PostgreSQL --store: how long the active replica's lease lasts unless renewed (renewed every eighth; the active stops sending at three quarters without a renewal; a standby takes over after it)")
	advertise := fs.String("advertise-addr", "", "with a PostgreSQL --store: the address fronts and operators reach this replica's API at, which standbys name while it is active (default: the --grpc-listen address, with the host name for a wildcard host; without --grpc-listen, unix:// and the socket's path)")
	catalogPath := fs.String("catalog", "", "tool catalog (YAML); required")
	ckptCopy := fs.String("checkpoint-copy", "", "append every signed checkpoint to this file (keep it off the data dir's disk)")
	vaultPath := fs.String("vault", "", "vault file (default DATA/vault.json); on a PostgreSQL --store the vault is in the store, and this file is imported into it once when the store has none")
	vaultKey := fs.String("vault-key-file", "", "unlock the vault at start with this 32-byte key file, creating both when absent (else the vault starts locked and denies every action until latch vault unlock; on a PostgreSQL --store a replica needs the vault unlocked at start: give this or --vault-passphrase-file)")
	vaultPass := fs.String("vault-passphrase-file", "", "unlock a passphrase vault at start with the first line of this file (e.g. a systemd credential), creating the vault when absent")
	level := fs.String("log-level", "info", "trace, debug, info, warn or error")
	var actors, trusted listFlag
	fs.Var(&actors, "actor", "an actor known without a token, e.g. a stdio front's actor (repeatable)")
	fs.Var(&trusted, "trusted-actor", "an actor whose agent sessions need no authorization (repeatable)")
	var frontActors listFlag
	fs.Var(&frontActors, "front-actor", "IDENTITY=ACTOR: the front whose client certificate identity is IDENTITY may submit as ACTOR without the agent's token (a stdio front bound to ACTOR; * for a front that authenticates agents itself, e.g. with JWT) (repeatable)")
	openSessions := fs.Bool("open-sessions", false, "do not require authorization of new agent sessions (not for production)")
	bindRuns := fs.Bool("bind-runs", false, "bind a run id's session authorization to the MCP session that named it (else to its token): another MCP session naming an authorized run needs its own latch session authorize")
	grpcListen := fs.String("grpc-listen", "", "also serve the API on this TCP address (latch-mcp or operators on other hosts); mutual TLS 1.3 (--tls-cert, --tls-key, --tls-client-ca) required unless loopback")
	tlsCert := fs.String("tls-cert", "", "with --grpc-listen: server certificate (PEM)")
	tlsKey := fs.String("tls-key", "", "with --grpc-listen: server key (PEM)")
	tlsClientCA := fs.String("tls-client-ca", "", "with --grpc-listen: the CA that signs fronts' and operators' client certificates (mutual TLS; required with --tls-cert)")
	var frontIDs, operatorIDs listFlag
	var frontUIDs, operatorUIDs uidFlag
	fs.Var(&frontIDs, "front-identity", "a client certificate identity that may call agent-facing RPCs over TCP: its URI SAN (spiffe://…) or cn:SUBJECT_CN (repeatable)")
	fs.Var(&operatorIDs, "operator-identity", "a client certificate identity that may call operator RPCs over TCP, like --front-identity; NAME=IDENTITY binds it to the operator name NAME, the only name it may create console tokens for (cn:NAME is bound to NAME; an unbound URI to none) (repeatable)")
	fs.Var(&frontUIDs, "front-uid", "a uid that may call agent-facing RPCs on the unix socket (an MCP front under its own account on this host; repeatable)")
	fs.Var(&operatorUIDs, "operator-uid", "a uid that may call every RPC on the unix socket, besides the server's own uid and root (repeatable)")
	maxDesc := fs.Int("upstream-max-description", stack.DefaultMaxDescription, "the longest upstream tool description agents see, in bytes; a longer one is cut with a note saying so")
	opsF := addOpsFlags(fs, "")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if err := opsF.validate(*level); err != nil {
		return err
	}
	if *maxDesc <= 0 {
		return usagef("--upstream-max-description %d: want a positive number of bytes", *maxDesc)
	}
	if *data == "" || *catalogPath == "" {
		return usagef("--data and --catalog are required (tools/examples/catalog.yaml is an example catalog)")
	}
	if *grpcListen == "" && (*tlsCert != "" || *tlsKey != "" || *tlsClientCA != "" || len(frontIDs)+len(operatorIDs) > 0) {
		return usagef("--tls-cert, --tls-key, --tls-client-ca, --front-identity and --operator-identity configure the TCP listener: give --grpc-listen ADDR too")
	}
	if *tlsCert != "" && *tlsClientCA == "" {
		return usagef("--tls-cert without --tls-client-ca: no TCP caller could be identified as a front or an operator; give --tls-client-ca CA.pem (the CA that signs their client certificates)")
	}
	if *vaultKey != "" && *vaultPass != "" {
		return usagef("--vault-key-file and --vault-passphrase-file both unlock the vault: give one")
	}
	logger := formattedLogger(env.Stderr, *level, opsF.logFormat)
	tlsCfg, err := serverTLS(*tlsCert, *tlsKey, *tlsClientCA, logger.Named("tls"))
	if err != nil {
		return err
	}
	fa := api.FrontActors{}
	for _, v := range frontActors {
		id, actor, err := api.ParseFrontActor(v)
		if err != nil {
			return usagef("--front-actor %q: %v", v, err)
		}
		// The identity is compared with the one authz gives the front's
		// certificate: one it could never give binds nothing.
		if _, err := authz.ParseIdentity(id); err != nil {
			return usagef("--front-actor %q: %v", v, err)
		}
		fa[id] = append(fa[id], actor)
	}
	for _, l := range []struct {
		flag  string
		names []string
	}{{"--actor", actors}, {"--trusted-actor", trusted}} {
		for _, name := range l.names {
			if err := actorname.Check(name); err != nil {
				return usagef("%s %q: %v", l.flag, name, err)
			}
		}
	}
	// The metrics' tool labels are bounded by the catalog at start (tools
	// a later reload adds count as "other" until the next start); the
	// control plane itself loads and owns the catalog (catalog.File).
	cat, err := channels.Default().Catalog().Load(*catalogPath)
	if err != nil {
		return fmt.Errorf("catalog refused:\n%v", err)
	}
	ob, err := stack.NewObservability(ctx, logger, cat)
	if err != nil {
		return err
	}
	defer ob.Close()
	st, err := stack.New(stack.Config{
		Logger: logger, Telemetry: ob.Telemetry, DataDir: *data, Store: *storeURL, Replica: *replica, LeaseTTL: *leaseTTL, Advertise: *advertise, Context: ctx, Catalog: catalog.FileOf(channels.Default().Catalog(), *catalogPath), CheckpointCopy: *ckptCopy, CommandArgs: operatorArgs(*data),
		VaultPath: *vaultPath, VaultKeyFile: *vaultKey, VaultPassphraseFile: *vaultPass, Actors: actors, Trusted: trusted, OpenSessions: *openSessions, BindRuns: *bindRuns,
		FrontActors: fa, TCPAddr: *grpcListen, TLS: tlsCfg, UpstreamMaxDescription: *maxDesc, Version: buildinfo.Read().Version,
		Access: authz.Config{
			FrontIdentities: frontIDs, OperatorIdentities: operatorIDs,
			FrontUIDs: frontUIDs, OperatorUIDs: operatorUIDs,
		},
	})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := ob.Serve(opsF.config(), st); err != nil {
		st.Server.Close()
		return err
	}
	stopHUP := reloadOnHUP(ctx, st.Server.CatalogManager, logger)
	defer stopHUP()
	return st.Run(ctx)
}

// reloadOnHUP reloads the catalog on every SIGHUP until ctx ends or the
// returned stop is called. A refused catalog is logged by the manager and
// changes nothing. A standby has no catalog loaded (manager returns nil):
// it reads the file when it takes over.
func reloadOnHUP(ctx context.Context, manager func() *catalog.Manager, log hclog.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-hup:
				m := manager()
				if m == nil {
					log.Info("SIGHUP on a standby: nothing to reload (the catalog file is read at takeover)")
					continue
				}
				if _, err := m.Reload(ctx, catalog.TriggerSIGHUP); err != nil {
					log.Error("catalog reload on SIGHUP refused", "error", err)
				}
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// uidFlag is a repeatable numeric uid flag.
type uidFlag []uint32

func (u *uidFlag) String() string { return fmt.Sprint([]uint32(*u)) }
func (u *uidFlag) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not a numeric uid", v)
	}
	*u = append(*u, uint32(n))
	return nil
}

// serverTLS builds the TCP listener's TLS configuration from PEM files
// (TLS 1.3, mutual with a client CA; the files are re-read when they
// change, so certificates rotate without a restart).
func serverTLS(certFile, keyFile, clientCA string, log hclog.Logger) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		if clientCA != "" {
			return nil, usagef("--tls-client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	cfg, err := tlsfiles.Server(certFile, keyFile, clientCA, log)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	return cfg, nil
}
