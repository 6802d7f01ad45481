// Package devstack assembles what `latch dev` runs around the control plane
// in one process: the MCP front, a host agent for this machine, the demo
// HTTP target, the example catalog pointed at them, the dev token and the
// dev.json file that `latch demo` reads. The control plane itself (store,
// vault, channels, policy, gRPC server) is built by the caller, which also
// parses the flags and opens the listeners: devstack gets them in Config.
//
// Only controlplane/cli imports it.
//
// # Data directory (in addition to the control plane's)
//
//	DATA/dev.json          Info: the MCP URL, the demo URL, the dev token and the catalog, while dev runs
//	DATA/dev-token         the dev token (0600), kept across restarts so pasted client configs keep working
//	DATA/hostagent/        the embedded host agent's data dir
//	DATA/hostagent.sock    its socket (the catalog's local targets point here)
//	DATA/observe-catalog.yaml  the catalog latch dev --observe-upstream generated (observe.go)
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/hostagent/agent"
	"github.com/latchhq/latch/internal/atomicfile"
	"github.com/latchhq/latch/mcpfront"
	"github.com/latchhq/latch/mcpfront/auth"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/tools"
	"github.com/latchhq/latch/tools/examples"
)

// Actor is the dev actor: the dev token authenticates as it.
const Actor = "dev"

// ExampleDemoURL is the demo target's address in the embedded example
// catalog; Catalog rewrites it to where the demo target really listens.
const ExampleDemoURL = "http://127.0.0.1:7412"

// Catalog is the catalog source of `latch dev`: the file at path as is
// (reloaded by `latch catalog reload`), or the embedded example catalog with
// its demo-target URLs pointed at demoURL.
//
// The embedded catalog's SSH targets with a host agent become `local`
// targets of the dev host agent (agentSocket), so its migration tool runs on
// this machine. Its version is computed over the embedded bytes plus a line
// naming both rewrites, so two dev runs with different addresses have
// different versions.
func Catalog(path, demoURL, agentSocket string) catalog.Source {
	if path != "" {
		// The embedded host agent's socket exists once latch dev runs.
		return catalog.FileOf(channels.Default().Catalog().WithHostChecks(tools.HostChecks{Own: []string{agentSocket}}), path)
	}
	const source = "tools/examples/catalog.yaml (embedded)"
	data := append(append([]byte(nil), examples.Catalog...), fmt.Sprintf("\n# latch dev: demo target %s, host agent %s\n", demoURL, agentSocket)...)
	return catalog.Fixed(source, data, func() (*tools.Catalog, error) { return embeddedCatalog(source, demoURL, agentSocket) })
}

func embeddedCatalog(source, demoURL, agentSocket string) (*tools.Catalog, error) {
	kinds := channels.Default()
	cat, err := kinds.Catalog().Parse(source, examples.Catalog)
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	kinds.AdaptDev(cat, channels.DevEnv{ExampleURL: ExampleDemoURL, DemoURL: demoURL, AgentSocket: agentSocket})
	cat.Warnings = nil // about the example's SSH hosts, which latch dev replaces with its own host agent
	return cat, nil
}

// NewToken makes a random dev token.
func NewToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "latch_dev_" + base64.RawURLEncoding.EncodeToString(b)
}

// ErrBadToken is returned by LoadToken for a chosen token it refuses.
var ErrBadToken = errors.New("devstack: bad dev token")

// Token sources, as the banner names them.
const (
	TokenFromFlag = "--dev-token"
	TokenFromEnv  = "LATCH_DEV_TOKEN"
	TokenKept     = "kept"
	TokenNew      = "new"
)

