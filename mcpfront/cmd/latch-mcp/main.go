// Command latch-mcp is Latch's MCP front: it serves the control plane's
// tool catalog (ListTools, followed as it is reloaded) to MCP clients over
// Streamable HTTP (both protocol eras on /mcp) or stdio, authenticates
// agents' bearer tokens with the control plane (AuthenticateAgent, cached
// at most 5 s), and forwards every call to the control plane's gRPC API.
//
//	latch-mcp --control-plane unix:///var/lib/latch/control.sock
//	latch-mcp --control-plane unix:///var/lib/latch/control.sock --stdio --actor alice
//	latch-mcp --control-plane unix:///var/lib/latch/control.sock \
//	    --listen 10.0.0.5:7411 --oauth-issuer https://idp.example.com --oauth-resource https://mcp.example.com/mcp
//	latch-mcp --control-plane cp1.internal:7400,cp2.internal:7400,cp3.internal:7400 \
//	    --tls-ca ca.pem --tls-cert front.pem --tls-key front-key.pem
//
// Every flag is also a key of the config file (--config FILE, YAML) and a
// LATCH_MCP_* environment variable (internal/config; defaults < file <
// environment < flags); `latch-mcp config validate FILE` checks a file,
// and SIGHUP re-reads it (docs/reference/config.md).
//
//	latch-mcp --config /etc/latch/latch-mcp.yaml
//
// With several control-plane replicas (a comma list, or the flag
// repeated) every call goes to the active one: a standby's answer names
// it, and a replica that cannot be reached is skipped (internal/replicas
// says what may be sent again after a cut).
//
// Exit codes: 0 clean shutdown, 1 runtime error, 2 bad arguments.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/internal/buildinfo"
	"github.com/latchhq/latch/internal/config"
	"github.com/latchhq/latch/internal/loopback"
	"github.com/latchhq/latch/internal/replicas"
	"github.com/latchhq/latch/internal/tlsfiles"
	"github.com/latchhq/latch/internal/tracing"
	"github.com/latchhq/latch/mcpfront"
	"github.com/latchhq/latch/mcpfront/auth"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	controlPlane []string
	tlsCA        string
	tlsCert      string
	tlsKey       string
	listen       string
	catalog      string
	tokens       string
	stdio        bool
	anonymous    bool
	actor        string
	origins      stringList
	logLevel     string
	oauth        auth.Flags
	oauthCfg     auth.JWTConfig
	ops          opsOptions
	personWait   time.Duration
	limits       mcpfront.Limits
	version      bool
	// stateDir is --state-dir; stateDefault whether it is the default
	// (defaultStateDir), which may fall back to memory (stateDirFor).
	stateDir     string
	stateDefault bool
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// errUsage marks bad arguments (exit code 2).
var errUsage = errors.New("latch-mcp: bad arguments")

// binary is latch-mcp's config file and environment (internal/config):
// LATCH_MCP_* variables, keys from newFlags.
var binary = config.Binary{
	Name:       "latch-mcp",
	EnvPrefix:  "LATCH_MCP_",
	NoKey:      []string{"version"},
	Reloadable: []string{"log_level"},
}

