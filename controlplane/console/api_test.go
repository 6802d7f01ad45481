package console

import (
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// sessionOf is the console session of operator (the newest one), as the
// store keeps it.
func (st *stack) sessionOf(t testing.TB, operator string) *session {
	t.Helper()
	xs, err := st.srv.Store.ConsoleSessions()
	if err != nil {
		t.Fatal(err)
	}
	var out *session
	for _, x := range xs {
		if s := st.console.live(x.GetKeySha256()); s != nil && s.operator == operator && (out == nil || s.expires.After(out.expires)) {
			out = s
		}
	}
	if out == nil {
		t.Fatalf("no console session of %s", operator)
	}
	return out
}

// refusals are the access_denied journal records: actor and reason.
func (st *stack) refusals(t testing.TB) [][2]string {
	t.Helper()
	var out [][2]string
	for i := range st.srv.Store.JournalSize() {
		b, err := st.srv.Store.JournalEntry(i)
		if err != nil {
			t.Fatal(err)
		}
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		if lifecycle.EntryKindOf(e) == authz.JournalKind {
			out = append(out, [2]string{e.GetActor(), e.GetReason()})
		}
	}
	return out
}

// TestConsoleCallsGoThroughAuthorization: the console's connection to the
// API runs the authorization interceptor like every other caller's. A
// session's operator is an operator caller: the authorization table
// refuses it a local RPC (VaultUnlock), and the refusal is journaled as
// any caller's is (kind access_denied, the caller's identity as actor). A
// call on the connection that names no session, or a session whose token
// was revoked, is refused and journaled too, and changes nothing: there
// is no caller the console can make up.
func TestConsoleCallsGoThroughAuthorization(t *testing.T) {
	st := newStack(t, false)
	c := browserless(t)
	token, csrf := st.signIn(t, c, "ops-erin")
	s := st.sessionOf(t, "ops-erin")
	ctx := t.Context()
	admin := controlplanev1.NewAdminClient(st.console.conn)

	_, err := admin.VaultUnlock(asOperator(ctx, s), &controlplanev1.VaultUnlockRequest{})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "refused for operator console:ops-erin") {
		t.Errorf("VaultUnlock from the console session = %v, want PermissionDenied for operator console:ops-erin (a local RPC)", err)
	}
	_, err = admin.VaultStatus(asOperator(ctx, s), &controlplanev1.VaultStatusRequest{})
	if status.Code(err) == codes.PermissionDenied {
		t.Errorf("VaultStatus (an operator RPC) from the console session = %v, want it past authorization", err)
	}

	x := st.submit(t, "rotate", `{"service":"db"}`)
	_, err = st.console.api.Cancel(ctx, &controlplanev1.CancelRequest{ExecutionId: x.GetId(), Reason: "no session"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Cancel on the console connection without a session = %v, want PermissionDenied", err)
	}

	// The token is revoked while the session's page is open: its next call
	// is refused by the interceptor, before the console's own check.
	if _, err := st.srv.Tokens.RevokeOperator(ctx, "ops-erin", "test"); err != nil {
		t.Fatal(err)
	}
	_, err = st.console.api.Cancel(asOperator(ctx, s), &controlplanev1.CancelRequest{ExecutionId: x.GetId(), Reason: "revoked"})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "no live console session") {
		t.Errorf("Cancel of a session whose token was revoked = %v, want PermissionDenied (no live console session)", err)
	}
	if cur, _ := st.srv.Store.Execution(x.GetId()); cur.GetState() == recordv1.State_STATE_CANCELLED {
		t.Error("a refused console call cancelled the execution")
	}
	if got := post(t, c, st.web.URL+"/ui/executions/"+x.GetId()+"/cancel", url.Values{"csrf": {csrf}, "confirm": {"yes"}}, ""); got != 401 {
		t.Errorf("cancel in the browser after the token %s was revoked = %d, want 401", token[:12], got)
	}

	got := st.refusals(t)
	want := []struct{ actor, reason string }{
		{"console:ops-erin", "Admin/VaultUnlock refused for operator console:ops-erin: a local RPC"},
		{"none: a console call that names no console session", "ControlPlane/Cancel refused for unlisted caller none: a console call that names no console session: the console call carries no live console session"},
		{"none: a console call of a session that is not live", "ControlPlane/Cancel refused for unlisted caller none: a console call of a session that is not live"},
	}
	if len(got) != len(want) {
		t.Fatalf("access_denied records = %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i][0], w.actor) || !strings.HasPrefix(got[i][1], w.reason) {
			t.Errorf("access_denied record %d = %q, want actor %q… and reason %q…", i, got[i], w.actor, w.reason)
		}
	}
}