// LoadToken returns the dev token of data dir data. A chosen token (from
// --dev-token or LATCH_DEV_TOKEN) is used and kept in TokenPath, so later
// runs without it use it too; else the kept token; else a new one, kept.
// The file is written 0600 and tightened to 0600 when found looser.
func LoadToken(data, chosen string) (string, bool, error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", false, fmt.Errorf("devstack: data dir: %w", err)
	}
	path := datadir.DevToken(data)
	if chosen != "" {
		if err := checkToken(chosen); err != nil {
			return "", false, err
		}
		return chosen, false, writeToken(path, chosen)
	}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		tok := strings.TrimSpace(string(b))
		if err := checkToken(tok); err != nil {
			return "", false, fmt.Errorf("%s: %w (delete the file to get a new token, or pass --dev-token)", path, err)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", false, fmt.Errorf("devstack: %s is readable by others and cannot be tightened: %w", path, err)
			}
		}
		return tok, false, nil
	case errors.Is(err, os.ErrNotExist):
		tok := NewToken()
		return tok, true, writeToken(path, tok)
	default:
		return "", false, fmt.Errorf("devstack: read the dev token: %w", err)
	}
}

func checkToken(tok string) error {
	if len(tok) < 16 || len(tok) > 256 {
		return fmt.Errorf("%w: it must be 16 to 256 characters long, got %d", ErrBadToken, len(tok))
	}
	for _, c := range tok {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~+/=", c)) {
			return fmt.Errorf("%w: it may hold only letters, digits and -._~+/= (it goes into an Authorization header)", ErrBadToken)
		}
	}
	return nil
}

func writeToken(path, tok string) error {
	if err := atomicfile.Write(path, []byte(tok+"\n"), 0o600, false); err != nil {
		return fmt.Errorf("devstack: write the dev token: %w", err)
	}
	return nil
}

// Config is what Run assembles. Every field is required.
type Config struct {
	Logger  hclog.Logger
	DataDir string
	// Serve runs the control plane (its server's Run); it shares Run's
	// errgroup, so the first failure of any part stops them all.
	Serve func(context.Context) error
	// ControlPlane is a client of that control plane's API. The front gets
	// its tools (ListTools) and authenticates every token through it, the
	// dev token included (the control plane knows it as a static token:
	// StaticToken).
	ControlPlane controlplanev1.ControlPlaneClient
	// Token is the dev token, shown in the banner and dev.json.
	Token string
	// OAuth, optional, lets agents bring JWT access tokens (latch dev
	// --oauth-issuer); their actors reach the control plane as the
	// operator-uid socket caller names them.
	OAuth *auth.JWTVerifier
	// MCP and Demo are the open listeners of the MCP front and the demo
	// target.
	MCP, Demo net.Listener
	// Out receives the banner a newcomer reads.
	Out io.Writer
	// AllowedOrigins are browser origins the MCP front accepts besides
	// loopback ones (--allow-origin).
	AllowedOrigins []string
	// TokenSource says where Token came from (TokenFromFlag, TokenFromEnv,
	// TokenKept, TokenNew), for the banner.
	TokenSource string
	// PersonWait bounds a call without a task that waits for a person
	// (mcpfront.Config.PersonWait; 0: its default).
	PersonWait time.Duration
	// Limits caps the front's MCP sessions and streams
	// (mcpfront.Config.Limits; zero fields: its defaults).
	Limits mcpfront.Limits
	// Strict is whether the dev actor goes through the full decision order.
	Strict bool
	// CatalogPath is the --catalog file, "" for the embedded example.
	CatalogPath string
	// OpsURL is the control plane's ops listener (metrics, health), shown in
	// the banner; optional.
	OpsURL string
	// ConsoleSignIn is a one-time sign-in link of the operator console
	// (on the ops listener), signing in as ConsoleOperator; optional.
	ConsoleSignIn, ConsoleOperator string
	// Registry, when set, receives the front's and the host agent's
	// metrics (the control plane's registry: one /metrics for the stack).
	Registry prometheus.Registerer
	// Tracer makes the front's spans (nil: none).
	Tracer trace.TracerProvider
}

