package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/hostagent/agent"
	"github.com/latchhq/latch/mcpfront"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/tools"
	"github.com/latchhq/latch/tools/examples"
)

// Dev defaults.
const (
	devListen     = "127.0.0.1:7411"
	devDemoListen = "127.0.0.1:7412"
	devActor      = "dev"
	devDemoURL    = "http://" + devDemoListen
)

func runDev(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	data := fs.String("data", defaultDataDir, "data dir; a later `latch dev` on the same dir resumes it")
	listen := fs.String("listen", devListen, "address of the MCP front (path /mcp)")
	demoListen := fs.String("demo-listen", devDemoListen, "address of the built-in demo HTTP target")
	catalogPath := fs.String("catalog", "", "tool catalog (default: the example catalog pointed at the demo target)")
	level := fs.String("log-level", "info", "trace, debug, info, warn or error")
	ckptCopy := fs.String("checkpoint-copy", "", "append every signed checkpoint to this file, as latch serve does (keep it off the data dir's disk)")
	strict := fs.Bool("strict", false, "apply the full decision order to the dev actor too (its new sessions need `latch session authorize`)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	log := newLogger(env, *level)
	demoLis, err := net.Listen("tcp", *demoListen)
	if err != nil {
		return fmt.Errorf("demo target: %w (pass --demo-listen to use another address)", err)
	}
	defer demoLis.Close()
	mcpLis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("MCP front: %w (pass --listen to use another address)", err)
	}
	defer mcpLis.Close()
	agentSock := filepath.Join(*data, "hostagent.sock")
	cat, err := devCatalog(*catalogPath, "http://"+demoLis.Addr().String(), agentSock)
	if err != nil {
		return err
	}
	token := env.Getenv("LATCH_DEV_TOKEN")
	if token == "" {
		token = newDevToken()
	}
	sc := stackConfig{Logger: log, DataDir: *data, Catalog: cat, CheckpointCopy: *ckptCopy, DevVault: true, Recovery: recoveryForDev(), Actors: []string{devActor}}
	if !*strict {
		sc.Trusted = []string{devActor}
	}
	st, err := newStack(sc)
	if err != nil {
		return err
	}
	defer st.close()
	if err := st.srv.Listen(); err != nil {
		return err
	}

	conn, err := dialSocket(server.SocketPath(*data))
	if err != nil {
		return err
	}
	defer conn.Close()
	front, err := mcpfront.New(mcpfront.Config{
		Logger: log, ControlPlane: controlplanev1.NewControlPlaneClient(conn), Catalog: cat,
		Tokens: &devTokens{token: token, store: st.tokens},
	})
	if err != nil {
		return err
	}
	defer front.Close()
	demo := demotarget.New(demotarget.Config{Logger: log})
	demoSrv := &http.Server{Handler: demo, ReadHeaderTimeout: 10 * time.Second}
	mcpSrv := &http.Server{Handler: front.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}

	ag, err := agent.New(agent.Config{DataDir: filepath.Join(*data, "hostagent"), SocketPath: agentSock, Logger: log})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return st.srv.Run(gctx) })
	g.Go(func() error { return ag.Serve(gctx) })
	g.Go(func() error { return serveHTTP(gctx, demoSrv, demoLis) })
	g.Go(func() error { return serveHTTP(gctx, mcpSrv, mcpLis) })
	if err := writeDevInfo(*data, devInfo{MCPURL: "http://" + mcpLis.Addr().String() + "/mcp", DemoURL: "http://" + demoLis.Addr().String(), Token: token}); err != nil {
		return err
	}
	defer os.Remove(devInfoPath(*data))
	printDevBanner(env.Stdout, "http://"+mcpLis.Addr().String()+"/mcp", token, *data, "http://"+demoLis.Addr().String())
	return g.Wait()
}

// devCatalog loads --catalog as is, or the embedded example catalog with its
// demo-target URLs pointed at the running demo target.
//
// The embedded catalog's SSH targets with a host agent become `local`
// targets of the dev host agent, so its migration tool runs on this machine.
func devCatalog(path, demoURL, agentSocket string) (*tools.Catalog, error) {
	if path != "" {
		cat, err := tools.Load(path)
		if err != nil {
			return nil, fmt.Errorf("catalog refused:\n%v", err)
		}
		return cat, nil
	}
	cat, err := tools.Parse("tools/examples/catalog.yaml (embedded)", examples.Catalog)
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	for _, t := range cat.Targets {
		switch {
		case t.Channel == tools.ChannelHTTP && t.BaseURL == devDemoURL:
			t.BaseURL = demoURL
		case t.Channel == tools.ChannelSSH && t.HostagentSocket != "":
			*t = tools.Target{Name: t.Name, Channel: tools.ChannelLocal, HostagentSocket: agentSocket, Timeout: t.Timeout}
		}
	}
	return cat, nil
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

func dialSocket(sock string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///latch-control-plane",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}))
}

func newDevToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "latch_dev_" + base64.RawURLEncoding.EncodeToString(b)
}

// devTokens accepts the dev token as the dev actor, and every token made by
// `latch token create`.
type devTokens struct {
	token string
	store mcpfront.TokenVerifier
}

func (d *devTokens) Verify(ctx context.Context, tok string) (string, string, error) {
	if subtle.ConstantTimeCompare([]byte(tok), []byte(d.token)) == 1 {
		return devActor, "dev", nil
	}
	return d.store.Verify(ctx, tok)
}

func printDevBanner(w io.Writer, url, token, data, demo string) {
	fmt.Fprintf(w, `
Latch dev is running.

  MCP endpoint   %s
  bearer token   %s   (actor %q)
  data dir       %s   (admin commands: latch exec list --data %s)
  demo target    %s

Connect an MCP client (Streamable HTTP):

  Claude Code:   claude mcp add --transport http latch %s --header "Authorization: Bearer %s"
  Cursor / VS Code (mcp.json):
    {"mcpServers": {"latch": {"url": "%s", "headers": {"Authorization": "Bearer %s"}}}}

Try the story:  latch demo --data %s
Ctrl-C stops cleanly; a later `+"`latch dev --data %s`"+` resumes.
`, url, token, devActor, data, data, demo, url, token, url, token, data, data)
}

// recoveryForDev resolves unknowns quickly so the demo's story is short.
func recoveryForDev() engine.RecoveryConfig {
	return engine.RecoveryConfig{Interval: 500 * time.Millisecond, MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second}
}
