// Package tlsfiles builds the TLS configurations of the control plane's
// TCP listener and of its clients (latch-mcp, the latch CLI) from PEM files,
// TLS 1.3 only, and reloads a certificate, its key and a client CA bundle
// when their files change, so short-lived certificates rotate without a
// restart. A file that fails to load is logged and the previous material
// is kept. The control plane and the MCP front share it.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Errors.
var (
	// ErrNoPEM: a CA file holds no PEM certificate.
	ErrNoPEM = errors.New("tlsfiles: no PEM certificate")
)

// Server is the configuration of a listener that requires client
// certificates signed by the CA bundle in caFile (mutual TLS 1.3). The
// certificate, key and CA bundle are re-read when their files change.
func Server(certFile, keyFile, caFile string, log hclog.Logger) (*tls.Config, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	cert, err := newWatched(log, func() (*tls.Certificate, error) { return loadPair(certFile, keyFile) }, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.get(), nil },
	}
	if caFile == "" {
		return cfg, nil
	}
	cas, err := newWatched(log, func() (*x509.CertPool, error) { return loadPool(caFile) }, caFile)
	if err != nil {
		return nil, err
	}
	// The top level names the pool too: callers check that mutual TLS is on.
	cfg.ClientCAs, cfg.ClientAuth = cas.get(), tls.RequireAndVerifyClientCert
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{
			MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: cas.get(),
			GetCertificate: cfg.GetCertificate,
		}, nil
	}
	return cfg, nil
}

// Client is the configuration of a client that verifies the server with
// the CA bundle in caFile and, when certFile is given, presents that
// client certificate (re-read when its files change). The CA bundle is
// read once.
func Client(caFile, certFile, keyFile string, log hclog.Logger) (*tls.Config, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if certFile == "" && keyFile == "" {
		return cfg, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tlsfiles: a client certificate needs both its certificate and its key file")
	}
	cert, err := newWatched(log, func() (*tls.Certificate, error) { return loadPair(certFile, keyFile) }, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert.get(), nil }
	return cfg, nil
}

func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: certificate %s with key %s: %w", certFile, keyFile, err)
	}
	return &c, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w in CA bundle %s", ErrNoPEM, caFile)
	}
	return pool, nil
}

// checkEvery bounds how often the files are stat'ed (at most once per
// handshake, and not more than this often). A variable for tests.
var checkEvery = time.Second

// watched is a value loaded from files, reloaded when one of them changes
// (size or modification time).
type watched[T any] struct {
	log   hclog.Logger
	load  func() (T, error)
	files []string

	mu      sync.Mutex
	val     T
	stamps  []string
	checked time.Time
}

func newWatched[T any](log hclog.Logger, load func() (T, error), files ...string) (*watched[T], error) {
	v, err := load()
	if err != nil {
		return nil, err
	}
	return &watched[T]{log: log, load: load, files: files, val: v, stamps: stamp(files), checked: time.Now()}, nil
}

func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checked) < checkEvery {
		return w.val
	}
	w.checked = time.Now()
	st := stamp(w.files)
	if slices.Equal(st, w.stamps) {
		return w.val
	}
	v, err := w.load()
	if err != nil {
		// A half-written rotation: keep serving the old material and try
		// again at the next check.
		w.log.Error("TLS files changed but do not load; keeping the previous ones", "files", w.files, "error", err)
		return w.val
	}
	w.val, w.stamps = v, st
	w.log.Info("TLS files reloaded", "files", w.files)
	return w.val
}

func stamp(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		if fi, err := os.Stat(f); err == nil {
			out[i] = fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return out
}
