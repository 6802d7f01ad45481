package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/buildinfo"
	"github.com/latchhq/latch/internal/config"
	"github.com/latchhq/latch/internal/loopback"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/internal/tracing"
	"github.com/latchhq/latch/mcpfront"
)

// opsOptions are the flags of the front's metrics listener and log format.
type opsOptions struct {
	metricsListen string
	logFormat     string
}

func (o *opsOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsListen, "ops-listen", "", "serve /metrics, /healthz and /readyz on this loopback address (e.g. 127.0.0.1:7413); off when empty")
	config.Alias(fs, "metrics-listen", "ops-listen")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json (one JSON object per line)")
}

func (o *opsOptions) validate() error {
	if o.logFormat != "text" && o.logFormat != "json" {
		return fmt.Errorf("%w: --log-format %q is not text or json", errUsage, o.logFormat)
	}
	if o.metricsListen != "" && !loopback.HostPort(o.metricsListen) {
		return fmt.Errorf("%w: --ops-listen %s is not a loopback address (metrics are served on loopback only, e.g. 127.0.0.1:7413)", errUsage, o.metricsListen)
	}
	return nil
}

func (o *opsOptions) logger(level string, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "latch-mcp", Level: hclog.LevelFromString(level), Output: w, JSONFormat: o.logFormat == "json"})
}

// frontOps is the front's registry, metrics listener and tracer provider.
type frontOps struct {
	log    hclog.Logger
	ops    *opshttp.Server
	tracer *tracing.Provider
}

// setup fills cfg.Metrics and cfg.Tracer and builds the metrics listener
// (bound, not yet serving) when --ops-listen is set.
func (o *opsOptions) setup(ctx context.Context, log hclog.Logger, cfg *mcpfront.Config) (*frontOps, error) {
	tp, err := tracing.FromEnv(ctx, "latch-mcp", buildinfo.Read().Version, log)
	if err != nil {
		return nil, err
	}
	cfg.Tracer = tp
	fo := &frontOps{log: log, tracer: tp}
	if o.metricsListen == "" {
		return fo, nil
	}
	reg := opshttp.NewRegistry()
	cfg.Metrics = mcpfront.NewMetrics(reg)
	ops, err := opshttp.New(opshttp.Config{Logger: log, Addr: o.metricsListen, Gatherer: reg})
	if errors.Is(err, opshttp.ErrNotLoopback) {
		return nil, fmt.Errorf("%w: --ops-listen %s is not a loopback address", errUsage, o.metricsListen)
	}
	if err != nil {
		return nil, err
	}
	if err := ops.Listen(); err != nil {
		return nil, err
	}
	log.Info("metrics listener ready", "url", ops.URL()+"/metrics")
	fo.ops = ops
	return fo, nil
}

// serve runs the metrics listener until ctx ends (a no-op when off).
func (fo *frontOps) serve(ctx context.Context) error {
	if fo.ops == nil {
		<-ctx.Done()
		return nil
	}
	return fo.ops.Serve(ctx)
}

func (fo *frontOps) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fo.tracer.Shutdown(ctx); err != nil {
		fo.log.Warn("traces not flushed", "error", err)
	}
}
