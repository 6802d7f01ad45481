package tlsfiles

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/testing/testpki"
)

func init() { checkEvery = 0 }

// replace writes data to path with a modification time that differs from
// the previous one (file systems with coarse timestamps).
func replace(t *testing.T, path string, data []byte, n int) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(time.Duration(n) * time.Hour)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// handshake runs one TLS handshake over a loopback listener and returns
// both sides' views, or the client's error.
func handshake(t *testing.T, srv, cli *tls.Config) (server, client tls.ConnectionState, err error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan tls.ConnectionState, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- tls.ConnectionState{}
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		tc.Handshake()
		got <- tc.ConnectionState()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cli)
	if err != nil {
		<-got
		return tls.ConnectionState{}, tls.ConnectionState{}, err
	}
	defer c.Close()
	// TLS 1.3: the server's verdict on the client certificate arrives
	// after the client's handshake; a read surfaces it.
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	_, rerr := c.Read(b[:])
	s := <-got
	if len(s.PeerCertificates) == 0 && rerr != nil && !isTimeout(rerr) {
		return s, c.ConnectionState(), rerr
	}
	return s, c.ConnectionState(), nil
}

func isTimeout(err error) bool {
	ne, ok := err.(interface{ Timeout() bool })
	return ok && ne.Timeout()
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := testpki.NewCA(t, "ca1"), testpki.NewCA(t, "ca2")
	srvCert, srvKey := ca1.Server(t).Write(t, dir, "server")
	caFile := ca1.Write(t, dir, "clients")
	cliCert, cliKey := ca1.Client(t, "front-a", "spiffe://t/front/a").Write(t, dir, "client")
	serverCA := ca1.Write(t, dir, "server-ca")
	log := hclog.NewNullLogger()

	srv, err := Server(srvCert, srvKey, caFile, log)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := Client(serverCA, cliCert, cliKey, log)
	if err != nil {
		t.Fatal(err)
	}
	s, c, err := handshake(t, srv, cli)
	if err != nil {
		t.Fatalf("first handshake: %v", err)
	}
	if c.Version != tls.VersionTLS13 || s.PeerCertificates[0].URIs[0].String() != "spiffe://t/front/a" {
		t.Fatalf("first handshake: version %x, client %v", c.Version, s.PeerCertificates[0].URIs)
	}
	firstSerial := c.PeerCertificates[0].SerialNumber

	// The server's certificate rotates.
	l := ca1.Server(t)
	replace(t, srvCert, l.CertPEM, 1)
	replace(t, srvKey, l.KeyPEM, 1)
	if _, c, err = handshake(t, srv, cli); err != nil || c.PeerCertificates[0].SerialNumber.Cmp(firstSerial) == 0 {
		t.Errorf("after the server certificate rotated: %v, serial %v (was %v), want the new one", err, c.PeerCertificates[0].SerialNumber, firstSerial)
	}
	rotated := c.PeerCertificates[0].SerialNumber

	// A half-written file keeps the previous material.
	replace(t, srvCert, []byte("-----BEGIN CERT"), 2)
	if _, c, err = handshake(t, srv, cli); err != nil || c.PeerCertificates[0].SerialNumber.Cmp(rotated) != 0 {
		t.Errorf("after a broken rotation: %v, want the previous certificate still served", err)
	}

	// The client's certificate rotates: the server sees the new identity.
	l = ca1.Client(t, "front-b", "spiffe://t/front/b")
	replace(t, cliCert, l.CertPEM, 3)
	replace(t, cliKey, l.KeyPEM, 3)
	if s, _, err = handshake(t, srv, cli); err != nil || len(s.PeerCertificates) == 0 || s.PeerCertificates[0].URIs[0].String() != "spiffe://t/front/b" {
		t.Errorf("after the client certificate rotated: %v, server saw %v", err, s.PeerCertificates)
	}

	// The client CA rotates: a client of ca2 is refused, then accepted.
	cli2, err := Client(serverCA, filepath.Join(dir, "c2.crt"), filepath.Join(dir, "c2.key"), log)
	if err == nil {
		t.Fatal("Client with missing certificate files = nil error")
	}
	c2cert, c2key := ca2.Client(t, "front-c", "spiffe://t/front/c").Write(t, dir, "c2")
	if cli2, err = Client(serverCA, c2cert, c2key, log); err != nil {
		t.Fatal(err)
	}
	if s, _, err = handshake(t, srv, cli2); err == nil && len(s.PeerCertificates) > 0 {
		t.Errorf("a client of another CA was accepted before the CA rotated")
	}
	replace(t, caFile, ca2.PEM, 4)
	if s, _, err = handshake(t, srv, cli2); err != nil || len(s.PeerCertificates) == 0 {
		t.Errorf("a client of the new CA after rotation: %v, want accepted", err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.crt")
	os.WriteFile(bad, []byte("not pem"), 0o600)
	if _, err := Client(bad, "", "", nil); err == nil {
		t.Error("Client with a CA file holding no PEM = nil error")
	}
	if _, err := Server(bad, bad, "", nil); err == nil {
		t.Error("Server with a bad key pair = nil error")
	}
	if _, err := Client(filepath.Join(dir, "missing"), "", "", nil); err == nil {
		t.Error("Client with a missing CA file = nil error")
	}
}
