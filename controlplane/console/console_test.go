package console

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/latchhq/latch/controlplane/admin"
	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/testlog"
	"github.com/latchhq/latch/internal/testing/webhooktest"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const unitCatalog = `
targets:
  api: {channel: http, base_url: "http://127.0.0.1:9", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  rotate:
    description: Rotate.
    input_schema: {type: object, required: [service], properties: {service: {type: string}}}
    target: api
    request: {method: POST, path: /rotate, body: {service: "{{service}}"}}
    replay: review
    approval: every_call
  note:
    description: Note.
    input_schema: {type: object, required: [text], properties: {text: {type: string}}}
    target: api
    request: {method: POST, path: /notes, body: {text: "{{text}}"}}
    replay: idempotency_key
`

// stack is a real control plane in this process (Badger in a temp dir, no
// channels: nothing is dispatched) with its console on a test server.
type stack struct {
	srv     *server.Server
	console *Console
	web     *httptest.Server
	now     time.Time
}

func newStack(t testing.TB, secure bool) *stack {
	t.Helper()
	return newStackWith(t, secure, unitCatalog, refusingChannel{})
}

// newStackWith is newStack with another catalog and HTTP channel.
func newStackWith(t testing.TB, secure bool, catalogText string, ch engine.Channel) *stack {
	t.Helper()
	src := catalog.Fixed("unit", []byte(catalogText), func() (*tools.Catalog, error) { return tools.Parse("unit", []byte(catalogText)) })
	log := testlog.New(t, hclog.Warn)
	srv, err := server.New(server.Config{Logger: log, DataDir: t.TempDir(), CatalogSource: src, Sessions: engine.SessionConfig{Required: true},
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: ch},
		// An Admin service that does nothing, for the authorization table's
		// local RPC (VaultUnlock) to be refused to the console.
		Register: func(g grpc.ServiceRegistrar, _ *server.Server) {
			controlplanev1.RegisterAdminServer(g, controlplanev1.UnimplementedAdminServer{})
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	st := &stack{srv: srv, now: time.Now()}
	st.console, err = New(Config{Logger: log, Store: srv.Store, Reads: srv.Engine, Connect: srv.ConsoleConn, Operators: srv.Tokens,
		Catalog: func() *tools.Catalog { return srv.Catalog.Current().Catalog }, VerifierKey: srv.VerifierKey(),
		VerifyCommand: "latch audit verify DIR", Secure: secure})
	if err != nil {
		t.Fatal(err)
	}
	st.web = httptest.NewServer(st.console.Handler())
	t.Cleanup(st.web.Close)
	return st
}

// refusingChannel sends nothing: every dispatch is refused before a byte
// leaves (these tests decide before dispatch).
type refusingChannel struct{}

func (refusingChannel) Dispatch(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.NotSent, Final: true, Reason: "the unit test's channel sends nothing"}
}
func (refusingChannel) Query(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.NotSent, Reason: "the unit test's channel sends nothing"}
}
func (refusingChannel) Identity(_ *tools.Tool, tg *tools.Target) engine.Identity {
	return engine.Identity{Target: tg.Name, Method: "POST"}
}

// submit makes an execution as an operator caller would (the CLI on the
// socket), for actor alice.
func (st *stack) submit(t testing.TB, tool, args string) *recordv1.Execution {
	t.Helper()
	return st.submitAs(t, "alice", tool, args)
}

func (st *stack) submitAs(t testing.TB, actor, tool, args string) *recordv1.Execution {
	t.Helper()
	ctx := authz.WithCaller(t.Context(), authz.Caller{Role: authz.RoleLocal, Identity: "uid:0"})
	r, err := st.srv.API().Submit(ctx, &controlplanev1.SubmitRequest{Actor: actor, Tool: tool, Arguments: []byte(args)})
	if err != nil {
		t.Fatalf("Submit %s: %v", tool, err)
	}
	return r.GetExecution()
}

