package authz

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/testing/testpki"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// TestCertIdentityCollisions: a URI SAN cannot pass for a subject CN
// (cn:ops-bob is an operator by CN), and a URI SAN that net/url would
// rewrite into a listed one (an upper-case scheme) is no identity: both
// certificates are refused every RPC; the canonical ones keep their roles.
func TestCertIdentityCollisions(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	a := newTestAuthorizer(t, nil, time.Now)
	upper := &url.URL{Scheme: "SPIFFE", Host: "latch.test", Path: "/operator/alice"}
	tests := []struct {
		name     string
		leaf     *testpki.Leaf
		wantRole Role
		wantErr  string // in the identity ("none: …") when refused
	}{
		{"URI SAN cn:ops-bob", ca.Client(t, "x", "cn:ops-bob"), RoleNone, "reserved"},
		{"URI SAN CN:ops-bob", ca.ClientURLs(t, "x", &url.URL{Scheme: "CN", Opaque: "ops-bob"}), RoleNone, "reserved"},
		{"URI SAN uid:0", ca.Client(t, "x", "uid:0"), RoleNone, "reserved"},
		{"upper-case scheme", ca.ClientURLs(t, "x", upper), RoleNone, "lower-case"},
		{"canonical operator SPIFFE ID", ca.Client(t, "x", operatorID), RoleOperator, ""},
		{"canonical front SPIFFE ID", ca.Client(t, "x", frontID), RoleFront, ""},
		{"subject CN", ca.Client(t, "ops-bob"), RoleOperator, ""},
		{"subject CN with a zero-width space", ca.Client(t, "ops-bob\u200b"), RoleNone, "U+200B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := a.Identify(tlsPeer(t, tt.leaf))
			if c.Role != tt.wantRole || (tt.wantErr != "" && (!strings.HasPrefix(c.Identity, "none: ") || !strings.Contains(c.Identity, tt.wantErr))) {
				t.Errorf("Identify(%s) = %v %q, want role %v (refusal naming %q)", tt.name, c.Role, c.Identity, tt.wantRole, tt.wantErr)
			}
		})
	}
}

func TestCanonicalURI(t *testing.T) {
	for _, tt := range []struct {
		in  string
		why string // "" when canonical
	}{
		{"spiffe://latch.test/operator/alice", ""},
		{"spiffe://latch.test", ""},
		{"https://id.example.com/ops/alice", ""},
		{"cn:bob", "reserved"},
		{"uid:0", "reserved"},
		{"tcp:127.0.0.1:1", "reserved"},
		{"none:x", "reserved"},
		{"SPIFFE://latch.test/operator/alice", "lower-case"},
		{"Spiffe://latch.test/operator/alice", "lower-case"},
		{"spiffe://LATCH.test/operator/alice", "lower-case"},
		{"spiffe://latch.test/operator/../operator/alice", "dot segment"},
		{"spiffe://latch.test/./operator/alice", "dot segment"},
		{"spiffe://latch.test/operator/%61lice", "percent"},
		{"spiffe://latch.test/operator//alice", "empty path segment"},
		{"spiffe://latch.test/operator/alice/", "empty path segment"},
		{"spiffe://bob@latch.test/operator/alice", "userinfo"},
		{"spiffe://latch.test/operator/alice?x=1", "query"},
		{"spiffe://latch.test/operator/alice?", "query"},
		{"spiffe://latch.test/operator/alice#x", "fragment"},
		{"spiffe://latch.test:443/operator/alice", "port"},
		{"urn:latch:alice", "with a host"},
		{"spiffe:///operator/alice", "no host"},
		{"/operator/alice", "no scheme"},
		{"spiffe://latch.test/operator/al ice", "canonical form"},
	} {
		err := CanonicalURI(tt.in)
		if tt.why == "" {
			if err != nil {
				t.Errorf("CanonicalURI(%q) = %v, want nil", tt.in, err)
			}
			continue
		}
		if !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("CanonicalURI(%q) = %v, want ErrIdentity saying %q", tt.in, err, tt.why)
		}
		if _, err := ParseIdentity(tt.in); err == nil && !strings.HasPrefix(tt.in, "cn:") {
			t.Errorf("ParseIdentity(%q) = nil error, want it refused", tt.in)
		}
	}
	if _, err := ParseIdentity("cn:ops-bob\u200b"); !errors.Is(err, ErrIdentity) {
		t.Errorf("ParseIdentity(cn:ops-bob\\u200b) = %v, want ErrIdentity", err)
	}
}

// TestOperatorNameRule: the operator name a caller gives a decision is an
// actor name: invisible characters or a non-NFC form are refused, for a
// certificate operator (before binding) and a socket caller alike.
func TestOperatorNameRule(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	a := newTestAuthorizer(t, nil, time.Now)
	const deny = "/latch.controlplane.v1.ControlPlane/Deny"
	for _, name := range []string{"dev\u200b", "dev\u00a0", "a\u202eb", "\u0085x", "e\u0301"} {
		for _, caller := range []struct {
			who string
			ctx context.Context
		}{{"operator certificate", tlsPeer(t, ca.Client(t, "alice", operatorID))}, {"local caller", unixPeer(0)}} {
			req := &controlplanev1.DenyRequest{ExecutionId: "act_x", Operator: name, Reason: "r"}
			called := false
			_, err := a.UnaryInterceptor()(caller.ctx, req, &grpc.UnaryServerInfo{FullMethod: deny}, func(_ context.Context, r any) (any, error) {
				called = true
				return nil, nil
			})
			if status.Code(err) != codes.InvalidArgument || called || !strings.Contains(err.Error(), "operator name") {
				t.Errorf("Deny by %s as operator %q = %v (handler called %v), want InvalidArgument", caller.who, name, err, called)
			}
		}
	}
}