// newFlags is latch-mcp's flag set (its keys are the config file's).
func newFlags(stderr io.Writer) (*flag.FlagSet, *options, *stringList) {
	o := &options{}
	fs := flag.NewFlagSet("latch-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config.Register(fs)
	var cps stringList
	fs.Var(&cps, "control-plane", "control plane gRPC address: unix:///DATA/control.sock in the control plane's data dir DATA, or host:port (required); several replicas as a comma list or by repeating the flag: calls go to the active one")
	fs.StringVar(&o.tlsCA, "tls-ca-file", "", "CA bundle to verify a TCP control plane (required for a non-loopback host:port)")
	fs.StringVar(&o.tlsCert, "tls-cert-file", "", "client certificate for a TCP control plane (with --tls-key-file)")
	fs.StringVar(&o.tlsKey, "tls-key-file", "", "client key for --tls-cert-file")
	config.Alias(fs, "tls-ca", "tls-ca-file")
	config.Alias(fs, "tls-cert", "tls-cert-file")
	config.Alias(fs, "tls-key", "tls-key-file")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:7411", "HTTP listen address; MCP is served at /mcp")
	fs.StringVar(&o.catalog, "catalog", "", "removed: the control plane serves the catalog (latch serve --catalog FILE; latch catalog reload)")
	fs.StringVar(&o.tokens, "tokens", "", "removed: tokens live in the control plane (latch token create NAME)")
	fs.BoolVar(&o.stdio, "stdio", false, "serve one MCP session on stdin/stdout instead of HTTP")
	fs.StringVar(&o.actor, "actor", "", "actor of every call with --stdio; with HTTP on a loopback --listen, the actor of callers without a bearer token (else every HTTP caller needs a token from `latch token create`)")
	fs.Var(&o.origins, "allow-origin", "browser Origin allowed besides loopback ones, like https://console.example.com; compared parsed (scheme, host, port) (repeatable)")
	fs.StringVar(&o.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.DurationVar(&o.personWait, "person-wait", mcpfront.DefaultPersonWait, "how long a call made without an MCP task waits for a person (an approval, a session authorization) before it answers with the execution and the operator command; the agent's identical call later attaches")
	fs.BoolVar(&o.version, "version", false, "print the build (version, revision, Go version, platform) and exit")
	fs.StringVar(&o.stateDir, "state-dir", "", "directory where the front keeps the delivery reports the control plane cannot take now, sent when it is back, even after a restart of the front; one front per directory (default: $STATE_DIRECTORY under systemd, else $XDG_STATE_HOME/latch-mcp or ~/.local/state/latch-mcp; \"none\": in memory only)")
	o.limits.Register(fs)
	o.oauth.Register(fs)
	o.ops.flags(fs)
	return fs, o, &cps
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	_, o, err := parseAll(args, stderr)
	return o, err
}

// parseAll reads the flags, environment and config file and checks them.
func parseAll(args []string, stderr io.Writer) (*flag.FlagSet, *options, error) {
	fs, o, cps := newFlags(stderr)
	o, err := o.parse(fs, cps, args)
	return fs, o, err
}

func (o *options) parse(fs *flag.FlagSet, cps *stringList, args []string) (*options, error) {
	if _, err := binary.Parse(fs, args, os.Getenv); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if o.version {
		return o, nil
	}
	if err := o.ops.validate(); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	o.controlPlane = replicas.Split(*cps)
	if o.stateDir == "" {
		o.stateDir, o.stateDefault = defaultStateDir(os.Getenv), true
	}
	if err := o.limits.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if o.personWait <= 0 {
		return nil, fmt.Errorf("%w: --person-wait must be a positive duration like 5s", errUsage)
	}
	switch {
	case len(o.controlPlane) == 0:
		return nil, fmt.Errorf("%w: --control-plane is required (unix:///DATA/control.sock in the control plane's data dir DATA, or host:port)", errUsage)
	case o.catalog != "":
		return nil, fmt.Errorf("%w: --catalog was removed: the control plane serves the catalog to the front (give it to latch serve --catalog FILE; change it with latch catalog reload)", errUsage)
	case o.tokens != "":
		return nil, fmt.Errorf("%w: --tokens was removed: tokens live in the control plane's store and the front asks it (latch token create NAME; an old tokens.json in the data dir is imported at latch serve's start)", errUsage)
	case o.stdio && o.actor == "":
		return nil, fmt.Errorf("%w: --stdio needs --actor NAME (the actor every call is made as)", errUsage)
	case (o.tlsCert == "") != (o.tlsKey == ""):
		return nil, fmt.Errorf("%w: --tls-cert-file and --tls-key-file (tls.cert_file, tls.key_file) go together", errUsage)
	case hclog.LevelFromString(o.logLevel) == hclog.NoLevel:
		return nil, fmt.Errorf("%w: --log-level %q is not one of trace, debug, info, warn, error", errUsage, o.logLevel)
	}
	for _, origin := range o.origins {
		if _, _, err := mcpfront.ParseOrigin(origin); err != nil {
			return nil, fmt.Errorf("%w: --allow-origin: %w", errUsage, err)
		}
	}
	o.anonymous = !o.stdio && o.actor != ""
	if o.anonymous && !loopback.HostPort(o.listen) {
		return nil, fmt.Errorf("%w: refusing to serve callers without a token (--actor %s) on non-loopback address %s; drop --actor so every caller needs a token from `latch token create`, or listen on 127.0.0.1", errUsage, o.actor, o.listen)
	}
	if o.stdio && o.oauth.Enabled() {
		return nil, fmt.Errorf("%w: --oauth-issuer is for HTTP; with --stdio every call is --actor", errUsage)
	}
	var err error
	if o.oauthCfg, err = o.oauth.Config(defaultResource(o.listen)); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "config" {
		return configCmd(args[1:], stderr)
	}
	fs, o, err := parseAll(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if o.version { // stderr: with --stdio, stdout is the protocol
		buildinfo.Read().Print(stderr, "latch-mcp")
		return 0
	}
	// Logs always go to stderr: with --stdio, stdout is the protocol.
	logger := o.ops.logger(o.logLevel, stderr)
	stopHUP := reloadOnHUP(ctx, fs, args, logger)
	defer stopHUP()
	if err := serve(ctx, o, logger); err != nil {
		logger.Error("stopped", "error", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func serve(ctx context.Context, o *options, logger hclog.Logger) error {
	conn, err := dialControlPlane(o, logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := probeControlPlane(ctx, conn, strings.Join(o.controlPlane, ","), logger); err != nil {
		return err
	}

	cp := controlplanev1.NewControlPlaneClient(conn)
	cfg := mcpfront.Config{
		Logger:         logger,
		ControlPlane:   cp,
		LoopbackActor:  o.actor,
		AllowedOrigins: o.origins,
		PersonWait:     o.personWait,
		Limits:         o.limits,
	}
	fo, err := o.ops.setup(ctx, logger, &cfg)
	if err != nil {
		return err
	}
	defer fo.close()
	if !o.anonymous && !o.stdio {
		v, err := mcpfront.NewControlPlaneTokens(cp, 0, nil)
		if err != nil {
			return err
		}
		cfg.Tokens = v
	}
	var lis net.Listener
	if !o.stdio {
		// Listen first: the default resource URL is the bound address
		// (--listen 127.0.0.1:0 picks a port).
		if lis, err = net.Listen("tcp", o.listen); err != nil {
			return fmt.Errorf("listen on %s: %w", o.listen, err)
		}
		defer lis.Close()
	}
	if o.oauth.Enabled() {
		addr := o.listen
		if lis != nil {
			addr = lis.Addr().String()
		}
		jc, err := o.oauth.Config(defaultResource(addr))
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if cfg.OAuth, err = newVerifier(ctx, jc, logger); err != nil {
			return err
		}
		meta, _ := mcpfront.ResourceMetadataURL(jc.Resource)
		logger.Info("accepting OAuth access tokens", "resource", jc.Resource, "issuers", strings.Join(cfg.OAuth.Issuers(), ","), "metadata", meta)
	}
	front, err := newFront(cfg, o, logger)
	if err != nil {
		return err
	}
	defer front.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = front.Sync(sctx)
	cancel()
	if err != nil {
		return fmt.Errorf("%w (is the control plane running at %s?)", err, strings.Join(o.controlPlane, ","))
	}
	// Follow ends with the serving: stdio ends when the client closes stdin.
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	g, gctx := errgroup.WithContext(fctx)
	g.Go(func() error { return front.Follow(gctx) })

	if o.stdio {
		logger.Info("serving MCP on stdio", "actor", o.actor, "catalog_version", front.CatalogVersion())
		g.Go(func() error { return fo.serve(gctx) }) // stdin closed: stopFollow ends the metrics listener too
		g.Go(func() error {
			defer stopFollow()
			return front.ServeStdio(gctx, o.actor)
		})
		return g.Wait()
	}

	srv := &http.Server{Handler: front.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}
	g.Go(func() error { return fo.serve(gctx) })
	g.Go(func() error {
		logger.Info("serving MCP", "url", "http://"+lis.Addr().String()+"/mcp", "catalog_version", front.CatalogVersion(), "tokens", cfg.Tokens != nil, "oauth", o.oauth.Enabled())
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Waiting calls end; their executions go on in the control plane.
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}

// dialControlPlane makes the connection to the control plane's replicas:
// each unix:///path (no TLS: the socket's file permissions guard it) or
// host:port (TLS with --tls-ca; plaintext only to a loopback host). The
// same rule holds for an active's address a standby names.
func dialControlPlane(o *options, logger hclog.Logger) (*replicas.Conn, error) {
	var tc *tls.Config
	if o.tlsCA != "" {
		// The client certificate is re-read when its files change.
		var err error
		if tc, err = tlsfiles.Client(o.tlsCA, o.tlsCert, o.tlsKey, logger.Named("tls")); err != nil {
			return nil, fmt.Errorf("%w: --tls-ca-file/--tls-cert-file/--tls-key-file: %w", errUsage, err)
		}
	}
	dial := func(target string) (*grpc.ClientConn, error) {
		var creds credentials.TransportCredentials
		switch {
		case strings.HasPrefix(target, "unix://"), strings.HasPrefix(target, "unix:"):
			creds = insecure.NewCredentials()
		case tc != nil:
			creds = credentials.NewTLS(tc)
		case loopback.HostPort(target):
			creds = insecure.NewCredentials()
		default:
			return nil, fmt.Errorf("%s is a non-loopback TCP address; give --tls-ca-file (tls.ca_file; or use a unix socket)", target)
		}
		opts := append(replicas.DialOptions(), grpc.WithTransportCredentials(creds),
			grpc.WithChainUnaryInterceptor(tracing.UnaryClient()), grpc.WithChainStreamInterceptor(tracing.StreamClient()))
		return grpc.NewClient(target, opts...)
	}
	conn, err := replicas.New(replicas.Config{Addrs: o.controlPlane, Dial: dial, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("%w: --control-plane: %v", errUsage, err)
	}
	return conn, nil
}

// defaultStateDir is --state-dir's default: systemd's StateDirectory=, else
// the XDG state dir of the user; "" when there is no home to put it in.
func defaultStateDir(getenv func(string) string) string {
	if d := getenv("STATE_DIRECTORY"); d != "" {
		return strings.Split(d, ":")[0] // systemd lists one per StateDirectory= entry
	}
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "latch-mcp")
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "latch-mcp")
	}
	return ""
}

// newFront builds the front with its state dir. An explicit --state-dir
// that cannot be used stops the start; the default one (held by another
// front on this host, or not writable) leaves the delivery reports in
// memory, said in a warning.
func newFront(cfg mcpfront.Config, o *options, logger hclog.Logger) (*mcpfront.Front, error) {
	if o.stateDir != "none" {
		cfg.StateDir = o.stateDir
	}
	front, err := mcpfront.New(cfg)
	if err == nil || !o.stateDefault || cfg.StateDir == "" {
		if err != nil && cfg.StateDir != "" {
			err = fmt.Errorf("--state-dir %s: %w", cfg.StateDir, err)
		}
		if err == nil && cfg.StateDir == "" {
			logger.Info("delivery reports are kept in memory only: pass --state-dir DIR to keep them across restarts of the front")
		}
		return front, err
	}
	logger.Warn("the default state dir cannot be used; delivery reports are kept in memory only: pass --state-dir DIR to keep them across restarts of the front", "state_dir", cfg.StateDir, "error", err)
	cfg.StateDir = ""
	return mcpfront.New(cfg)
}
