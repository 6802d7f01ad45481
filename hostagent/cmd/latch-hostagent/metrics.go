package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/errgroup"

	"github.com/latchhq/latch/hostagent/agent"
	"github.com/latchhq/latch/internal/opshttp"
)

// metricsListener builds the agent's metrics and, when addr is set, its
// bound metrics listener (loopback only: the agent has no TLS flags).
func metricsListener(log hclog.Logger, addr string) (*agent.Metrics, *opshttp.Server, error) {
	if addr == "" {
		return nil, nil, nil
	}
	reg := opshttp.NewRegistry()
	m := agent.NewMetrics(reg)
	ops, err := opshttp.New(opshttp.Config{Logger: log, Addr: addr, Gatherer: reg})
	if errors.Is(err, opshttp.ErrNotLoopback) {
		return nil, nil, fmt.Errorf("--ops-listen %s is not a loopback address", addr)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := ops.Listen(); err != nil {
		return nil, nil, fmt.Errorf("--ops-listen: %w", err)
	}
	log.Info("metrics listener ready", "url", ops.URL()+"/metrics")
	return m, ops, nil
}

// serveWithMetrics runs the agent and, when set, its metrics listener; the
// listener stops when the agent does.
func serveWithMetrics(ctx context.Context, serve func(context.Context) error, ops *opshttp.Server) error {
	if ops == nil {
		return serve(ctx)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { defer stop(); return serve(gctx) })
	g.Go(func() error { return ops.Serve(gctx) })
	return g.Wait()
}
