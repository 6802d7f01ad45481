package authz

import (
	"testing"

	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/internal/testing/testpki"
)

func TestParseOperatorIdentity(t *testing.T) {
	tests := []struct {
		in, name, identity string
		err                bool
	}{
		{in: operatorID, identity: operatorID},
		{in: "cn:alice", identity: "cn:alice"},
		{in: "alice=" + operatorID, name: "alice", identity: operatorID},
		{in: "ops.bob@example.org=cn:bob", name: "ops.bob@example.org", identity: "cn:bob"},
		{in: "cn:a=b", identity: "cn:a=b"},
		{in: "spiffe://latch.test/op=x1", identity: "spiffe://latch.test/op=x1"},
		{in: "=" + operatorID, err: true},
		{in: "-x=" + operatorID, err: true},
		{in: "a b=" + operatorID, err: true},
		{in: "alice=", err: true},
		{in: "alice=bob", err: true},
	}
	for _, tt := range tests {
		name, id, err := ParseOperatorIdentity(tt.in)
		if name != tt.name || id != tt.identity || (err != nil) != tt.err {
			t.Errorf("ParseOperatorIdentity(%q) = %q, %q, %v; want %q, %q, error %v", tt.in, name, id, err, tt.name, tt.identity, tt.err)
		}
	}
}

func FuzzOperatorName(f *testing.F) {
	for _, s := range []string{"alice", "ops.bob@x", "-x", "a b", "", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validOperatorName(s) != tokens.ValidActor(s) {
			t.Errorf("validOperatorName(%q) = %v, tokens.ValidActor says %v", s, validOperatorName(s), tokens.ValidActor(s))
		}
	})
}

// TestOperatorNameOfCertificate: the name an operator certificate may
// create console tokens for is the one --operator-identity binds it to,
// else NAME for cn:NAME; an unbound URI certificate, a front and a local
// caller have none.
func TestOperatorNameOfCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	const carol = "spiffe://latch.test/operator/carol"
	a, err := New(Config{FrontIdentities: []string{frontID}, OperatorIdentities: []string{"alice=" + operatorID, "cn:ops-bob", carol, "root=cn:ops-dave"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		leaf *testpki.Leaf
		want string
		ok   bool
	}{
		{"URI bound to a name", ca.Client(t, "x", operatorID), "alice", true},
		{"CN", ca.Client(t, "ops-bob"), "ops-bob", true},
		{"CN bound to another name", ca.Client(t, "ops-dave"), "root", true},
		{"unbound URI", ca.Client(t, "carol", carol), "", false},
		{"front", ca.Client(t, "mcp-1", frontID), "", false},
	}
	for _, tt := range tests {
		c := a.Identify(tlsPeer(t, tt.leaf))
		if got, ok := c.OperatorName(); got != tt.want || ok != tt.ok {
			t.Errorf("OperatorName of %s (%v) = %q, %v; want %q, %v", tt.name, c, got, ok, tt.want, tt.ok)
		}
	}
	if got, ok := a.Identify(unixPeer(0)).OperatorName(); ok {
		t.Errorf("OperatorName of root on the socket = %q, want none (a local operator names anyone)", got)
	}
	if _, err := New(Config{OperatorIdentities: []string{"alice=" + operatorID, "bob=" + operatorID}}); err == nil {
		t.Error("New with one identity bound to two names succeeded")
	}
}