// Run serves the stack until ctx ends or a part fails.
func Run(ctx context.Context, cfg Config) error {
	switch {
	case cfg.Logger == nil, cfg.Serve == nil, cfg.ControlPlane == nil,
		cfg.Token == "", cfg.MCP == nil, cfg.Demo == nil, cfg.Out == nil, cfg.DataDir == "":
		return errors.New("devstack: Config is incomplete (Logger, DataDir, Serve, ControlPlane, Token, MCP, Demo and Out are required)")
	}
	log := cfg.Logger
	verifier, err := mcpfront.NewControlPlaneTokens(cfg.ControlPlane, 0, nil)
	if err != nil {
		return err
	}
	front, err := mcpfront.New(mcpfront.Config{
		Logger: log, ControlPlane: cfg.ControlPlane, Tokens: verifier, AllowedOrigins: cfg.AllowedOrigins,
		OAuth:   cfg.OAuth,
		Metrics: frontMetrics(cfg.Registry), Tracer: cfg.Tracer,
		PersonWait: cfg.PersonWait,
		Limits:     cfg.Limits,
		// Delivery reports the control plane could not take (it stopped
		// first) are sent at the next start.
		StateDir: datadir.FrontState(cfg.DataDir),
	})
	if err != nil {
		return err
	}
	defer front.Close()
	demo := demotarget.New(demotarget.Config{Logger: log})
	demoSrv := &http.Server{Handler: demo, ReadHeaderTimeout: 10 * time.Second}
	mcpSrv := &http.Server{Handler: front.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}

	ag, err := agent.New(agent.Config{DataDir: datadir.AgentData(cfg.DataDir), SocketPath: datadir.AgentSocket(cfg.DataDir), Logger: log,
		Metrics: agentMetrics(cfg.Registry)})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return cfg.Serve(gctx) })
	// The front serves the control plane's catalog: fetched once it
	// answers, then followed (latch catalog reload).
	if err := front.Sync(gctx); err != nil {
		g.Wait()
		return err
	}
	g.Go(func() error { return front.Follow(gctx) })
	g.Go(func() error { return ag.Serve(gctx) })
	g.Go(func() error { return serveHTTP(gctx, demoSrv, cfg.Demo) })
	g.Go(func() error { return serveHTTP(gctx, mcpSrv, cfg.MCP) })
	mcpURL, demoURL := "http://"+cfg.MCP.Addr().String()+"/mcp", "http://"+cfg.Demo.Addr().String()
	catalog := CatalogExample
	if cfg.CatalogPath != "" {
		catalog = cfg.CatalogPath
	}
	if err := WriteInfo(cfg.DataDir, Info{MCPURL: mcpURL, DemoURL: demoURL, Token: cfg.Token, Catalog: catalog, PID: os.Getpid(), OpsURL: cfg.OpsURL}); err != nil {
		return err
	}
	defer os.Remove(datadir.DevInfo(cfg.DataDir))
	printBanner(cfg.Out, banner{url: mcpURL, token: cfg.Token, source: cfg.TokenSource, data: cfg.DataDir, demo: demoURL, strict: cfg.Strict, catalog: catalog, ops: cfg.OpsURL, signIn: cfg.ConsoleSignIn, signInAs: cfg.ConsoleOperator})
	if cfg.OAuth != nil {
		meta, _ := mcpfront.ResourceMetadataURL(cfg.OAuth.Resource())
		fmt.Fprintf(cfg.Out, "JWT access tokens for %s from %s are accepted too (metadata: %s).\n", cfg.OAuth.Resource(), strings.Join(cfg.OAuth.Issuers(), ", "), meta)
	}
	return g.Wait()
}

// Info is what `latch dev` leaves in its data dir for `latch demo`.
type Info struct {
	MCPURL  string `json:"mcp_url"`
	DemoURL string `json:"demo_url"`
	Token   string `json:"token"`
	// Catalog is CatalogExample or the --catalog file; "" from a dev.json
	// written before it was recorded.
	Catalog string `json:"catalog,omitempty"`
	// PID is the `latch dev` process (latch bench reads its CPU time); 0
	// in a dev.json written before it was recorded.
	PID int `json:"pid,omitempty"`
	// OpsURL is the control plane's ops listener (latch bench reads its
	// /metrics); "" when it is off or in a dev.json written before it was
	// recorded.
	OpsURL string `json:"ops_url,omitempty"`
}

