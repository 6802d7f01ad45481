// Package opshttp is the operations HTTP listener every Latch binary can
// serve: /metrics (Prometheus text format from the registry it is given),
// /healthz (the process is up and serving HTTP) and /readyz (every
// readiness check passes). A component adds its own pages with Handle (the
// control plane's console will live at /ui/).
//
// It refuses a non-loopback address without TLS: metrics name tools,
// targets and states, which are an operator's business. Imported by the
// three binaries' packages; it imports nothing of Latch's but loopback.
package opshttp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latchhq/latch/internal/loopback"
)

// Sentinel errors.
var (
	ErrNotLoopback = errors.New("opshttp: refusing a non-loopback address without TLS")
	ErrIncomplete  = errors.New("opshttp: Config is incomplete")
)

// Check is one readiness condition: Ready returns nil when it holds, or an
// error saying what is wrong and what to do.
type Check struct {
	Name  string
	Ready func(ctx context.Context) error
}

// Config configures a listener.
type Config struct {
	Logger hclog.Logger
	// Addr is the host:port to listen on (required).
	Addr string
	// Gatherer is what /metrics serves (required).
	Gatherer prometheus.Gatherer
	// Checks are /readyz's conditions, all of which must pass.
	Checks []Check
	// Status, when set, adds facts about the process to /healthz (one
	// "key: value" line each, after "ok", sorted by key) and /readyz (its
	// "status" object): the control plane's replica role, holder, epoch.
	Status func() map[string]string
	// TLSCert and TLSKey (PEM files) serve HTTPS; required for a
	// non-loopback Addr.
	TLSCert, TLSKey string
}

// Server is an ops listener.
type Server struct {
	cfg Config
	log hclog.Logger
	mux *http.ServeMux
	tls *tls.Config

	mu  sync.Mutex
	lis net.Listener
}

// New validates cfg and builds the listener (nothing is bound yet).
func New(cfg Config) (*Server, error) {
	if cfg.Addr == "" || cfg.Gatherer == nil {
		return nil, fmt.Errorf("%w: Addr and Gatherer are required", ErrIncomplete)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, log: cfg.Logger.Named("ops"), mux: http.NewServeMux()}
	switch {
	case (cfg.TLSCert == "") != (cfg.TLSKey == ""):
		return nil, errors.New("opshttp: the TLS certificate and key go together (pass both, or neither for a loopback address)")
	case cfg.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("opshttp: TLS certificate: %w", err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	case !loopback.HostPort(cfg.Addr):
		return nil, fmt.Errorf("%w: %s (pass a TLS certificate and key, or a loopback address such as 127.0.0.1:7410)", ErrNotLoopback, cfg.Addr)
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: stdLog{s.log}}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "ok")
		st := s.status()
		keys := make([]string, 0, len(st))
		for k := range st {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%s: %s\n", k, st[k])
		}
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	return s, nil
}

// Handle adds a page (before Serve).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Handler is the listener's mux (for tests and for embedding).
func (s *Server) Handler() http.Handler { return s.mux }

// Listen binds Addr; Serve calls it when it was not called before.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis != nil {
		return nil
	}
	lis, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("opshttp: listen on %s: %w", s.cfg.Addr, err)
	}
	if s.tls != nil {
		lis = tls.NewListener(lis, s.tls)
	}
	s.lis = lis
	return nil
}

// URL is the listener's base URL once bound ("" before).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis == nil {
		return ""
	}
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	return scheme + "://" + s.lis.Addr().String()
}

// Serve serves until ctx ends, then shuts down within five seconds.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.lis) }()
	s.log.Debug("ops listener serving", "url", s.URL())
	select {
	case err := <-errc:
		return fmt.Errorf("opshttp: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck // a slow scrape is cut, nothing else is lost
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("opshttp: %w", err)
		}
		return nil
	}
}

// readyz answers 200 when every check passes, 503 otherwise, with a JSON
// body naming each check and, for a failing one, why.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	type result struct {
		Name  string `json:"name"`
		Ready bool   `json:"ready"`
		Error string `json:"error,omitempty"`
	}
	body := struct {
		Ready  bool              `json:"ready"`
		Checks []result          `json:"checks"`
		Status map[string]string `json:"status,omitempty"`
	}{Ready: true, Checks: []result{}, Status: s.status()}
	for _, c := range s.cfg.Checks {
		res := result{Name: c.Name, Ready: true}
		if err := c.Ready(ctx); err != nil {
			res.Ready, res.Error, body.Ready = false, err.Error(), false
		}
		body.Checks = append(body.Checks, res)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(body) //nolint:errcheck // the client went away
}

func (s *Server) status() map[string]string {
	if s.cfg.Status == nil {
		return nil
	}
	return s.cfg.Status()
}

// stdLog adapts hclog to promhttp's error logger.
type stdLog struct{ l hclog.Logger }

func (s stdLog) Println(v ...any) { s.l.Warn("metrics scrape failed", "error", fmt.Sprint(v...)) }
