package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/latchhq/latch/controlplane/console"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/devstack"
	"github.com/latchhq/latch/controlplane/stack"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/internal/atomicfile"
	"github.com/latchhq/latch/internal/buildinfo"
	"github.com/latchhq/latch/internal/config"
	"github.com/latchhq/latch/mcpfront"
	"github.com/latchhq/latch/mcpfront/auth"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// Dev defaults.
const (
	devListen     = "127.0.0.1:7411"
	devDemoListen = "127.0.0.1:7412"
	devActor      = devstack.Actor
)

// runDev parses the flags of `latch dev`, opens its listeners and builds the
// control plane; devstack assembles and runs the rest (front, host agent,
// demo target).
func runDev(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "dev", "dev [flags] [--observe-upstream -- COMMAND ARGS...]")
	data := fs.String("data", defaultDataDir, "data dir; a later latch dev on the same dir resumes it")
	listen := fs.String("listen", devListen, "address of the MCP front (path /mcp)")
	demoListen := fs.String("demo-listen", devDemoListen, "address of the built-in demo HTTP target")
	catalogPath := fs.String("catalog", "", "tool catalog (default: the example catalog pointed at the demo target)")
	observeUp := fs.Bool("observe-upstream", false, "put the stdio MCP server COMMAND ARGS (after --) behind Latch in observe mode: its tools are listed and a catalog is generated (DATA/observe-catalog.yaml) with one observed contract each; latch observe report then says what enforcement would have done")
	level := fs.String("log-level", "info", "trace, debug, info, warn or error")
	ckptCopy := fs.String("checkpoint-copy", "", "append every signed checkpoint to this file, as latch serve does (keep it off the data dir's disk)")
	wf := addWitnessFlags(fs)
	personWait := fs.Duration("person-wait", mcpfront.DefaultPersonWait, "how long a call made without an MCP task waits for a person (an approval, a session authorization) before it answers with the operator command")
	ckptEvery := fs.Duration("checkpoint-interval", 30*time.Second, "how often the journal is checkpointed (signed) while it grows")
	strict := fs.Bool("strict", false, "apply the full decision order to the dev actor too (its new sessions need latch session authorize)")
	bindRuns := fs.Bool("bind-runs", false, "bind a run id's session authorization to the MCP session that named it (else to its token), as latch serve --bind-runs")
	devToken := fs.String("dev-token", "", "bearer token of the dev actor (16-256 characters; default LATCH_DEV_TOKEN, else the one kept in DATA/dev-token, else a new one)")
	var limits mcpfront.Limits
	limits.Register(fs)
	var oauth auth.Flags
	oauth.Register(fs)
	var origins listFlag
	fs.Var(&origins, "allow-origin", "browser Origin allowed to reach the MCP front besides loopback ones, like https://console.example.com (repeatable)")
	opsF := addOpsFlags(fs, devOpsListen)
	ports := fs.String("ports", "", "auto: a free loopback port for every listener whose address flag is not given (--listen, --demo-listen, --ops-listen); the banner prints them")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *observeUp && len(pos) == 0:
		return usagef("--observe-upstream needs the server's command after --: latch dev --observe-upstream -- /usr/local/bin/my-mcp-server --stdio")
	case *observeUp && *catalogPath != "":
		return usagef("--observe-upstream generates the catalog; it cannot be combined with --catalog")
	case !*observeUp && len(pos) != 0:
		return usagef("latch dev takes no arguments (a command after -- needs --observe-upstream)")
	}
	if *observeUp {
		path, err := observedCatalog(ctx, env, *data, pos)
		if err != nil {
			return err
		}
		*catalogPath = path
	}
	switch *ports {
	case "":
	case "auto":
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) {
			name := f.Name
			if c, ok := config.AliasOf(f); ok {
				name = c
			}
			given[name] = true
		})
		for name, addr := range map[string]*string{"listen": listen, "demo-listen": demoListen, "ops-listen": &opsF.listen} {
			if !given[name] {
				*addr = "127.0.0.1:0"
			}
		}
	default:
		return usagef("--ports %q: the only value is auto (free loopback ports for the listeners not given)", *ports)
	}
	if err := limits.Validate(); err != nil {
		return usagef("%v", err)
	}
	for _, o := range origins {
		if _, _, err := mcpfront.ParseOrigin(o); err != nil {
			return usagef("--allow-origin: %v", err)
		}
	}
	if *ckptEvery < 100*time.Millisecond {
		return usagef("--checkpoint-interval %s is too short (at least 100ms)", *ckptEvery)
	}
	if err := opsF.validate(*level); err != nil {
		return err
	}
	if *personWait <= 0 {
		return usagef("--person-wait must be a positive duration like 5s")
	}
	log := formattedLogger(env.Stderr, *level, opsF.logFormat)
	lis, err := listenAll([]devListener{
		{"demo target", "--demo-listen", *demoListen},
		{"MCP front", "--listen", *listen},
		{"ops listener", "--ops-listen", opsF.listen},
	})
	if err != nil {
		return err
	}
	demoLis, mcpLis := lis[0], lis[1]
	defer demoLis.Close()
	defer mcpLis.Close()
	if lis[2] != nil {
		// Checked with the others so every busy address is named at once;
		// the ops listener itself opens it again once the stack exists, on
		// the port found here (a free one with --ports auto).
		opsF.listen = lis[2].Addr().String()
		lis[2].Close()
	}
	cat := devstack.Catalog(*catalogPath, "http://"+demoLis.Addr().String(), datadir.AgentSocket(*data))
	chosen, source := *devToken, devstack.TokenFromFlag
	if chosen == "" {
		chosen, source = env.Getenv("LATCH_DEV_TOKEN"), devstack.TokenFromEnv
	}
	token, created, err := devstack.LoadToken(*data, chosen)
	if err != nil {
		if errors.Is(err, devstack.ErrBadToken) {
			return usagef("%s: %v", source, err)
		}
		return err
	}
	switch {
	case chosen != "":
	case created:
		source = devstack.TokenNew
	default:
		source = devstack.TokenKept
	}
	// JWT actors (docs/how-to/oauth.md): the mapped ones are known to
	// the control plane and, unless --strict, trusted, like the dev actor.
	var verifier *auth.JWTVerifier
	if oauth.Enabled() {
		jc, err := oauth.Config("http://" + mcpLis.Addr().String() + "/mcp")
		if err != nil {
			return usagef("%v", err)
		}
		jc.Logger = log
		if verifier, err = auth.NewJWTVerifier(jc); err != nil {
			return usagef("%v", err)
		}
		if err := verifier.Warm(ctx); err != nil {
			log.Warn("OAuth issuer keys not available yet; JWTs are refused until they are", "error", err)
		}
	} else if _, err := oauth.Config(""); err != nil {
		return usagef("%v", err)
	}
	// The metrics' tool labels are bounded by the catalog at start.
	witnessKey, err := wf.resolve()
	if err != nil {
		return err
	}
	labels, _, _, err := cat.Load()
	if err != nil {
		return err
	}
	ob, err := stack.NewObservability(ctx, log, labels)
	if err != nil {
		return err
	}
	defer ob.Close()
	sc := stack.Config{Logger: log, Telemetry: ob.Telemetry, DataDir: *data, Catalog: cat, CheckpointCopy: *ckptCopy, WitnessURL: *wf.url, WitnessKey: witnessKey, CheckpointInterval: *ckptEvery, DevVault: true, Recovery: stack.DevRecovery(), Actors: append([]string{devActor}, oauth.MappedActors()...),
		StaticTokens: []tokens.Static{devstack.StaticToken(token)}, BindRuns: *bindRuns, Version: buildinfo.Read().Version}
	if !*strict {
		sc.Trusted = append([]string{devActor}, oauth.MappedActors()...)
	}
	sc.CommandArgs = operatorArgs(*data)
	st, err := stack.New(sc)
	if err != nil {
		return err
	}
	defer st.Close()
	opsURL, err := ob.Serve(opsF.config(), st)
	if err != nil {
		st.Server.Close()
		return err
	}
	var signIn, signInAs string
	if ob.Console != nil {
		if signIn, signInAs, err = devSignInLink(env, ob.Console, opsURL); err != nil {
			return err
		}
	}
	if err := st.Server.Listen(); err != nil {
		return err
	}

	conn, err := dialSocket(datadir.Socket(*data))
	if err != nil {
		return err
	}
	defer conn.Close()
	// The front shares this process: its unary calls skip the socket's
	// transport (the same interceptors run); Watch streams over the socket.
	local, err := st.Server.LocalConn(conn)
	if err != nil {
		return err
	}
	return devstack.Run(ctx, devstack.Config{
		Logger: log, DataDir: *data, Serve: st.Run,
		ControlPlane: controlplanev1.NewControlPlaneClient(local),
		Token:        token, OAuth: verifier, MCP: mcpLis, Demo: demoLis, Out: env.Stdout,
		PersonWait:     *personWait,
		Limits:         limits,
		AllowedOrigins: origins, TokenSource: source, Strict: *strict, CatalogPath: *catalogPath,
		OpsURL: opsURL, ConsoleSignIn: signIn, ConsoleOperator: signInAs, Registry: ob.Registry, Tracer: ob.Tracer,
	})
}

