package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchhq/latch/controlplane/console"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/loopback"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/internal/tracing"
	"github.com/latchhq/latch/tools"
)

// devOpsListen is where `latch dev` serves /metrics, /healthz and /readyz.
const devOpsListen = "127.0.0.1:7410"

// opsFlags are the ops listener's and the log format's flags, shared by
// serve and dev.
type opsFlags struct {
	listen, cert, key string
	logFormat         string
	// advertise is the URL browsers reach the ops listener at (standbys
	// send them there while this replica is active).
	advertise string
}

func addOpsFlags(fs *flag.FlagSet, defaultListen string) *opsFlags {
	o := &opsFlags{}
	what := "serve /metrics, /healthz, /readyz and the console (/ui/) on this address (e.g. 127.0.0.1:7410); TLS required unless loopback"
	if defaultListen != "" {
		what = "address of /metrics, /healthz, /readyz and the console /ui/ (TLS required unless loopback)"
	}
	fs.StringVar(&o.listen, "http-listen", defaultListen, what)
	fs.StringVar(&o.cert, "http-tls-cert", "", "with --http-listen: serve HTTPS with this certificate (PEM)")
	fs.StringVar(&o.key, "http-tls-key", "", "with --http-listen: the certificate's key (PEM)")
	fs.StringVar(&o.advertise, "http-advertise", "", "with --http-listen and a PostgreSQL --store: the URL browsers reach this replica's console at (e.g. https://ops-a.example:7410), where standbys send them while it is active (default: the --http-listen URL)")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json (one JSON object per line)")
	return o
}

func (o *opsFlags) validate(level string) error {
	if o.logFormat != "text" && o.logFormat != "json" {
		return usagef("--log-format %q is not text or json", o.logFormat)
	}
	if hclog.LevelFromString(level) == hclog.NoLevel {
		return usagef("--log-level %q is not one of trace, debug, info, warn, error", level)
	}
	if (o.cert != "" || o.key != "") && o.listen == "" {
		return usagef("--http-tls-cert and --http-tls-key need --http-listen")
	}
	if o.listen != "" && o.cert == "" && !loopback.HostPort(o.listen) {
		return usagef("--http-listen %s is not a loopback address: pass --http-tls-cert and --http-tls-key, or a loopback address", o.listen)
	}
	return nil
}

// formattedLogger is the root logger of serve and dev.
func formattedLogger(w io.Writer, level, format string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "latch", Level: hclog.LevelFromString(level), Output: w, JSONFormat: format == "json"})
}

// observability is a control plane's registry, tracer provider and
// telemetry, and its ops listener once the stack exists.
type observability struct {
	log       hclog.Logger
	reg       *prometheus.Registry
	tracer    *tracing.Provider
	telemetry *telemetry.Telemetry
	ops       *opshttp.Server
	// console is the operator console on the ops listener (nil when off).
	console *console.Console
}

func newObservability(ctx context.Context, log hclog.Logger, cat *tools.Catalog) (*observability, error) {
	version, _ := opshttp.Build()
	tp, err := tracing.FromEnv(ctx, "latch", version, log)
	if err != nil {
		return nil, err
	}
	reg := opshttp.NewRegistry()
	t, err := telemetry.New(telemetry.Config{Registry: reg, Tracer: tp, Logger: log, Catalog: cat})
	if err != nil {
		tp.Shutdown(ctx) //nolint:errcheck // nothing was exported yet
		return nil, err
	}
	if tp.Enabled() {
		log.Info("exporting traces over OTLP/HTTP (OTEL_EXPORTER_OTLP_* variables)")
	}
	return &observability{log: log, reg: reg, tracer: tp, telemetry: t}, nil
}

// serve binds the ops listener (when o.listen is set) with the stack's
// readiness checks and runs it with the control plane. It returns the
// listener's URL ("" when off).
func (ob *observability) serve(o *opsFlags, st *stack) (string, error) {
	v := st.vault
	ob.telemetry.ObserveVault(func() bool { return v.Status().Locked })
	if o.listen == "" {
		return "", nil
	}
	checks := append(st.srv.ReadyChecks(), opshttp.Check{Name: "vault", Ready: func(context.Context) error { return vaultReady(v.Status()) }})
	ops, err := opshttp.New(opshttp.Config{Logger: ob.log, Addr: o.listen, Gatherer: ob.reg, Checks: checks, Status: st.srv.Status, TLSCert: o.cert, TLSKey: o.key})
	if errors.Is(err, opshttp.ErrNotLoopback) {
		return "", usagef("--http-listen %s is not a loopback address: pass --http-tls-cert and --http-tls-key, or a loopback address", o.listen)
	}
	if err != nil {
		return "", err
	}
	if err := ops.Listen(); err != nil {
		return "", fmt.Errorf("%w (pass --http-listen to use another address)", err)
	}
	ob.ops = ops
	advertise := o.advertise
	if advertise == "" {
		advertise = ops.URL()
	}
	if ob.console, err = mountConsole(ob, ops, st, o.cert != "", advertise); err != nil {
		return "", err
	}
	st.srv.Go(ops.Serve)
	ob.log.Info("ops listener ready", "url", ops.URL())
	return ops.URL(), nil
}

func vaultReady(s vault.Status) error {
	switch {
	case !s.Initialized:
		return errors.New("the vault is not initialized: every action is denied until `latch vault init`")
	case s.Locked:
		return errors.New("the vault is locked: every action is denied until `latch vault unlock`")
	}
	return nil
}

// close flushes the settled-execution log lines and pending spans; call it
// after the control plane stopped.
func (ob *observability) close() {
	ob.telemetry.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ob.tracer.Shutdown(ctx); err != nil {
		ob.log.Warn("traces not flushed", "error", err)
	}
}
