package cli

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/stack"
	"github.com/latchhq/latch/internal/actorname"
	"github.com/latchhq/latch/internal/buildinfo"
	"github.com/latchhq/latch/internal/config"
	"github.com/latchhq/latch/internal/tlsfiles"
)

// serveBinary is latch serve's config file and environment
// (internal/config): LATCH_SERVE_* variables, keys from serveFlags.
var serveBinary = config.Binary{
	Name:       "latch serve",
	EnvPrefix:  "LATCH_SERVE_",
	Reloadable: []string{"log_level"},
	Secret:     storeSecret,
}

// storeSecret refuses a PostgreSQL connection string with a password in
// the config file: the password goes in a file the string names.
func storeSecret(key, value string) string {
	if key != "store" {
		return ""
	}
	inline := false
	if u, err := url.Parse(value); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		_, inline = u.User.Password()
		inline = inline || u.Query().Has("password")
	} else {
		for _, f := range strings.Fields(value) {
			if strings.HasPrefix(strings.ToLower(f), "password=") {
				inline = true
			}
		}
	}
	if !inline {
		return ""
	}
	return "the connection string holds a password, and a secret is never written in the config file: put the password in a file readable only by the service and name it in the string (passfile=/etc/latch/pgpass, a libpq password file), or set the environment (PGPASSFILE, or the whole string in LATCH_SERVE_STORE)"
}

// serveOptions are latch serve's settings (serveFlags).
type serveOptions struct {
	data, storeURL, replica, advertise, catalogPath, ckptCopy *string
	witness                                                   *witnessFlags
	leaseTTL                                                  *time.Duration
	vaultPath, vaultKey, vaultPass, level                     *string
	actors, trusted, frontActors                              listFlag
	openSessions, bindRuns                                    *bool
	grpcListen, tlsCert, tlsKey, tlsClientCA                  *string
	frontIDs, operatorIDs                                     listFlag
	frontUIDs, operatorUIDs                                   uidFlag
	maxDesc                                                   *int
	eventSinks                                                listFlag
	eventConsole                                              *string
	eventUnknownAfter                                         *time.Duration
	eventMaxAttempts                                          *int
	eventRetention                                            *time.Duration
	sinks                                                     []events.Sink
	ops                                                       *opsFlags
	fa                                                        api.FrontActors
}

