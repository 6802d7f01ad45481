package authz

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/testing/testpki"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

const (
	frontID    = "spiffe://latch.test/front/mcp-1"
	operatorID = "spiffe://latch.test/operator/alice"
)

// allowed is the rule the table encodes, written out: which role reaches
// which class.
var allowed = map[Class]map[Role]bool{
	ClassAgent:    {RoleNone: false, RoleFront: true, RoleOperator: true, RoleLocal: true},
	ClassOperator: {RoleNone: false, RoleFront: false, RoleOperator: true, RoleLocal: true},
	ClassLocal:    {RoleNone: false, RoleFront: false, RoleOperator: false, RoleLocal: true},
}

type fakeJournal struct {
	mu   sync.Mutex
	recs []Refusal
	err  error
}

func (j *fakeJournal) RecordRefusal(_ context.Context, r Refusal) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recs = append(j.recs, r)
	return j.err
}

func tlsPeer(t *testing.T, leaf *testpki.Leaf) context.Context {
	t.Helper()
	cert, err := x509.ParseCertificate(leaf.TLS.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return peer.NewContext(context.Background(), &peer.Peer{
		Addr:     &net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 50000},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}},
	})
}

func unixPeer(uid uint32) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Name: "@", Net: "unix"}, AuthInfo: PeerInfo{UID: uid}})
}

func tcpPeer(ip string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
}

type caller struct {
	name     string
	ctx      context.Context
	role     Role
	identity string
}

func callers(t *testing.T) []caller {
	ca := testpki.NewCA(t, "latch test CA")
	own := uint32(os.Getuid())
	return []caller{
		{"own uid on the socket", unixPeer(own), RoleLocal, "uid:" + itoa(own)},
		{"root on the socket", unixPeer(0), RoleLocal, "uid:0"},
		{"--operator-uid on the socket", unixPeer(4242), RoleLocal, "uid:4242"},
		{"--front-uid on the socket", unixPeer(4343), RoleFront, "uid:4343"},
		{"another uid on the socket", unixPeer(4444), RoleNone, "uid:4444"},
		{"front certificate", tlsPeer(t, ca.Client(t, "mcp-1", frontID)), RoleFront, frontID},
		{"operator certificate", tlsPeer(t, ca.Client(t, "alice", operatorID)), RoleOperator, operatorID},
		{"operator certificate by CN", tlsPeer(t, ca.Client(t, "ops-bob")), RoleOperator, "cn:ops-bob"},
		{"front URI in a CN only", tlsPeer(t, ca.Client(t, frontID)), RoleNone, "cn:" + frontID},
		{"unlisted certificate", tlsPeer(t, ca.Client(t, "x", "spiffe://latch.test/front/other")), RoleNone, "spiffe://latch.test/front/other"},
		{"certificate with two URI SANs", tlsPeer(t, ca.Client(t, "both", frontID, operatorID)), RoleNone, "none: authz: bad identity: the client certificate has 2 URI SANs; an identity needs exactly one"},
		{"TLS without a verified chain", peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{}}), RoleNone, "none: no verified client certificate"},
		{"plaintext loopback TCP", tcpPeer("127.0.0.1"), RoleFront, "tcp:127.0.0.1:40000"},
		{"plaintext non-loopback TCP", tcpPeer("10.1.2.3"), RoleNone, "tcp:10.1.2.3:40000"},
		{"no peer", context.Background(), RoleNone, "none: no peer"},
	}
}

func itoa(u uint32) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + u%10)}, b...)
		u /= 10
		if u == 0 {
			return string(b)
		}
	}
}