// browserless is an HTTP client with a cookie jar and no redirects.
func browserless(t testing.TB) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signIn signs a client in with a new operator token and returns the
// session's CSRF token.
func (st *stack) signIn(t testing.TB, c *http.Client, name string) (token, csrf string) {
	t.Helper()
	token, _, err := st.srv.Tokens.CreateOperator(t.Context(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.PostForm(st.web.URL+"/ui/signin", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in with an operator token = %d, want 303", resp.StatusCode)
	}
	return token, st.csrfOf(t, c)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (st *stack) csrfOf(t testing.TB, c *http.Client) string {
	t.Helper()
	_, body := get(t, c, st.web.URL+"/ui/")
	m := csrfInput.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the list page:\n%s", body)
	}
	return m[1]
}

func get(t testing.TB, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func post(t testing.TB, c *http.Client, u string, form url.Values, origin string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestEveryActionNeedsSessionCSRFAndOrigin walks every POST route of the
// console: without the session cookie it is 401, with the cookie but a
// missing or forged CSRF token, or from another site's origin, 403; none of
// them changes anything.
func TestEveryActionNeedsSessionCSRFAndOrigin(t *testing.T) {
	st := newStack(t, false)
	x := st.submit(t, "rotate", `{"service":"db"}`)
	if x.GetState() != recordv1.State_STATE_AWAITING_APPROVAL && x.GetState() != recordv1.State_STATE_ACCEPTED {
		t.Fatalf("submitted rotate is %v, want waiting", x.GetState())
	}
	sessions, _ := st.srv.Store.Sessions(10)
	if len(sessions) == 0 {
		t.Fatal("no agent session was recorded")
	}
	ses := sessions[0].GetId()
	signedIn := browserless(t)
	_, csrf := st.signIn(t, signedIn, "ops-bob")
	size := st.srv.Store.JournalSize()
	routes := []string{
		"/ui/signout",
		"/ui/executions/" + x.GetId() + "/approve", "/ui/executions/" + x.GetId() + "/deny",
		"/ui/executions/" + x.GetId() + "/resolve", "/ui/executions/" + x.GetId() + "/cancel",
		"/ui/sessions/" + ses + "/authorize", "/ui/sessions/" + ses + "/revoke",
		"/ui/notifications/replay",
	}
	full := url.Values{"confirm": {"yes"}, "reason": {"r"}, "as": {"not_executed"}}
	with := func(csrf string) url.Values {
		v := url.Values{"csrf": {csrf}}
		for k, vs := range full {
			v[k] = vs
		}
		return v
	}
	tests := []struct {
		name   string
		client *http.Client
		form   url.Values
		origin string
		want   int
	}{
		{"no cookie", browserless(t), with(csrf), "", http.StatusUnauthorized},
		{"no csrf token", signedIn, full, "", http.StatusForbidden},
		{"forged csrf token", signedIn, with("forged"), "", http.StatusForbidden},
		{"another site", signedIn, with(csrf), "https://evil.example", http.StatusForbidden},
	}
	for _, tt := range tests {
		for _, r := range routes {
			if got := post(t, tt.client, st.web.URL+r, tt.form, tt.origin); got != tt.want {
				t.Errorf("%s: POST %s = %d, want %d", tt.name, r, got, tt.want)
			}
		}
	}
	if got := st.srv.Store.JournalSize(); got != size {
		t.Errorf("refused requests appended %d journal records, want none", got-size)
	}
	if cur, _ := st.srv.Store.Execution(x.GetId()); cur.GetState() != x.GetState() {
		t.Errorf("after refused requests %s is %v, want %v", x.GetId(), cur.GetState(), x.GetState())
	}
	// The signed-in client still works: the refusals ended nothing.
	if resp, _ := get(t, signedIn, st.web.URL+"/ui/"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /ui/ after the refusals = %d, want 200", resp.StatusCode)
	}
}

var inlineScript = regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`)

// TestPagesAreLockedDown: every page is sent with the CSP and the other
// security headers, carries no inline script, and a page read without a
// session goes to the sign-in page.
func TestPagesAreLockedDown(t *testing.T) {
	st := newStack(t, false)
	x := st.submit(t, "note", `{"text":"<script>alert(1)</script>"}`)
	c := browserless(t)
	anon := browserless(t)
	st.signIn(t, c, "ops-bob")
	for _, p := range []string{"/ui/", "/ui/?state=accepted&q=act_", "/ui/executions/" + x.GetId(), "/ui/sessions", "/ui/audit", "/ui/notifications", "/ui/observe", "/ui/signin", "/ui/nope"} {
		resp, body := get(t, c, st.web.URL+p)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: Content-Security-Policy %q, want script-src 'self', frame-ancestors 'none', nothing unsafe", p, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: headers %v, want nosniff and no-store", p, resp.Header)
		}
		if m := inlineScript.FindString(body); m != "" {
			t.Errorf("GET %s has an inline script %q", p, m)
		}
		if strings.Contains(body, "<script>alert(1)") {
			t.Errorf("GET %s carries the argument's <script> unescaped", p)
		}
		if p == "/ui/signin" || p == "/ui/nope" {
			continue
		}
		if resp, _ := get(t, anon, st.web.URL+p); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/signin") {
			t.Errorf("GET %s without a session = %d %s, want 303 to the sign-in page", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := get(t, anon, st.web.URL+"/ui/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /ui/events without a session = %d, want 401", resp.StatusCode)
	}
}

// TestSignIn: an agent token does not sign in, an operator token does
// (journaled with its id, never the token), the cookie is HttpOnly,
// SameSite=Strict and Secure when served over TLS, revoking the token ends
// the session, and a one-time link works once.
func TestSignIn(t *testing.T) {
	for _, secure := range []bool{false, true} {
		st := newStack(t, secure)
		agentTok, _, err := st.srv.Tokens.Create(t.Context(), "alice", 0)
		if err != nil {
			t.Fatal(err)
		}
		c := browserless(t)
		if got := post(t, c, st.web.URL+"/ui/signin", url.Values{"token": {agentTok}}, ""); got != http.StatusUnauthorized {
			t.Errorf("sign in with an agent token = %d, want 401", got)
		}
		opTok, op, err := st.srv.Tokens.CreateOperator(t.Context(), "ops-carol", 0)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.PostForm(st.web.URL+"/ui/signin", url.Values{"token": {opTok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ck := resp.Header.Get("Set-Cookie")
		if resp.StatusCode != http.StatusSeeOther || !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") ||
			!strings.Contains(ck, "Path=/ui/") || strings.Contains(ck, "Secure") != secure {
			t.Errorf("sign in (secure %v) = %d, Set-Cookie %q; want 303 and an HttpOnly SameSite=Strict cookie on /ui/, Secure only over TLS", secure, resp.StatusCode, ck)
		}
		if r, body := get(t, c, st.web.URL+"/ui/"); r.StatusCode != http.StatusOK || !strings.Contains(body, "ops-carol") {
			t.Errorf("the list after sign-in = %d, want 200 naming ops-carol", r.StatusCode)
		}
		var found bool
		for i := range st.srv.Store.JournalSize() {
			b, _ := st.srv.Store.JournalEntry(i)
			if strings.Contains(string(b), opTok) {
				t.Fatalf("journal record %d holds the operator token", i)
			}
			if e, err := journal.DecodeEntry(b); err == nil && lifecycle.EntryKindOf(e) == KindSignedIn && strings.Contains(string(b), "ops-carol") && strings.Contains(string(b), op.GetId()) {
				found = true
			}
		}
		if !found {
			t.Error("no operator_signed_in record for ops-carol with the token id")
		}
		if _, err := st.srv.Tokens.RevokeOperator(t.Context(), "ops-carol", "test"); err != nil {
			t.Fatal(err)
		}
		if r, _ := get(t, c, st.web.URL+"/ui/"); r.StatusCode != http.StatusSeeOther {
			t.Errorf("the list after the token was revoked = %d, want 303 to sign in again", r.StatusCode)
		}

		link, err := st.console.SignInLink("ops-dave", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		code := strings.TrimPrefix(link, "/ui/signin?code=")
		if r, body := get(t, browserless(t), st.web.URL+link); r.StatusCode != http.StatusOK || !strings.Contains(body, "ops-dave") {
			t.Errorf("GET the one-time link = %d, want 200 naming ops-dave", r.StatusCode)
		}
		// As docs/how-to/console.md says: opening the link signs nobody
		// in (a link preview or prefetch does not use it up); its one
		// button does.
		if r, body := get(t, browserless(t), st.web.URL+link); r.StatusCode != http.StatusOK || !strings.Contains(body, `id="signin"`) || r.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET the one-time link again = %d (Set-Cookie %q), want 200 with its Sign in button and no session", r.StatusCode, r.Header.Get("Set-Cookie"))
		}
		if got := post(t, browserless(t), st.web.URL+"/ui/signin", url.Values{"code": {code}}, ""); got != http.StatusSeeOther {
			t.Errorf("first use of the one-time link = %d, want 303", got)
		}
		if got := post(t, browserless(t), st.web.URL+"/ui/signin", url.Values{"code": {code}}, ""); got != http.StatusUnauthorized {
			t.Errorf("second use of the one-time link = %d, want 401", got)
		}
	}
}

// TestDecisionsGoThroughTheAPI: cancel, session authorize and revoke made
// in the console are journaled as the CLI's are, under the signed-in
// operator's name (never a name from the form), after a confirmation page.
func TestDecisionsGoThroughTheAPI(t *testing.T) {
	st := newStack(t, false)
	c := browserless(t)
	_, csrf := st.signIn(t, c, "ops-erin")
	x := st.submit(t, "rotate", `{"service":"db"}`)
	cancel := st.web.URL + "/ui/executions/" + x.GetId() + "/cancel"
	if got := post(t, c, cancel, url.Values{"csrf": {csrf}, "reason": {"wrong service"}, "operator": {"mallory"}}, ""); got != http.StatusOK {
		t.Fatalf("cancel without confirm = %d, want 200 (the confirmation page)", got)
	}
	if cur, _ := st.srv.Store.Execution(x.GetId()); cur.GetState() == recordv1.State_STATE_CANCELLED {
		t.Fatal("cancel went through without its confirmation")
	}
	if got := post(t, c, cancel, url.Values{"csrf": {csrf}, "reason": {"wrong service"}, "operator": {"mallory"}, "confirm": {"yes"}}, ""); got != http.StatusSeeOther {
		t.Fatalf("confirmed cancel = %d, want 303", got)
	}
	hist, _ := st.srv.Store.History(x.GetId())
	last := hist[len(hist)-1]
	// The operator travels in CancelRequest.operator, bound to the session
	// as every decision's is, and is journaled in the decisions' form.
	if last.GetTo() != recordv1.State_STATE_CANCELLED || last.GetReason() != "cancelled by ops-erin: wrong service" {
		t.Errorf("last record %v %q, want cancelled by ops-erin", last.GetTo(), last.GetReason())
	}
	if last.GetCredential().GetOperator() != "ops-erin" {
		t.Errorf("last record's credential = %v, want the session's (ops-erin)", last.GetCredential())
	}
	if got := post(t, c, cancel, url.Values{"csrf": {csrf}, "confirm": {"yes"}}, ""); got != http.StatusSeeOther && got != http.StatusConflict {
		t.Errorf("cancelling again = %d, want it answered (already cancelled) or 409", got)
	}

	z := st.submit(t, "note", `{"text":"waits for its session"}`)
	if _, body := get(t, c, st.web.URL+"/ui/executions/"+z.GetId()); !strings.Contains(body, `id="waits-for-session"`) || !strings.Contains(body, "Authorize its agent session") {
		t.Errorf("the page of %s (%s) does not say it waits for its session or offer to authorize it", z.GetId(), z.GetReason())
	}
	sessions, _ := st.srv.Store.Sessions(10)
	ses := sessions[0].GetId()
	if sessions[0].GetState() != recordv1.SessionState_SESSION_STATE_PENDING {
		t.Fatalf("session %s is %v, want pending", ses, sessions[0].GetState())
	}
	if got := post(t, c, st.web.URL+"/ui/sessions/"+ses+"/authorize", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "operator": {"mallory"}}, ""); got != http.StatusSeeOther {
		t.Fatalf("authorize session = %d, want 303", got)
	}
	s, _ := st.srv.Store.Session(ses)
	if s.GetState() != recordv1.SessionState_SESSION_STATE_AUTHORIZED || s.GetAuthorizedBy() != "ops-erin" {
		t.Errorf("session after authorize: %v by %q, want authorized by ops-erin", s.GetState(), s.GetAuthorizedBy())
	}
	revoke := st.web.URL + "/ui/sessions/" + ses + "/revoke"
	if got := post(t, c, revoke, url.Values{"csrf": {csrf}, "confirm": {"yes"}}, ""); got != http.StatusBadRequest {
		t.Errorf("revoke without a reason = %d, want 400", got)
	}
	if got := post(t, c, revoke, url.Values{"csrf": {csrf}, "confirm": {"yes"}, "reason": {"agent misbehaved"}}, ""); got != http.StatusSeeOther {
		t.Fatalf("revoke session = %d, want 303", got)
	}
	if s, _ := st.srv.Store.Session(ses); s.GetState() != recordv1.SessionState_SESSION_STATE_REVOKED {
		t.Errorf("session after revoke: %v, want revoked", s.GetState())
	}
	y := st.submit(t, "note", `{"text":"hi"}`)
	if got := post(t, c, st.web.URL+"/ui/executions/"+y.GetId()+"/resolve", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "as": {"completed"}, "outcome": {"succeeded"}, "reason": {"x"}}, ""); got != http.StatusConflict {
		t.Errorf("resolving an execution that is not uncertain = %d, want 409 (the control plane refuses)", got)
	}
	if got := post(t, c, st.web.URL+"/ui/executions/"+y.GetId()+"/resolve", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "as": {"completed"}, "outcome": {"succeeded"}}, ""); got != http.StatusBadRequest {
		t.Errorf("resolving without a reason = %d, want 400", got)
	}
}

var rowID = regexp.MustCompile(`<tr data-id="(act_[0-9A-Z]+)">`)

// TestListFilters: the list filters by state, tool, actor, acceptance time
// and any part of the execution ID, and counts executions by state.
func TestListFilters(t *testing.T) {
	st := newStack(t, false)
	c := browserless(t)
	st.signIn(t, c, "ops-bob")
	a := st.submitAs(t, "alice", "note", `{"text":"a"}`)
	b := st.submitAs(t, "bob", "note", `{"text":"b"}`)
	r := st.submitAs(t, "alice", "rotate", `{"service":"db"}`)
	octx := authz.WithCaller(t.Context(), authz.Caller{Role: authz.RoleLocal, Identity: "uid:0"})
	if _, err := st.srv.API().Cancel(octx, &controlplanev1.CancelRequest{ExecutionId: b.GetId(), Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	future := time.Now().UTC().Add(time.Hour).Format(timeForm)
	past := time.Now().UTC().Add(-time.Hour).Format(timeForm)
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{r.GetId(), b.GetId(), a.GetId()}},
		{"tool=note", []string{b.GetId(), a.GetId()}},
		{"actor=bob", []string{b.GetId()}},
		{"actor=alice&tool=rotate", []string{r.GetId()}},
		{"q=" + strings.ToLower(a.GetId()[len(a.GetId())-8:]), []string{a.GetId()}},
		{"q=" + b.GetId(), []string{b.GetId()}},
		{"since=" + future, nil},
		{"until=" + past, nil},
		{"since=" + past + "&until=" + future + "&tool=rotate", []string{r.GetId()}},
		{"state=cancelled", []string{b.GetId()}},
		{"state=cancelled&actor=alice", nil},
		{"state=delivered", nil},
	}
	for _, tt := range tests {
		resp, body := get(t, c, st.web.URL+"/ui/?"+tt.query)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /ui/?%s = %d, want 200", tt.query, resp.StatusCode)
			continue
		}
		var got []string
		// The executions table, after the pinned ones (awaiting approval
		// is pinned too).
		_, table, _ := strings.Cut(body, `id="executions"`)
		for _, m := range rowID.FindAllStringSubmatch(table, -1) {
			got = append(got, m[1])
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("GET /ui/?%s rows (-want +got):\n%s", tt.query, diff)
		}
	}
	_, body := get(t, c, st.web.URL+"/ui/?state=bogus&since=yesterday")
	if !strings.Contains(body, `role="alert"`) || !strings.Contains(body, "unknown state") || !strings.Contains(body, "not a time") {
		t.Error("GET /ui/?state=bogus&since=yesterday does not say what is wrong with the filter")
	}
	if !strings.Contains(body, ">all 3<") {
		t.Errorf("the counts do not say all 3:\n%s", body)
	}
}

// FuzzRequestInputs: the console's parsers of request input never panic, a
// post-sign-in redirect never leaves the console, and a name it accepts
// is one the token store accepts too.
func FuzzRequestInputs(f *testing.F) {
	for _, s := range []string{"", "/ui/", "//evil.example/ui/", "/ui/\\evil", "/ui/\tx", "/ui/\u2028", "https://evil.example", "/ui/executions/act_1?x=1", "act_", "2026-12-01T10:00", "ops-alice", "-x", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n := safeNext(s); !strings.HasPrefix(n, Prefix) || strings.HasPrefix(n, "//") || strings.ContainsAny(n, "\\\r\n") {
			t.Errorf("safeNext(%q) = %q, leaves the console", s, n)
		} else if i := strings.IndexFunc(n, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }); i >= 0 {
			t.Errorf("safeNext(%q) = %q, carries %q into the Location header", s, n, n[i:])
		}
		parseFilter(url.Values{"state": {s}, "since": {s}, "until": {s}, "q": {s}, "actor": {s}, "tool": {s}})
		if validName(s) && !tokens.ValidActor(s) {
			t.Errorf("validName(%q) but tokens.ValidActor refuses it", s)
		}
	})
}

// TestSafeNext: the sign-in's next parameter is followed only when it is a
// clean path under /ui/; a control character (a tab was carried into the
// Location header), whitespace, a backslash, a scheme or host, or a path
// that leaves /ui/ falls back to /ui/.
func TestSafeNext(t *testing.T) {
	tests := []struct{ next, want string }{
		{"/ui/", "/ui/"},
		{"/ui/executions/act_1?state=accepted&q=act_", "/ui/executions/act_1?state=accepted&q=act_"},
		{"/ui/sessions", "/ui/sessions"},
		{"/ui/?q=a%09b", "/ui/?q=a%09b"},
		{"", "/ui/"},
		{"/ui/\texecutions", "/ui/"},
		{"/ui/\t/evil.example", "/ui/"},
		{"\t/ui/", "/ui/"},
		{"/ui/\x00", "/ui/"},
		{"/ui/\x7f", "/ui/"},
		{"/ui/ x", "/ui/"},
		{"/ui/\u00a0x", "/ui/"},
		{"/ui/\u2028x", "/ui/"},
		{"/ui/\u200bx", "/ui/"},
		{"/ui/\xff", "/ui/"},
		{"/ui/\r\nSet-Cookie: x=1", "/ui/"},
		{"//evil.example/ui/", "/ui/"},
		{"/ui/\\evil.example", "/ui/"},
		{"\\\\evil.example/ui/", "/ui/"},
		{"https://evil.example/ui/", "/ui/"},
		{"/ui/../admin", "/ui/"},
		{"/ui/%2e%2e/admin", "/ui/"},
		{"/ui/#frag", "/ui/"},
		{"/uix", "/ui/"},
		{"ui/", "/ui/"},
	}
	for _, tt := range tests {
		if got := safeNext(tt.next); got != tt.want {
			t.Errorf("safeNext(%q) = %q, want %q", tt.next, got, tt.want)
		}
	}
	// And through the sign-in: the Location header is the clean fallback.
	st := newStack(t, false)
	token, _, err := st.srv.Tokens.CreateOperator(t.Context(), "ops-bob", 0)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := browserless(t).PostForm(st.web.URL+"/ui/signin", url.Values{"token": {token}, "next": {"/ui/\t/evil.example"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || got != "/ui/" {
		t.Errorf("sign in with next=\"/ui/\\t/evil.example\" = %d, Location %q; want 303 to /ui/", resp.StatusCode, got)
	}
}

// TestDecisionsCarryTheirCredential: a console decision's journal records
// (and the sign-in's) carry the operator token the session was opened
// with and who created that token, not only the name the token signs in
// under: a token for root created by alice's certificate is not root.
func TestDecisionsCarryTheirCredential(t *testing.T) {
	st := newStack(t, false)
	token, op, err := st.srv.Tokens.Issue(t.Context(), tokens.Issue{Actor: "root", Operator: true, CreatedBy: "local operator uid:0", CreatedVia: authz.TransportUnix})
	if err != nil {
		t.Fatal(err)
	}
	c := browserless(t)
	resp, err := c.PostForm(st.web.URL+"/ui/signin", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csrf := st.csrfOf(t, c)
	// Every record of the session names it too (its id in the store).
	want := &recordv1.OperatorCredential{Operator: "root", Kind: CredentialToken, TokenId: op.GetId(), TokenCreatedBy: "local operator uid:0", TokenCreatedVia: authz.TransportUnix,
		ConsoleSession: st.sessionOf(t, "root").id}

	z := st.submit(t, "note", `{"text":"waits for its session"}`)
	sessions, _ := st.srv.Store.Sessions(10)
	ses := sessions[0].GetId()
	from := st.srv.Store.JournalSize()
	if got := post(t, c, st.web.URL+"/ui/sessions/"+ses+"/authorize", url.Values{"csrf": {csrf}, "confirm": {"yes"}}, ""); got != http.StatusSeeOther {
		t.Fatalf("authorize session = %d, want 303", got)
	}
	x := st.submit(t, "rotate", `{"service":"db"}`)
	fromCancel := st.srv.Store.JournalSize()
	if got := post(t, c, st.web.URL+"/ui/executions/"+x.GetId()+"/cancel", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "reason": {"r"}}, ""); got != http.StatusSeeOther {
		t.Fatalf("cancel = %d, want 303", got)
	}

	var signedIn, authorized, approved, cancelled bool
	for i := range st.srv.Store.JournalSize() {
		b, err := st.srv.Store.JournalEntry(i)
		if err != nil {
			t.Fatal(err)
		}
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		var which *bool
		switch {
		case lifecycle.EntryKindOf(e) == KindSignedIn:
			which = &signedIn
		case lifecycle.EntryKindNameOf(e) == "session_authorized" && i >= from:
			which = &authorized
		case e.GetExecutionId() == z.GetId() && e.GetTo() == recordv1.State_STATE_AUTHORIZED:
			which = &approved
		case e.GetExecutionId() == x.GetId() && e.GetTo() == recordv1.State_STATE_CANCELLED && i >= fromCancel:
			which = &cancelled
		default:
			if e.GetCredential() != nil {
				t.Errorf("journal record %d (%s %q) carries the console credential; only the console's own records should", i, lifecycle.EntryKindNameOf(e), e.GetReason())
			}
			continue
		}
		*which = true
		if diff := cmp.Diff(want, e.GetCredential(), protocmp.Transform()); diff != "" {
			t.Errorf("journal record %d (%s %q) credential (-want +got):\n%s", i, lifecycle.EntryKindNameOf(e), e.GetReason(), diff)
		}
	}
	for name, ok := range map[string]bool{"sign-in": signedIn, "session authorized": authorized, "execution approved by the session's authorization": approved, "cancel": cancelled} {
		if !ok {
			t.Errorf("no %s record found", name)
		}
	}
}

// TestListPinsAndTools: an execution awaiting approval is pinned with the
// other states that need a decision, and the Tool filter offers every tool
// an execution was made for, also one no longer in the catalog in force.
func TestListPinsAndTools(t *testing.T) {
	st := newStack(t, false)
	c := browserless(t)
	st.signIn(t, c, "ops-bob")
	r := st.submit(t, "rotate", `{"service":"db"}`)
	st.submit(t, "note", `{"text":"a"}`)
	_, body := get(t, c, st.web.URL+"/ui/")
	if !strings.Contains(body, `<section class="pinned"`) || !regexp.MustCompile(`(?s)id="pinned".*data-id="`+r.GetId()+`".*id="executions"`).MatchString(body) {
		t.Errorf("the list does not pin %s (awaiting approval) under Needs a decision:\n%s", r.GetId(), body)
	}
	// The catalog in force now has rotate alone: note's execution stays
	// findable by its tool.
	only, err := tools.Parse("unit", []byte(strings.Split(unitCatalog, "  note:")[0]))
	if err != nil {
		t.Fatal(err)
	}
	st.console.cfg.Catalog = func() *tools.Catalog { return only }
	_, body = get(t, c, st.web.URL+"/ui/")
	for _, tool := range []string{"note", "rotate"} {
		if !strings.Contains(body, `<option value="`+tool+`"`) {
			t.Errorf("the Tool filter does not offer %s", tool)
		}
	}
}

// TestSessionsLiveInTheStore: a console session is kept in the store, not
// in the console: another console over the same store (after a restart, or
// another replica on the shared PostgreSQL store) takes the same cookie and
// the same CSRF token; the store holds only the hash of the cookie; a
// sign-out on one ends the session on both.
func TestSessionsLiveInTheStore(t *testing.T) {
	st := newStack(t, false)
	c := browserless(t)
	_, csrf := st.signIn(t, c, "ops-fay")
	other, err := New(Config{Store: st.srv.Store, Reads: st.srv.Engine, Connect: st.srv.ConsoleConn, Operators: st.srv.Tokens,
		Catalog: func() *tools.Catalog { return st.srv.Catalog.Current().Catalog }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	web := httptest.NewServer(other.Handler())
	t.Cleanup(web.Close)
	if r, body := get(t, c, web.URL+"/ui/"); r.StatusCode != http.StatusOK || !strings.Contains(body, "ops-fay") {
		t.Fatalf("the other console's list with the cookie = %d, want 200 naming ops-fay", r.StatusCode)
	}
	x := st.submit(t, "rotate", `{"service":"db"}`)
	if got := post(t, c, web.URL+"/ui/executions/"+x.GetId()+"/cancel", url.Values{"csrf": {csrf}, "confirm": {"yes"}}, ""); got != http.StatusSeeOther {
		t.Errorf("cancel on the other console with the first one's CSRF token = %d, want 303", got)
	}
	var cookie string
	for _, ck := range c.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(st.web.URL, "http://"), Path: "/ui/"}) {
		if ck.Name == cookieName {
			cookie = ck.Value
		}
	}
	xs, err := st.srv.Store.ConsoleSessions()
	if err != nil || len(xs) != 1 {
		t.Fatalf("ConsoleSessions = %d, %v; want 1", len(xs), err)
	}
	if raw, _ := proto.Marshal(xs[0]); cookie == "" || strings.Contains(string(raw), cookie) || xs[0].GetKeySha256() != hashOf(cookie) {
		t.Errorf("the stored session %v holds the cookie, or not its hash", xs[0])
	}
	if got := post(t, c, web.URL+"/ui/signout", url.Values{"csrf": {csrf}}, ""); got != http.StatusSeeOther {
		t.Fatalf("sign-out on the other console = %d, want 303", got)
	}
	// The browser forgot the cookie; one who kept it gets nothing either.
	kept := browserless(t)
	kept.Jar.SetCookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(st.web.URL, "http://"), Path: "/ui/"}, []*http.Cookie{{Name: cookieName, Value: cookie, Path: "/ui/"}})
	if r, _ := get(t, kept, st.web.URL+"/ui/"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("the first console with the cookie after sign-out on the other = %d, want 303 to sign in", r.StatusCode)
	}
}

// TestNotificationsPage: an event whose delivery the receiver refuses is
// listed dead-lettered on the notifications page with its execution
// linked; "Send again" (through the Admin API, as latch events replay)
// delivers it under the same ID once the receiver accepts it.
func TestNotificationsPage(t *testing.T) {
	rcv := webhooktest.New(t)
	sink, err := events.ParseSink("ops url=" + rcv.URL + " secret=ops-webhook allow_private=true ca_file=" + rcv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	var secret atomic.Value
	secret.Store("whsec_" + "d3Jvbmcgc2VjcmV0IG9mIHRoZSB0ZXN0") // not the receiver's: it answers 401
	src := catalog.Fixed("unit", []byte(unitCatalog), func() (*tools.Catalog, error) { return tools.Parse("unit", []byte(unitCatalog)) })
	log := testlog.New(t, hclog.Warn)
	data := t.TempDir()
	srv, err := server.New(server.Config{Logger: log, DataDir: data, CatalogSource: src, Sessions: engine.SessionConfig{Required: true},
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: refusingChannel{}},
		Events: &events.Config{Sinks: []events.Sink{sink}, MaxAttempts: 1, Poll: 20 * time.Millisecond,
			Secret: func(string) (string, error) { return secret.Load().(string), nil }},
		Register: func(g grpc.ServiceRegistrar, s *server.Server) {
			v, err := vault.New(vault.Config{Path: filepath.Join(data, "vault.json")})
			if err != nil {
				t.Fatal(err)
			}
			adm, err := admin.New(admin.Config{Logger: log, Vault: v, Tokens: s.Tokens, Catalog: s.Catalog,
				Events: admin.Events{Store: s.Store, Outbox: s.Outbox()}})
			if err != nil {
				t.Fatal(err)
			}
			adm.Register(g)
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	st := &stack{srv: srv, now: time.Now()}
	st.console, err = New(Config{Logger: log, Store: srv.Store, Reads: srv.Engine, Connect: srv.ConsoleConn, Operators: srv.Tokens,
		Catalog: func() *tools.Catalog { return srv.Catalog.Current().Catalog }, VerifierKey: srv.VerifierKey()})
	if err != nil {
		t.Fatal(err)
	}
	st.web = httptest.NewServer(st.console.Handler())
	t.Cleanup(st.web.Close)

	x := st.submit(t, "rotate", `{"service":"db"}`) // approval every_call: an approval_requested event
	var dead []*recordv1.OutboxEvent
	deadline := time.Now().Add(30 * time.Second)
	for len(dead) < 2 { // the session's awaiting_authorization and the approval_requested
		if time.Now().After(deadline) {
			t.Fatal("the refused deliveries were never dead-lettered")
		}
		time.Sleep(20 * time.Millisecond)
		dead, _ = srv.Store.Events(store.EventFilter{Dead: true})
	}
	id := dead[0].GetId()
	c := browserless(t)
	_, csrf := st.signIn(t, c, "ops-erin")
	resp, body := get(t, c, st.web.URL+"/ui/notifications")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/notifications = %d:\n%s", resp.StatusCode, body)
	}
	deadTable, _, _ := strings.Cut(body, `id="recent"`)
	for _, want := range []string{`id="dead"`, `<tr id="` + id + `">`, "approval_requested", `href="/ui/executions/` + x.GetId() + `"`, "dead-lettered after 1 attempt", "answered 401", `id="sinks">ops<`} {
		if !strings.Contains(deadTable, want) {
			t.Errorf("the notifications page's dead letters lack %q:\n%s", want, deadTable)
		}
	}
	if got := post(t, c, st.web.URL+"/ui/notifications/replay", url.Values{"csrf": {csrf}, "id": {"nope"}}, ""); got != http.StatusBadRequest {
		t.Errorf("replay of a malformed ID = %d, want 400", got)
	}
	if got := post(t, c, st.web.URL+"/ui/notifications/replay", url.Values{"csrf": {csrf}, "id": {"evt_ffffffffffffffff"}}, ""); got != http.StatusNotFound {
		t.Errorf("replay of an unknown event = %d, want 404", got)
	}
	_, _, refused := rcv.Snapshot()
	secret.Store(webhooktest.Secret)
	if got := post(t, c, st.web.URL+"/ui/notifications/replay", url.Values{"csrf": {csrf}, "id": {id}}, ""); got != http.StatusSeeOther {
		t.Fatalf("replay = %d, want 303", got)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		if seen, _, _ := rcv.Snapshot(); seen[id] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replayed event never reached the receiver")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The other dead letter (the session's awaiting_authorization event)
	// goes with "Replay every dead-lettered event".
	if got := post(t, c, st.web.URL+"/ui/notifications/replay", url.Values{"csrf": {csrf}}, ""); got != http.StatusSeeOther {
		t.Fatalf("replay of every dead letter = %d, want 303", got)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, body = get(t, c, st.web.URL+"/ui/notifications")
		seen, kinds, bad := rcv.Snapshot()
		if bad != refused {
			t.Fatalf("%d deliveries failed the receiver's signature check after the secret was fixed", bad-refused)
		}
		if len(seen) == 2 && !strings.Contains(body, `id="dead"`) && !strings.Contains(body, `class="delivery dead"`) {
			for id, n := range seen {
				if n != 1 {
					t.Errorf("event %s (%s) delivered %d times, want once", id, kinds[id], n)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the replay the page does not show the delivery:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