// serveFlags is latch serve's flag set (its keys are the config file's).
func serveFlags(env *Env) (*flag.FlagSet, *serveOptions) {
	fs := newFlagSet(env, "serve", "serve [--config FILE] --data DIR --catalog FILE [flags]")
	config.Register(fs)
	o := &serveOptions{}
	o.data = fs.String("data", "", "data dir (Badger store, keys, vault, API socket); required")
	o.storeURL = fs.String("store", "", "PostgreSQL store: a postgres:// URL or key=value connection string (several hosts with target_session_attrs=read-write reach the primary); default the Badger store in DATA/db")
	o.replica = fs.String("replica", "", "with a PostgreSQL --store: this replica's name in the lease (default the host name)")
	o.leaseTTL = fs.Duration("lease-ttl", stack.DefaultLeaseTTL, "with a PostgreSQL --store: how long the active replica's lease lasts unless renewed (renewed every eighth; the active stops sending at three quarters without a renewal; a standby takes over after it)")
	o.advertise = fs.String("advertise-addr", "", "with a PostgreSQL --store: the address fronts and operators reach this replica's API at, which standbys name while it is active (default: the --grpc-listen address, with the host name for a wildcard host; without --grpc-listen, unix:// and the socket's path)")
	o.catalogPath = fs.String("catalog", "", "tool catalog (YAML); required")
	o.ckptCopy = fs.String("checkpoint-copy", "", "append every signed checkpoint to this file (keep it off the data dir's disk)")
	o.witness = addWitnessFlags(fs)
	o.vaultPath = fs.String("vault", "", "vault file (default DATA/vault.json); on a PostgreSQL --store the vault is in the store, and this file is imported into it once when the store has none")
	o.vaultKey = fs.String("vault-key-file", "", "unlock the vault at start with this 32-byte key file, creating both when absent (else the vault starts locked and denies every action until latch vault unlock; on a PostgreSQL --store a replica needs the vault unlocked at start: give this or --vault-passphrase-file)")
	o.vaultPass = fs.String("vault-passphrase-file", "", "unlock a passphrase vault at start with the first line of this file (e.g. a systemd credential), creating the vault when absent")
	o.level = fs.String("log-level", "info", "trace, debug, info, warn or error")
	fs.Var(&o.actors, "actor", "an actor known without a token, e.g. a stdio front's actor (repeatable)")
	fs.Var(&o.trusted, "trusted-actor", "an actor whose agent sessions need no authorization (repeatable)")
	fs.Var(&o.frontActors, "front-actor", "IDENTITY=ACTOR: the front whose client certificate identity is IDENTITY may submit as ACTOR without the agent's token (a stdio front bound to ACTOR; * for a front that authenticates agents itself, e.g. with JWT) (repeatable)")
	o.openSessions = fs.Bool("open-sessions", false, "do not require authorization of new agent sessions (not for production)")
	o.bindRuns = fs.Bool("bind-runs", false, "bind a run id's session authorization to the MCP session that named it (else to its token): another MCP session naming an authorized run needs its own latch session authorize")
	o.grpcListen = fs.String("grpc-listen", "", "also serve the API on this TCP address (latch-mcp or operators on other hosts); mutual TLS 1.3 (--tls-cert-file, --tls-key-file, --tls-client-ca-file) required unless loopback")
	o.tlsCert = fs.String("tls-cert-file", "", "with --grpc-listen: server certificate (PEM)")
	o.tlsKey = fs.String("tls-key-file", "", "with --grpc-listen: server key (PEM)")
	o.tlsClientCA = fs.String("tls-client-ca-file", "", "with --grpc-listen: the CA that signs fronts' and operators' client certificates (mutual TLS; required with --tls-cert-file)")
	config.Alias(fs, "tls-cert", "tls-cert-file")
	config.Alias(fs, "tls-key", "tls-key-file")
	config.Alias(fs, "tls-client-ca", "tls-client-ca-file")
	fs.Var(&o.frontIDs, "front-identity", "a client certificate identity that may call agent-facing RPCs over TCP: its URI SAN (spiffe://…) or cn:SUBJECT_CN (repeatable)")
	fs.Var(&o.operatorIDs, "operator-identity", "a client certificate identity that may call operator RPCs over TCP, like --front-identity; NAME=IDENTITY binds it to the operator name NAME, the only name it may create console tokens for (cn:NAME is bound to NAME; an unbound URI to none) (repeatable)")
	fs.Var(&o.frontUIDs, "front-uid", "a uid that may call agent-facing RPCs on the unix socket (an MCP front under its own account on this host; repeatable)")
	fs.Var(&o.operatorUIDs, "operator-uid", "a uid that may call every RPC on the unix socket, besides the server's own uid and root (repeatable)")
	o.maxDesc = fs.Int("upstream-max-description", stack.DefaultMaxDescription, "the longest upstream tool description agents see, in bytes; a longer one is cut with a note saying so")
	fs.Var(&o.eventSinks, "event-sink", "an event sink: NAME url=https://… secret=CREDENTIAL [format=json|slack] [events=approval_requested,…] [allow_private=true] [ca_file=PATH]; secret names a bearer credential in the vault holding the whsec_ signing secret (docs/how-to/notifications.md) (repeatable)")
	o.eventConsole = fs.String("event-console-url", "", "the console's base URL for the deep links in events (https://latch.example.com/ui/)")
	o.eventUnknownAfter = fs.Duration("event-outcome-unknown-after", events.DefaultUnknownAfter, "send an outcome_unknown event for an execution unknown this long")
	o.eventMaxAttempts = fs.Int("event-max-attempts", events.DefaultMaxAttempts, "attempts per sink before an event is dead-lettered (latch events replay sends it again)")
	o.eventRetention = fs.Duration("event-retention", events.DefaultRetention, "keep an event every sink received this long, then prune it (dead-lettered and queued events are kept); negative: keep forever")
	o.ops = addOpsFlags(fs, "")
	return fs, o
}

