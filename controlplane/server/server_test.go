package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/controlplane/catalog"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

const catalogYAML = `
targets:
  api: {channel: http, base_url: "http://127.0.0.1:1", allow_private: true}
tools:
  look:
    description: Look.
    target: api
    request: {method: GET, path: /}
    replay: read_only
`

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "latch test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func TestTCPAPIRequiresTLSOffLoopback(t *testing.T) {
	_, err := New(Config{DataDir: t.TempDir(), CatalogSource: catalog.Bytes("c.yaml", []byte(catalogYAML)), TCPAddr: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "without TLS") {
		t.Errorf("New with a non-loopback TCP address and no TLS = %v, want a refusal naming TLS", err)
	}
}

func TestTCPAPIOverTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	srv, err := New(Config{DataDir: t.TempDir(), CatalogSource: catalog.Bytes("c.yaml", []byte(catalogYAML)), TCPAddr: "127.0.0.1:0",
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	call := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(srv.TCPAddr(), grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		// ListTools: served to any caller (List without an agent's
		// credential is the operator's, and this client is anonymous).
		_, err = controlplanev1.NewControlPlaneClient(conn).ListTools(cctx, &controlplanev1.ListToolsRequest{})
		return err
	}
	if err := call(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})); err != nil {
		t.Errorf("ListTools over TLS: %v", err)
	}
	if err := call(insecure.NewCredentials()); err == nil {
		t.Error("a plaintext client was served on the TLS listener")
	}
}