func newTestAuthorizer(t *testing.T, j Journal, now func() time.Time) *Authorizer {
	t.Helper()
	a, err := New(Config{
		OperatorUIDs: []uint32{4242}, FrontUIDs: []uint32{4343},
		FrontIdentities: []string{frontID}, OperatorIdentities: []string{operatorID, "cn:ops-bob"},
		PlaintextLoopbackFronts: true, Journal: j, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPolicyTableWalk calls every RPC of the table as every kind of caller
// and checks the decision against the rule of its class.
func TestPolicyTableWalk(t *testing.T) {
	p, err := DefaultPolicy()
	if err != nil {
		t.Fatalf("DefaultPolicy() = %v", err)
	}
	if len(p.Entries()) == 0 {
		t.Fatal("the policy table is empty")
	}
	j := &fakeJournal{}
	a := newTestAuthorizer(t, j, time.Now)
	for _, c := range callers(t) {
		if got := a.Identify(c.ctx); got.Role != c.role || got.Identity != c.identity {
			t.Errorf("Identify(%s) = %v %q, want %v %q", c.name, got.Role, got.Identity, c.role, c.identity)
		}
		for _, e := range p.Entries() {
			ctx, err := a.Authorize(c.ctx, e.FullMethod)
			want := allowed[e.Class][c.role]
			if (err == nil) != want {
				t.Errorf("Authorize(%s, %s [%s]) = %v, want allowed=%v", c.name, e.FullMethod, e.Class, err, want)
				continue
			}
			if err != nil {
				checkRefusal(t, err, e.FullMethod, c.identity)
				continue
			}
			if got, ok := CallerFrom(ctx); !ok || got.Identity != c.identity {
				t.Errorf("CallerFrom(Authorize(%s, %s)) = %v, %v, want identity %q", c.name, e.FullMethod, got, ok, c.identity)
			}
		}
		// An RPC the table does not know is refused to everyone.
		if _, err := a.Authorize(c.ctx, "/latch.controlplane.v1.Admin/NotInTheTable"); err == nil {
			t.Errorf("Authorize(%s, an RPC without entry) = nil, want a refusal", c.name)
		} else {
			checkRefusal(t, err, "/latch.controlplane.v1.Admin/NotInTheTable", c.identity)
		}
	}
	if len(j.recs) == 0 {
		t.Error("no refusal was journaled")
	}
}

func checkRefusal(t *testing.T, err error, method, identity string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.PermissionDenied {
		t.Errorf("refusal of %s = %v, want PermissionDenied", method, st.Code())
	}
	if !strings.Contains(st.Message(), ShortMethod(method)) || !strings.Contains(st.Message(), identity) {
		t.Errorf("refusal message %q names neither the RPC %s nor the caller %q", st.Message(), ShortMethod(method), identity)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info == nil || info.GetReason() != "ACCESS_DENIED" || info.GetDomain() != "latch.dev" || info.GetMetadata()["identity"] != identity {
		t.Errorf("refusal of %s details = %v, want ErrorInfo ACCESS_DENIED (latch.dev) with identity %q", method, st.Details(), identity)
	}
}

func TestPolicyClassesPerService(t *testing.T) {
	p, err := DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	// The cases the issue names, spelled out so a change of class in the
	// table is a deliberate one.
	want := map[string]Class{
		"ControlPlane/Submit": ClassAgent, "ControlPlane/Get": ClassAgent, "ControlPlane/List": ClassAgent,
		"ControlPlane/Watch": ClassAgent, "ControlPlane/MarkDelivered": ClassAgent, "ControlPlane/Cancel": ClassAgent,
		"ControlPlane/AuthenticateAgent": ClassAgent, "ControlPlane/ListTools": ClassAgent,
		"ControlPlane/Approve": ClassOperator, "ControlPlane/Deny": ClassOperator, "ControlPlane/Resolve": ClassOperator,
		"ControlPlane/AuthorizeSession": ClassOperator, "ControlPlane/RevokeSession": ClassOperator,
		"Admin/VaultPut": ClassOperator, "Admin/CreateToken": ClassOperator, "Admin/RevokeToken": ClassOperator,
		"Admin/ReloadCatalog": ClassOperator, "Admin/VaultUnlock": ClassLocal,
	}
	got := map[string]Class{}
	for _, e := range p.Entries() {
		if _, ok := want[ShortMethod(e.FullMethod)]; ok {
			got[ShortMethod(e.FullMethod)] = e.Class
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	tests := []struct{ name, in string }{
		{"unknown class", `{"rpcs":[{"full_method":"/a.B/C","class":"admin"}]}`},
		{"bad method", `{"rpcs":[{"full_method":"a.B/C","class":"local"}]}`},
		{"twice", `{"rpcs":[{"full_method":"/a.B/C","class":"local"},{"full_method":"/a.B/C","class":"operator"}]}`},
		{"unknown field", `{"rpcs":[{"full_method":"/a.B/C","class":"local","allow":true}]}`},
		{"not json", `rpcs:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParsePolicy([]byte(tt.in)); !errors.Is(err, ErrPolicy) {
				t.Errorf("ParsePolicy(%q) = %v, want ErrPolicy", tt.in, err)
			}
		})
	}
}

func TestNewRefusesContradictions(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"front and operator", Config{FrontIdentities: []string{frontID}, OperatorIdentities: []string{frontID}}, ErrConfig},
		{"front uid is root", Config{FrontUIDs: []uint32{0}}, ErrConfig},
		{"bad identity", Config{FrontIdentities: []string{"mcp-1"}}, ErrIdentity},
		{"empty cn", Config{OperatorIdentities: []string{"cn:"}}, ErrIdentity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, tt.want) {
				t.Errorf("New(%+v) = %v, want %v", tt.cfg, err, tt.want)
			}
		})
	}
}

// TestRefusalsDeduplicated: a front retrying a refused RPC in a loop
// writes one record per window, and the next record carries the count.
func TestRefusalsDeduplicated(t *testing.T) {
	j := &fakeJournal{}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a := newTestAuthorizer(t, j, func() time.Time { return now })
	ctx := unixPeer(4343) // a front uid
	const approve = "/latch.controlplane.v1.ControlPlane/Approve"
	for range 50 {
		if _, err := a.Authorize(ctx, approve); err == nil {
			t.Fatal("a front reached Approve")
		}
	}
	if len(j.recs) != 1 {
		t.Fatalf("50 identical refusals in a window journaled %d records, want 1", len(j.recs))
	}
	// Another RPC or another caller is journaled at once.
	a.Authorize(ctx, "/latch.controlplane.v1.Admin/VaultPut")
	a.Authorize(unixPeer(4444), approve)
	if len(j.recs) != 3 {
		t.Fatalf("distinct refusals journaled %d records, want 3", len(j.recs))
	}
	now = now.Add(2 * time.Minute)
	a.Authorize(ctx, approve)
	last := j.recs[len(j.recs)-1]
	if last.Suppressed != 49 || !strings.Contains(last.JournalReason(), "49 identical refusals") {
		t.Errorf("record after the window = %d suppressed, reason %q; want 49", last.Suppressed, last.JournalReason())
	}
	// Flush writes counts still pending.
	a.Authorize(ctx, approve)
	a.Authorize(ctx, approve)
	n := len(j.recs)
	a.Flush(context.Background())
	if len(j.recs) != n+1 || j.recs[n].Suppressed != 1 {
		t.Errorf("Flush wrote %d records (suppressed %v), want 1 standing for 2 refusals", len(j.recs)-n, j.recs[n:])
	}
	a.Flush(context.Background())
	if len(j.recs) != n+1 {
		t.Errorf("a second Flush wrote %d more records, want none", len(j.recs)-n-1)
	}
}

func TestCertIdentity(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	tests := []struct {
		name string
		leaf *testpki.Leaf
		want string
		err  bool
	}{
		{"one URI", ca.Client(t, "x", frontID), frontID, false},
		{"CN only", ca.Client(t, "ops-bob"), "cn:ops-bob", false},
		{"two URIs", ca.Client(t, "x", frontID, operatorID), "", true},
		{"nothing", ca.Client(t, ""), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, _ := x509.ParseCertificate(tt.leaf.TLS.Certificate[0])
			got, err := CertIdentity(cert)
			if got != tt.want || (err != nil) != tt.err {
				t.Errorf("CertIdentity(%s) = %q, %v; want %q, error %v", tt.name, got, err, tt.want, tt.err)
			}
		})
	}
}

func FuzzParseIdentity(f *testing.F) {
	for _, s := range []string{frontID, "cn:alice", "cn:", "mcp", "spiffe://", "http://[::1", "urn:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseIdentity(s)
		if err != nil {
			return
		}
		if id != s {
			t.Errorf("ParseIdentity(%q) = %q, want the input back", s, id)
		}
		if !strings.HasPrefix(s, "cn:") && !strings.Contains(s, ":") {
			t.Errorf("ParseIdentity(%q) accepted neither cn: nor a URI", s)
		}
	})
}

func TestHasSocketGuests(t *testing.T) {
	own := uint32(os.Getuid())
	tests := []struct {
		name string
		cfg  Config
		want bool
	}{
		{"none", Config{}, false},
		{"own uid and root listed", Config{OperatorUIDs: []uint32{own, 0}}, false},
		{"an operator uid", Config{OperatorUIDs: []uint32{own + 12345}}, true},
		{"a front uid", Config{FrontUIDs: []uint32{own + 12346}}, true},
	}
	for _, tt := range tests {
		a, err := New(tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.HasSocketGuests(); got != tt.want {
			t.Errorf("HasSocketGuests(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestOperatorNameBoundToCertificate: the name a decision is journaled
// under carries the certificate's identity for a remote operator; socket
// callers keep the name they give.
func TestOperatorNameBoundToCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	a := newTestAuthorizer(t, nil, time.Now)
	const deny = "/latch.controlplane.v1.ControlPlane/Deny"
	tests := []struct {
		name  string
		ctx   context.Context
		given string
		want  string
	}{
		{"operator certificate, no name", tlsPeer(t, ca.Client(t, "alice", operatorID)), "", operatorID},
		{"operator certificate, another name", tlsPeer(t, ca.Client(t, "alice", operatorID)), "bob", "bob (" + operatorID + ")"},
		{"operator certificate, its own identity", tlsPeer(t, ca.Client(t, "alice", operatorID)), operatorID, operatorID},
		{"local caller", unixPeer(0), "bob", "bob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &controlplanev1.DenyRequest{ExecutionId: "act_x", Operator: tt.given, Reason: "r"}
			var got string
			_, err := a.UnaryInterceptor()(tt.ctx, req, &grpc.UnaryServerInfo{FullMethod: deny}, func(_ context.Context, r any) (any, error) {
				got = r.(*controlplanev1.DenyRequest).GetOperator()
				return nil, nil
			})
			if err != nil || got != tt.want {
				t.Errorf("operator of Deny by %s giving %q = %q, %v; want %q", tt.name, tt.given, got, err, tt.want)
			}
		})
	}
}

// TestRefusalJournalBudget: many distinct refused callers within a window
// write at most maxPerWindow records, then one summary with the count;
// a plaintext peer reconnecting from new ports is one caller.
func TestRefusalJournalBudget(t *testing.T) {
	j := &fakeJournal{}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a := newTestAuthorizer(t, j, func() time.Time { return now })
	const approve = "/latch.controlplane.v1.ControlPlane/Approve"
	for i := range maxPerWindow + 50 {
		a.Authorize(unixPeer(uint32(50000+i)), approve)
	}
	if len(j.recs) != maxPerWindow {
		t.Fatalf("%d distinct refusals in a window journaled %d records, want the budget %d", maxPerWindow+50, len(j.recs), maxPerWindow)
	}
	now = now.Add(2 * time.Minute)
	a.Authorize(unixPeer(60000), approve)
	if len(j.recs) != maxPerWindow+2 {
		t.Fatalf("after the window: %d records, want the summary and the new refusal", len(j.recs))
	}
	if sum := j.recs[maxPerWindow]; sum.Overflow != 50 || !strings.Contains(sum.JournalReason(), "50 refusals") {
		t.Errorf("summary record = overflow %d, reason %q; want 50", sum.Overflow, sum.JournalReason())
	}

	j2 := &fakeJournal{}
	b := newTestAuthorizer(t, j2, func() time.Time { return now })
	for port := range 20 {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 40000 + port}})
		b.Authorize(ctx, approve)
	}
	if len(j2.recs) != 1 {
		t.Errorf("one plaintext peer from 20 ports journaled %d records, want 1", len(j2.recs))
	}
}

// BenchmarkAuthorize is the cost the interceptor adds to an allowed call.
func BenchmarkAuthorize(b *testing.B) {
	ca := testpki.NewCA(b, "ca")
	leaf := ca.Client(b, "mcp-1", frontID)
	cert, _ := x509.ParseCertificate(leaf.TLS.Certificate[0])
	ctx := peer.NewContext(context.Background(), &peer.Peer{
		Addr:     &net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 50000},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}},
	})
	a, err := New(Config{FrontIdentities: []string{frontID}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := a.Authorize(ctx, "/latch.controlplane.v1.ControlPlane/Submit"); err != nil {
			b.Fatal(err)
		}
	}
}