// parseServe reads latch serve's flags, environment and config file and
// checks them (latch serve and latch config validate).
func parseServe(env *Env, args []string) (*flag.FlagSet, *serveOptions, error) {
	fs, o := serveFlags(env)
	if _, err := parse(fs, args); err != nil {
		return nil, nil, err
	}
	if err := serveBinary.Apply(fs, fs.Lookup(config.FlagName).Value.String(), env.Getenv); err != nil {
		return nil, nil, usagef("%v", err)
	}
	if err := o.ops.validate(*o.level); err != nil {
		return nil, nil, err
	}
	if *o.maxDesc <= 0 {
		return nil, nil, usagef("--upstream-max-description %d: want a positive number of bytes", *o.maxDesc)
	}
	for _, spec := range o.eventSinks {
		sink, err := events.ParseSink(spec)
		if err != nil {
			return nil, nil, usagef("--event-sink: %v", err)
		}
		o.sinks = append(o.sinks, sink)
	}
	if *o.eventRetention == 0 {
		return nil, nil, usagef("--event-retention 0: want a duration such as 168h, or a negative one to keep events forever")
	}
	if *o.eventMaxAttempts <= 0 {
		return nil, nil, usagef("--event-max-attempts %d: want a positive number", *o.eventMaxAttempts)
	}
	if *o.data == "" || *o.catalogPath == "" {
		return nil, nil, usagef("--data and --catalog (data, catalog in a config file) are required (tools/examples/catalog.yaml is an example catalog)")
	}
	if *o.grpcListen == "" && (*o.tlsCert != "" || *o.tlsKey != "" || *o.tlsClientCA != "" || len(o.frontIDs)+len(o.operatorIDs) > 0) {
		return nil, nil, usagef("--tls-cert-file, --tls-key-file, --tls-client-ca-file, --front-identity and --operator-identity configure the TCP listener: give --grpc-listen ADDR too")
	}
	if *o.tlsCert != "" && *o.tlsClientCA == "" {
		return nil, nil, usagef("--tls-cert-file without --tls-client-ca-file: no TCP caller could be identified as a front or an operator; give --tls-client-ca-file CA.pem (the CA that signs their client certificates)")
	}
	if (*o.tlsCert == "") != (*o.tlsKey == "") {
		return nil, nil, usagef("--tls-cert-file and --tls-key-file go together")
	}
	if *o.tlsClientCA != "" && *o.tlsCert == "" {
		return nil, nil, usagef("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
	}
	if *o.vaultKey != "" && *o.vaultPass != "" {
		return nil, nil, usagef("--vault-key-file and --vault-passphrase-file both unlock the vault: give one")
	}
	o.fa = api.FrontActors{}
	for _, v := range o.frontActors {
		id, actor, err := api.ParseFrontActor(v)
		if err != nil {
			return nil, nil, usagef("--front-actor %q: %v", v, err)
		}
		// The identity is compared with the one authz gives the front's
		// certificate: one it could never give binds nothing.
		if _, err := authz.ParseIdentity(id); err != nil {
			return nil, nil, usagef("--front-actor %q: %v", v, err)
		}
		o.fa[id] = append(o.fa[id], actor)
	}
	for _, l := range []struct {
		flag  string
		names []string
	}{{"--actor", o.actors}, {"--trusted-actor", o.trusted}} {
		for _, name := range l.names {
			if err := actorname.Check(name); err != nil {
				return nil, nil, usagef("%s %q: %v", l.flag, name, err)
			}
		}
	}
	return fs, o, nil
}

func runServe(ctx context.Context, env *Env, args []string) error {
	fs, o, err := parseServe(env, args)
	if err != nil {
		return err
	}
	witnessKey, err := o.witness.resolve()
	if err != nil {
		return err
	}
	logger := formattedLogger(env.Stderr, *o.level, o.ops.logFormat)
	tlsCfg, err := serverTLS(*o.tlsCert, *o.tlsKey, *o.tlsClientCA, logger.Named("tls"))
	if err != nil {
		return err
	}
	// The metrics' tool labels are bounded by the catalog at start (tools
	// a later reload adds count as "other" until the next start); the
	// control plane itself loads and owns the catalog (catalog.File).
	cat, err := channels.Default().Catalog().Load(*o.catalogPath)
	if err != nil {
		return fmt.Errorf("catalog refused:\n%v", err)
	}
	ob, err := stack.NewObservability(ctx, logger, cat)
	if err != nil {
		return err
	}
	defer ob.Close()
	st, err := stack.New(stack.Config{
		Logger: logger, Telemetry: ob.Telemetry, DataDir: *o.data, Store: *o.storeURL, Replica: *o.replica, LeaseTTL: *o.leaseTTL, Advertise: *o.advertise, Context: ctx, Catalog: catalog.FileOf(channels.Default().Catalog(), *o.catalogPath), CheckpointCopy: *o.ckptCopy, WitnessURL: *o.witness.url, WitnessKey: witnessKey, CommandArgs: operatorArgs(*o.data),
		VaultPath: *o.vaultPath, VaultKeyFile: *o.vaultKey, VaultPassphraseFile: *o.vaultPass, Actors: o.actors, Trusted: o.trusted, OpenSessions: *o.openSessions, BindRuns: *o.bindRuns,
		FrontActors: o.fa, TCPAddr: *o.grpcListen, TLS: tlsCfg, UpstreamMaxDescription: *o.maxDesc, Version: buildinfo.Read().Version,
		Events: &events.Config{Sinks: o.sinks, ConsoleURL: *o.eventConsole, UnknownAfter: *o.eventUnknownAfter, MaxAttempts: *o.eventMaxAttempts,
			Retention: *o.eventRetention},
		Access: authz.Config{
			FrontIdentities: o.frontIDs, OperatorIdentities: o.operatorIDs,
			FrontUIDs: o.frontUIDs, OperatorUIDs: o.operatorUIDs,
		},
	})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := ob.Serve(o.ops.config(), st); err != nil {
		st.Server.Close()
		return err
	}
	reread := func() (reload, restart []string, level string, err error) {
		quiet := &Env{Stdin: env.Stdin, Stdout: io.Discard, Stderr: io.Discard, Getenv: env.Getenv}
		nfs, _, err := parseServe(quiet, args)
		if err != nil {
			return nil, nil, "", err
		}
		reload, restart = serveBinary.Changed(fs, nfs)
		fs = nfs
		return reload, restart, nfs.Lookup("log-level").Value.String(), nil
	}
	stopHUP := reloadOnHUP(ctx, st.Server.CatalogManager, reread, logger)
	defer stopHUP()
	return st.Run(ctx)
}

// runConfig is `latch config validate FILE`: latch serve's config file,
// checked as latch serve reads it (keys, types, secrets by reference, the
// flags' rules); the files it names are read at start.
func runConfig(_ context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "config", "config validate FILE")
	args, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 2 || args[0] != "validate" {
		return usagef("usage: latch config validate FILE (latch serve's config file; latch-mcp config validate and latch-hostagent config validate check theirs)")
	}
	quiet := &Env{Stdin: env.Stdin, Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	if _, _, err := parseServe(quiet, []string{"--config", args[1]}); err != nil {
		return usagef("%s: not a valid latch serve configuration:\n%v", args[1], err)
	}
	fmt.Fprintf(env.Stdout, "%s: valid latch serve configuration\n", args[1])
	return nil
}

// reloadOnHUP, on every SIGHUP until ctx ends or the returned stop is
// called, re-reads the configuration (reread: flags, environment, file),
// applies a new log level and logs the changed keys that need a restart
// (a configuration with problems changes nothing), then reloads the
// catalog. A refused catalog is logged by the manager and changes nothing.
// A standby has no catalog loaded (manager returns nil): it reads the file
// when it takes over.
func reloadOnHUP(ctx context.Context, manager func() *catalog.Manager, reread func() (reload, restart []string, level string, err error), log hclog.Logger) func() {
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
				if reload, restart, level, err := reread(); err != nil {
					log.Error("configuration not reloaded: it has problems; nothing of it changed", "error", err)
				} else {
					if slices.Contains(reload, "log_level") {
						log.SetLevel(hclog.LevelFromString(level))
					}
					log.Info("configuration reloaded", "applied", strings.Join(reload, ","), "need_restart", strings.Join(restart, ","))
				}
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
			return nil, usagef("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, usagef("--tls-cert-file and --tls-key-file go together")
	}
	cfg, err := tlsfiles.Server(certFile, keyFile, clientCA, log)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	return cfg, nil
}
