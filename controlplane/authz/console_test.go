package authz

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestConsoleCallers: a call on the console's connection is an operator
// only when it names a session the console vouches for, and is then named
// after that session's operator, carrying its credential; any other is an
// unlisted caller, refused every RPC.
func TestConsoleCallers(t *testing.T) {
	cred := &recordv1.OperatorCredential{Operator: "erin", Kind: "operator_token", TokenId: "tok_1"}
	verify := func(_ context.Context, key string) (*recordv1.OperatorCredential, error) {
		switch key {
		case "live":
			return cred, nil
		case "bad-name":
			return &recordv1.OperatorCredential{Operator: "erin\u200b"}, nil
		}
		return nil, errors.New("ended")
	}
	tests := []struct {
		name     string
		verify   ConsoleSession
		keys     []string
		role     Role
		identity string
	}{
		{"live session", verify, []string{"live"}, RoleOperator, "console:erin"},
		{"ended session", verify, []string{"gone"}, RoleNone, "none: a console call of a session that is not live (ended)"},
		{"no session", verify, nil, RoleNone, "none: a console call that names no console session"},
		{"two sessions", verify, []string{"live", "live"}, RoleNone, "none: a console call that names no console session"},
		{"bad operator name", verify, []string{"bad-name"}, RoleNone, `none: a console session with a bad operator name "erin\u200b"`},
		{"no console attached", nil, []string{"live"}, RoleNone, "none: a console call, and no console is attached to this control plane"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(Config{ConsoleSession: tt.verify})
			if err != nil {
				t.Fatal(err)
			}
			ctx := peer.NewContext(t.Context(), &peer.Peer{AuthInfo: ConsoleInfo{}})
			md := metadata.MD{}
			for _, k := range tt.keys {
				md.Append(ConsoleSessionKey, k)
			}
			c := a.Identify(metadata.NewIncomingContext(ctx, md))
			if c.Role != tt.role || c.Identity != tt.identity || c.Transport != TransportConsole {
				t.Errorf("Identify(%s) = %+v, want role %v identity %q over %s", tt.name, c, tt.role, tt.identity, TransportConsole)
			}
			if want := tt.role == RoleOperator; (c.Credential == cred) != want || (c.Operator == "erin") != want {
				t.Errorf("Identify(%s) credential %v operator %q; want the session's only for a live one", tt.name, c.Credential, c.Operator)
			}
			if _, err := a.Authorize(metadata.NewIncomingContext(ctx, md), "/latch.controlplane.v1.ControlPlane/Approve"); (err == nil) != (tt.role == RoleOperator) {
				t.Errorf("Authorize(%s, Approve) = %v", tt.name, err)
			}
		})
	}
}

// TestConsoleSessionKeyIsIgnoredElsewhere: a caller on the socket or on
// TCP that sends a console session key is still identified by its
// transport: only the console's in-process connection reads the key.
func TestConsoleSessionKeyIsIgnoredElsewhere(t *testing.T) {
	a, err := New(Config{ConsoleSession: func(context.Context, string) (*recordv1.OperatorCredential, error) {
		return &recordv1.OperatorCredential{Operator: "erin"}, nil
	}, FrontUIDs: []uint32{4242}})
	if err != nil {
		t.Fatal(err)
	}
	md := metadata.Pairs(ConsoleSessionKey, "live")
	ctx := metadata.NewIncomingContext(peer.NewContext(t.Context(), &peer.Peer{AuthInfo: PeerInfo{UID: 4242}}), md)
	if c := a.Identify(ctx); c.Role != RoleFront || c.Identity != "uid:4242" || c.Credential != nil {
		t.Errorf("Identify(socket front with a console session key) = %+v, want the front uid:4242", c)
	}
}
