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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/admin"
	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/testpki"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
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

const (
	frontID    = "spiffe://latch.test/front/mcp-1"
	operatorID = "spiffe://latch.test/operator/alice"
)

func TestTCPAPIRefusedWithoutIdentification(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	srvCert := ca.Server(t).TLS
	tests := []struct {
		name   string
		cfg    Config
		reason string
	}{
		{"TLS without client CA", Config{TCPAddr: "127.0.0.1:0", TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}}}, "--tls-client-ca"},
		{"mTLS without identities", Config{TCPAddr: "127.0.0.1:0", TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool()}}, "--front-identity or --operator-identity"},
		{"front and operator at once", Config{TCPAddr: "127.0.0.1:0", TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool()},
			Access: authz.Config{FrontIdentities: []string{frontID}, OperatorIdentities: []string{frontID}}}, "both as a front and as an operator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.DataDir, tt.cfg.CatalogSource = t.TempDir(), catalog.Bytes("c.yaml", []byte(catalogYAML))
			srv, err := New(tt.cfg)
			if err == nil {
				srv.Store.Close()
				t.Fatalf("New(%s) = nil, want a refusal", tt.name)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("New(%s) = %v, want it to say %q", tt.name, err, tt.reason)
			}
		})
	}
}

// startMTLS runs a control plane with the Admin service on its socket and
// on a TCP listener with mutual TLS; ca signs fronts and operators.
func startMTLS(t *testing.T, ca *testpki.CA) *Server {
	t.Helper()
	data := t.TempDir()
	v, err := vault.New(vault.Config{Path: filepath.Join(data, "vault.json")})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{
		DataDir: data, CatalogSource: catalog.Bytes("c.yaml", []byte(catalogYAML)), TCPAddr: "127.0.0.1:0",
		// The front may act as alice without an agent's token (the
		// matrix's agent-facing calls name her).
		FrontActors: api.FrontActors{frontID: {"alice"}},
		Logger:      hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Debug}),
		TLS:         &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		Access:      authz.Config{FrontIdentities: []string{frontID}, OperatorIdentities: []string{operatorID}},
		Register: func(g grpc.ServiceRegistrar, s *Server) {
			adm, err := admin.New(admin.Config{Vault: v, Tokens: s.Tokens, Catalog: s.Catalog})
			if err != nil {
				t.Fatal(err)
			}
			adm.Register(g)
		},
	})
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
	return srv
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestAccessMatrixOverTLS is the matrix over real TLS: no client
// certificate, a certificate from another CA, a front certificate on an
// operator RPC, an operator certificate, plus what each may reach.
func TestAccessMatrixOverTLS(t *testing.T) {
	ca, other := testpki.NewCA(t, "latch CA"), testpki.NewCA(t, "another CA")
	srv := startMTLS(t, ca)
	front := ca.Client(t, "mcp-1", frontID).TLS
	operator := ca.Client(t, "alice", operatorID).TLS
	unlisted := ca.Client(t, "eve", "spiffe://latch.test/front/eve").TLS
	foreign := other.Client(t, "mcp-1", frontID).TLS

	type rpc string
	const (
		list   rpc = "ControlPlane/List"  // agent-facing
		deny   rpc = "ControlPlane/Deny"  // operator
		unlock rpc = "Admin/VaultUnlock"  // local
		vput   rpc = "Admin/VaultPut"     // operator
		watch  rpc = "ControlPlane/Watch" // agent-facing, a stream
	)
	call := func(conn *grpc.ClientConn, r rpc) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		switch r {
		case list:
			_, err = controlplanev1.NewControlPlaneClient(conn).List(ctx, &controlplanev1.ListRequest{Limit: 1, Actor: "alice"})
		case deny:
			_, err = controlplanev1.NewControlPlaneClient(conn).Deny(ctx, &controlplanev1.DenyRequest{ExecutionId: "act_01JZZZZZZZZZZZZZZZZZZZZZZZ", Operator: "alice", Reason: "test"})
		case unlock:
			_, err = controlplanev1.NewAdminClient(conn).VaultUnlock(ctx, &controlplanev1.VaultUnlockRequest{})
		case vput:
			_, err = controlplanev1.NewAdminClient(conn).VaultPut(ctx, &controlplanev1.VaultPutRequest{})
		case watch:
			var s grpc.ServerStreamingClient[controlplanev1.WatchResponse]
			if s, err = controlplanev1.NewControlPlaneClient(conn).Watch(ctx, &controlplanev1.WatchRequest{ExecutionId: "act_01JZZZZZZZZZZZZZZZZZZZZZZZ", Actor: "alice"}); err == nil {
				_, err = s.Recv()
			}
		}
		return err
	}
	// passed: authorization let the call through (the handler may still
	// refuse the empty request, with its own code).
	const passed = codes.OK
	tests := []struct {
		name  string
		certs []tls.Certificate
		rpc   rpc
		want  codes.Code
		// inMsg must appear in the error message.
		inMsg string
	}{
		// Refused in the handshake: what the client reads varies (an
		// alert, or a broken pipe); the server's log says why.
		{"no client certificate", nil, list, codes.Unavailable, ""},
		{"certificate from another CA", []tls.Certificate{foreign}, list, codes.Unavailable, ""},
		{"front on an agent-facing RPC", []tls.Certificate{front}, list, passed, ""},
		{"front on an operator RPC", []tls.Certificate{front}, deny, codes.PermissionDenied, "ControlPlane/Deny refused for front " + frontID},
		{"front on an Admin RPC", []tls.Certificate{front}, vput, codes.PermissionDenied, "Admin/VaultPut refused for front " + frontID},
		{"front on an agent-facing stream", []tls.Certificate{front}, watch, passed, ""},
		{"unlisted certificate on a stream", []tls.Certificate{unlisted}, watch, codes.PermissionDenied, "ControlPlane/Watch refused for unlisted caller spiffe://latch.test/front/eve"},
		{"operator on an agent-facing RPC", []tls.Certificate{operator}, list, passed, ""},
		{"operator on an operator RPC", []tls.Certificate{operator}, deny, passed, ""},
		{"operator on a local RPC", []tls.Certificate{operator}, unlock, codes.PermissionDenied, "Admin/VaultUnlock refused for operator " + operatorID},
		{"unlisted certificate of the CA", []tls.Certificate{unlisted}, list, codes.PermissionDenied, "spiffe://latch.test/front/eve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := grpc.NewClient(srv.TCPAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
				RootCAs: ca.Pool(), Certificates: tt.certs, MinVersion: tls.VersionTLS13,
			})))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			err = call(conn, tt.rpc)
			got := status.Code(err)
			if tt.want == passed {
				if got == codes.PermissionDenied || got == codes.Unavailable {
					t.Fatalf("%s: %s = %v, want it past authorization", tt.name, tt.rpc, err)
				}
				return
			}
			if got != tt.want || !strings.Contains(err.Error(), tt.inMsg) {
				t.Errorf("%s: %s = %v, want %v containing %q", tt.name, tt.rpc, err, tt.want, tt.inMsg)
			}
		})
	}
	t.Run("TLS 1.2 client", func(t *testing.T) {
		conn, err := grpc.NewClient(srv.TCPAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: ca.Pool(), Certificates: []tls.Certificate{operator}, MaxVersion: tls.VersionTLS12,
		})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := call(conn, list); status.Code(err) != codes.Unavailable {
			t.Errorf("List over TLS 1.2 = %v, want the handshake refused (TLS 1.3 minimum)", err)
		}
	})
	t.Run("plaintext client", func(t *testing.T) {
		conn, err := grpc.NewClient(srv.TCPAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := call(conn, list); status.Code(err) != codes.Unavailable {
			t.Errorf("plaintext List on the TLS listener = %v, want refused", err)
		}
	})
	t.Run("own uid on the socket", func(t *testing.T) {
		conn, err := grpc.NewClient("unix://"+srv.cfg.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, r := range []rpc{list, deny, unlock, vput} {
			if err := call(conn, r); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unavailable {
				t.Errorf("%s on the socket as the server's uid = %v, want it past authorization", r, err)
			}
		}
	})

	// Refusals of identified callers are journaled; refused handshakes,
	// which never reach an RPC, are not.
	got := accessDenied(t, srv)
	want := []denied{
		{frontID, "ControlPlane/Deny"},
		{frontID, "Admin/VaultPut"},
		{"spiffe://latch.test/front/eve", "ControlPlane/Watch"},
		{operatorID, "Admin/VaultUnlock"},
		{"spiffe://latch.test/front/eve", "ControlPlane/List"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("access_denied journal records (-want +got):\n%s", diff)
	}
}

type denied struct{ Actor, RPC string }

func accessDenied(t *testing.T, srv *Server) []denied {
	t.Helper()
	var out []denied
	err := srv.Store.ScanJournal(func(_ int64, data []byte) bool {
		var e recordv1.JournalEntry
		if err := proto.Unmarshal(data, &e); err != nil {
			t.Errorf("journal record: %v", err)
			return false
		}
		if lifecycle.EntryKindOf(&e) == authz.JournalKind {
			rpc, _, _ := strings.Cut(e.GetReason(), " ")
			out = append(out, denied{e.GetActor(), rpc})
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestListenRefusesALongSocketPath: a data dir whose socket path Linux
// cannot bind is refused with its length and what to do.
func TestListenRefusesALongSocketPath(t *testing.T) {
	s := &Server{cfg: Config{Socket: datadir.Socket(filepath.Join(t.TempDir(), strings.Repeat("d", 120)))}}
	if err := s.Listen(); err == nil || !strings.Contains(err.Error(), "at most 107") || !strings.Contains(err.Error(), "--data") {
		t.Fatalf("Listen = %v, want a refusal naming the limit and --data", err)
	}
}
