package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchhq/latch/controlplane/console"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/buildinfo"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/internal/tracing"
	"github.com/latchhq/latch/tools"
)

// mountConsole serves the operator console at /ui/ on the ops listener. A
// PostgreSQL standby has no state to show: /ui/ sends the browser to the
// active replica's console (the URL it published: server.ActiveConsole),
// or, while that is not known, says it is a standby (503); once it takes
// over it serves the console and publishes advertise as its own.
func mountConsole(ob *Observability, ops *opshttp.Server, st *Stack, secure bool, advertise string) (*console.Console, error) {
	srv := st.Server
	if srv.Loaded() {
		c, err := newConsole(ob, st, secure)
		if err != nil {
			return nil, err
		}
		ops.Handle(console.Prefix, c.Handler())
		st.Go(func(ctx context.Context) error {
			if err := srv.PublishConsole(ctx, advertise); err != nil {
				ob.log.Warn("console address not published: standbys answer 503 instead of sending browsers here", "error", err)
			}
			<-ctx.Done()
			c.Stop() // end the event streams so the ops listener stops promptly
			return nil
		})
		return c, nil
	}
	var h atomic.Pointer[http.Handler]
	ops.Handle(console.Prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := h.Load(); p != nil {
			(*p).ServeHTTP(w, r)
			return
		}
		if u := srv.ActiveConsole(); u != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// The host is the one the lease holder published in the
			// store; only the path under /ui/ and the query come from
			// the request.
			http.Redirect(w, r, strings.TrimSuffix(u, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect) //nolint:gosec // see above: the destination host is not the request's
			return
		}
		role := srv.Role()
		msg := "this control plane replica is a standby: the console is served by the active replica"
		if role.Active != "" {
			msg += " (API at " + role.Active + ")"
		}
		http.Error(w, msg+"; this one serves it once it takes over", http.StatusServiceUnavailable)
	}))
	st.Go(func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case <-srv.ActiveC():
		}
		c, err := newConsole(ob, st, secure)
		if err != nil {
			return err
		}
		ch := c.Handler()
		h.Store(&ch)
		if err := srv.PublishConsole(ctx, advertise); err != nil {
			ob.log.Warn("console address not published: standbys answer 503 instead of sending browsers here", "error", err)
		}
		ob.log.Info("operator console serving: this replica took over", "url", advertise)
		<-ctx.Done()
		c.Stop()
		return nil
	})
	return nil, nil
}

// newConsole builds the console over the loaded state.
func newConsole(ob *Observability, st *Stack, secure bool) (*console.Console, error) {
	srv := st.Server
	verify := fmt.Sprintf("latch audit verify %s", srv.DataDir())
	if srv.OnPostgres() {
		// Never the URL itself: it may hold a password.
		verify = "latch audit verify --store 'postgres://…'   (the connection string latch serve --store uses, with a read-only role)"
	}
	c, err := console.New(console.Config{
		Logger: ob.log, Store: srv.Store, Reads: srv.Engine, Connect: srv.ConsoleConn, Operators: srv.Tokens,
		Catalog:       func() *tools.Catalog { return srv.Catalog.Current().Catalog },
		VerifierKey:   srv.VerifierKey(),
		VerifyCommand: verify,
		Secure:        secure,
		Counts:        ob.Telemetry.Executions,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Observability is a control plane's registry, tracer provider and
// telemetry, and its ops listener and console once the stack serves them.
type Observability struct {
	log       hclog.Logger
	Registry  *prometheus.Registry
	Tracer    *tracing.Provider
	Telemetry *telemetry.Telemetry
	ops       *opshttp.Server
	// Console is the operator console on the ops listener (nil when off,
	// and on a standby until it takes over).
	Console *console.Console
}

// NewObservability builds the registry, the tracer provider (OTEL_*
// variables) and the telemetry, whose tool labels are cat's.
func NewObservability(ctx context.Context, log hclog.Logger, cat *tools.Catalog) (*Observability, error) {
	tp, err := tracing.FromEnv(ctx, "latch", buildinfo.Read().Version, log)
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
	return &Observability{log: log, Registry: reg, Tracer: tp, Telemetry: t}, nil
}

// OpsConfig is the ops listener's (latch serve/dev --ops-listen).
type OpsConfig struct {
	// Listen is its address ("": no ops listener).
	Listen string
	// Advertise is the URL browsers reach this replica's console at, where
	// standbys send them while it is active ("": the listener's URL).
	Advertise string
	// TLSCert and TLSKey serve HTTPS (required unless Listen is loopback).
	TLSCert, TLSKey string
}

// Serve binds the ops listener (when o.Listen is set) with the stack's
// readiness checks and runs it with the control plane. It returns the
// listener's URL ("" when off).
func (ob *Observability) Serve(o OpsConfig, st *Stack) (string, error) {
	v := st.Vault
	ob.Telemetry.ObserveVault(func() bool { return v.Status().Locked })
	ob.Telemetry.ObserveHeld(func() int {
		if c := st.Server.Catalog.Current().Catalog; c != nil {
			return len(c.Held)
		}
		return 0
	})
	if o.Listen == "" {
		return "", nil
	}
	checks := append(st.Server.ReadyChecks(), opshttp.Check{Name: "vault", Ready: func(context.Context) error { return vaultReady(v.Status()) }})
	ops, err := opshttp.New(opshttp.Config{Logger: ob.log, Addr: o.Listen, Gatherer: ob.Registry, Checks: checks, Status: st.Server.Status, TLSCert: o.TLSCert, TLSKey: o.TLSKey})
	if errors.Is(err, opshttp.ErrNotLoopback) {
		return "", fmt.Errorf("--ops-listen %s is not a loopback address: pass --ops-tls-cert-file and --ops-tls-key-file, or a loopback address: %w", o.Listen, err)
	}
	if err != nil {
		return "", err
	}
	if err := ops.Listen(); err != nil {
		return "", fmt.Errorf("%w (pass --ops-listen to use another address)", err)
	}
	ob.ops = ops
	advertise := o.Advertise
	if advertise == "" {
		advertise = ops.URL()
	}
	if ob.Console, err = mountConsole(ob, ops, st, o.TLSCert != "", advertise); err != nil {
		return "", err
	}
	st.Go(ops.Serve)
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

// Close flushes the settled-execution log lines and pending spans; call it
// after the control plane stopped.
func (ob *Observability) Close() {
	ob.Telemetry.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ob.Tracer.Shutdown(ctx); err != nil {
		ob.log.Warn("traces not flushed", "error", err)
	}
}