// Bearer is an HTTP transport that sends the dev token on every request,
// over rt: how latch demo and latch bench reach the MCP front as the dev
// actor (their own transports: internal/egress lists them).
func (i Info) Bearer(rt http.RoundTripper) http.RoundTripper {
	return bearer{token: i.Token, rt: rt}
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// CatalogExample is Info.Catalog for the embedded example catalog.
const CatalogExample = "example"

// WriteInfo writes dev.json, readable by its owner only (it holds the
// token). Atomically (temp file, rename): a reader that sees the file sees
// all of it.
func WriteInfo(data string, info Info) error {
	b, _ := json.MarshalIndent(info, "", "  ")
	return atomicfile.Write(datadir.DevInfo(data), b, 0o600, false)
}

func serveHTTP(ctx context.Context, srv *http.Server, lis net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// StaticToken is the dev token as the control plane knows it: not stored,
// not journaled, gone with the process.
func StaticToken(token string) tokens.Static {
	return tokens.Static{Credential: token, Actor: Actor, ID: "dev"}
}

type banner struct {
	url, token, source, data, demo, catalog string
	strict                                  bool
	// ops is the ops listener's URL ("" when off); signIn the console's
	// one-time sign-in link, as operator signInAs.
	ops, signIn, signInAs string
}

func printBanner(w io.Writer, b banner) {
	var src string
	switch b.source {
	case TokenFromFlag:
		src = "chosen with --dev-token; kept in " + datadir.DevToken(b.data)
	case TokenFromEnv:
		src = "chosen with LATCH_DEV_TOKEN; kept in " + datadir.DevToken(b.data)
	case TokenNew:
		src = "new; kept in " + datadir.DevToken(b.data) + " for later runs"
	default:
		src = "kept in " + datadir.DevToken(b.data)
	}
	strict := "off: the dev actor is trusted (no session authorization); --strict applies the full decision order"
	if b.strict {
		strict = "on: the dev actor's new sessions wait for latch session authorize (logged with the command)"
	}
	catalog := "the embedded example, pointed at the demo target"
	if b.catalog != CatalogExample {
		catalog = b.catalog + " (latch demo needs the example catalog)"
	}
	opsLine := ""
	if b.ops != "" {
		opsLine = fmt.Sprintf("  metrics        %s/metrics   (health: %s/healthz, %s/readyz)\n", b.ops, b.ops, b.ops)
	}
	if b.signIn != "" {
		opsLine += fmt.Sprintf("  console        %s/ui/\n                 sign in once as %s: %s\n                 (one-time link, valid 24h; later: latch operator token create NAME)\n", b.ops, b.signInAs, b.signIn)
	}
	dataArg := ""
	if b.data != ".latch-dev" {
		dataArg = " --data " + b.data
	}
	story := "Try the story:  latch demo" + dataArg
	if b.catalog != CatalogExample {
		story = "The dropped-connection story (latch demo) needs the example catalog: run latch dev without --catalog to try it."
	}
	fmt.Fprintf(w, `
Latch dev is running.

  MCP endpoint   %s
  bearer token   %s   (actor %q)
                 %s
                 choose another with --dev-token TOKEN or LATCH_DEV_TOKEN=TOKEN
  strict         %s
  catalog        %s
  data dir       %s   (admin commands: latch exec list%s)
  demo target    %s   (/_demo/delay and /_demo/effects: see docs/tutorial/quickstart.md)
%s
Connect an MCP client (Streamable HTTP):

  Claude Code:   claude mcp add --transport http latch %s --header "Authorization: Bearer %s"
  Cursor / VS Code (mcp.json):
    {"mcpServers": {"latch": {"url": "%s", "headers": {"Authorization": "Bearer %s"}}}}

%s
Ctrl-C stops cleanly; a later latch dev%s resumes with the same token.
`, b.url, b.token, Actor, src, strict, catalog, b.data, dataArg, b.demo, opsLine, b.url, b.token, b.url, b.token, story, dataArg)
}

func frontMetrics(reg prometheus.Registerer) *mcpfront.Metrics {
	if reg == nil {
		return nil
	}
	return mcpfront.NewMetrics(reg)
}

func agentMetrics(reg prometheus.Registerer) *agent.Metrics {
	if reg == nil {
		return nil
	}
	return agent.NewMetrics(reg)
}