// devListener is one address latch dev listens on, and the flag that sets it.
type devListener struct{ what, flag, addr string }

// listenAll opens every address (an empty one is skipped: nil) before
// anything starts, so one message names every address that is taken, each
// with its flag, instead of one failed start per busy port.
func listenAll(ls []devListener) ([]net.Listener, error) {
	out := make([]net.Listener, len(ls))
	var busy []string
	for i, l := range ls {
		if l.addr == "" {
			continue
		}
		lis, err := net.Listen("tcp", l.addr)
		if err != nil {
			busy = append(busy, fmt.Sprintf("%s on %s: %v (pass %s to use another address)", l.what, l.addr, err, l.flag))
			continue
		}
		out[i] = lis
	}
	if len(busy) == 0 {
		return out, nil
	}
	for _, lis := range out {
		if lis != nil {
			lis.Close()
		}
	}
	return nil, fmt.Errorf("latch dev cannot listen on %d address(es); nothing was started:\n  %s", len(busy), strings.Join(busy, "\n  "))
}

// devSignInLink is the one-time console link `latch dev` prints: it signs
// in as the operator who runs latch dev (their login name, as `latch exec
// resolve --operator` defaults to $USER), valid for a day.
func devSignInLink(env *Env, c *console.Console, opsURL string) (string, string, error) {
	name := env.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if !tokens.ValidActor(name) {
		name = "operator" // a login name the journal's name rule refuses
	}
	path, err := c.SignInLink(name, 24*time.Hour)
	if err != nil {
		return "", "", err
	}
	return opsURL + path, name, nil
}

// observedCatalog writes DATA/observe-catalog.yaml for latch dev
// --observe-upstream -- argv: the server's tools, each observed, with its
// replay class to decide (devstack.ObservedCatalog). argv[0] is looked up
// in PATH when it is not a path.
func observedCatalog(ctx context.Context, env *Env, data string, argv []string) (string, error) {
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return "", usagef("--observe-upstream: %v", err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return "", err
	}
	argv = append([]string{bin}, argv[1:]...)
	text, err := devstack.ObservedCatalog(ctx, argv)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(data, "observe-catalog.yaml")
	if err := atomicfile.Write(path, text, 0o600, true); err != nil {
		return "", err
	}
	fmt.Fprintf(env.Stderr, "observe mode: %s is behind Latch; its generated catalog is %s (edit it, then latch dev --catalog %s)\n", strings.Join(argv, " "), path, path)
	return path, nil
}
