// Package console is the operator's web console, served by the control
// plane at /ui/ on its ops listener: the executions (filtered, the
// ones that need a decision pinned, live over server-sent events), one
// execution's whole story (a picture of it on one time axis, timeline,
// dispatch attempts, recovery queries, approvals and sessions,
// correlation evidence, the five investigation questions, its
// journal records with inclusion proofs checked in the browser), the
// decisions an operator makes (approve, deny, authorize or revoke a session,
// resolve an uncertain outcome, cancel before dispatch) and the audit
// checkpoints.
//
// Pages are rendered on the server with html/template (everything escaped)
// from files embedded with embed.FS; a few hundred lines of plain
// JavaScript add live updates and the WebCrypto proof checks, and every page
// reads without it. There is no build step.
//
// # Sign-in and sessions
//
// Operators sign in with an operator token (`latch operator token create
// NAME`, stored hashed by controlplane/tokens; an operator certificate may
// create one only for the name it is bound to, a local operator on the
// socket for anyone, and the token records which) or a one-time link
// (SignInLink, which `latch dev` prints): opening it shows one button that
// signs in (a GET signs nobody in, so a link preview cannot spend it, and
// the button's POST passes the origin check). A sign-in is journaled (kind
// operator_signed_in) and opens a session kept in the store (the shared
// store: it survives a restart and works on every replica; store.
// ConsoleSession): a random cookie (HttpOnly, SameSite=Strict, Path=/ui/,
// Secure when served over TLS) of which the store keeps only the SHA-256,
// checked on every request against the journal record that opened it, with
// its own CSRF token (derived from the cookie, so it is kept nowhere) that
// every form carries and every POST must echo. A session ends after
// Config.SessionTTL from its sign-in, at sign-out, or when its token is
// revoked (checked on every request).
//
// # Decisions
//
// Every decision is an RPC of the same API the CLI calls, over a gRPC
// connection the control plane serves in its own process (Config.Connect),
// through the interceptors every caller goes through: the standby gate,
// the authorization table (a console caller is an operator: it may not
// call a local RPC) with its refusal journal, the request log. Each call
// names its console session (authz.ConsoleSessionKey), which the
// authorization interceptor has the console verify (VerifySession): the
// session's operator is the caller, the journal records a console decision
// as it records `latch approvals approve`, and each of its records also
// carries the credential the session was opened with
// (JournalEntry.credential: the operator token's id and who created it,
// over which transport), so a name is never all the record says about who
// decided. The name comes from the session, never from the form. Each
// decision asks for confirmation on a page that repeats the evidence.
//
// Imported by controlplane/cli only.
package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/actorname"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/receipt"
	"github.com/latchhq/latch/tools"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// Journal kinds of the console's own records.
const (
	KindSignedIn  = store.KindConsoleSignedIn
	KindSignedOut = recordv1.EntryKind_ENTRY_KIND_OPERATOR_SIGNED_OUT
)

// Sentinel errors.
var (
	ErrIncomplete = errors.New("console: Config is incomplete")
	ErrBadName    = errors.New("console: bad operator name")
)

// Reads are the verified reads of executions. Implemented by *engine.Engine.
type Reads interface {
	Get(id, actor string) (*recordv1.Execution, *recordv1.Result, error)
	History(id, actor string) ([]*recordv1.JournalEntry, error)
	List(f store.Filter) ([]*recordv1.Execution, error)
}

// Connect attaches the console to the control plane's API and returns its
// connection: the console makes every decision over it, through the
// interceptors every caller goes through, each call naming its session
// (authz.ConsoleSessionKey); verify is the console's VerifySession, which
// the authorization interceptor asks. Implemented by
// (*server.Server).ConsoleConn.
type Connect func(verify func(ctx context.Context, key string) (*recordv1.OperatorCredential, error)) (grpc.ClientConnInterface, error)

// Operators authenticates operator tokens. Implemented by *tokens.Service.
type Operators interface {
	AuthenticateOperator(ctx context.Context, credential string) (*recordv1.AgentToken, error)
}

// Config names the console's dependencies.
type Config struct {
	Logger hclog.Logger
	Store  *store.Store
	Reads  Reads
	// Connect is how the console reaches the API for its decisions.
	Connect   Connect
	Operators Operators
	// Catalog is the tool catalog in force (for where the execution ID
	// travels: idempotency header, request fields, host agent marker).
	Catalog func() *tools.Catalog
	// VerifierKey is the journal's checkpoint verifier key (note form).
	VerifierKey string
	// VerifyCommand is the offline check of this control plane's journal,
	// shown on the audit page (e.g. "latch audit verify .latch-dev").
	VerifyCommand string
	// Secure marks the session cookie Secure (the ops listener serves TLS).
	Secure bool
	// SessionTTL bounds a console session (default 12h).
	SessionTTL time.Duration
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Poll is how often the live-update stream looks for new journal
	// records (default 300ms).
	Poll time.Duration
	// Counts, when set, is the number of executions in a state, kept in
	// memory (*telemetry.Telemetry's Executions); without it the counts
	// walk the store's state index (once per journal size).
	Counts func(recordv1.State) int64
}

// Console serves /ui/.
type Console struct {
	cfg  Config
	log  hclog.Logger
	tmpl map[string]*template.Template
	mux  *http.ServeMux
	// api is the control plane's API, over Config.Connect's connection.
	conn grpc.ClientConnInterface
	api  controlplanev1.ControlPlaneClient

	mu    sync.Mutex
	codes map[string]oneTime // by SHA-256 of the code
	// refusedAt and refusedSince rate the "sign-in refused" log line.
	refusedAt    time.Time
	refusedSince int

	countsMu sync.Mutex
	counts   countCache
	toolsMu  sync.Mutex
	tools    toolsSeen

	stopOnce sync.Once
	stopped  chan struct{}
}

type session struct {
	// key is the SHA-256 of the session's cookie: what the store keeps,
	// and what each of its API calls names (authz.ConsoleSessionKey).
	key string
	// id names the session in the journal (store.ConsoleSessionID).
	id       string
	operator string
	tokenID  string // "" for a one-time link
	// cred is what the session was opened with, journaled with each of its
	// decisions (JournalEntry.credential).
	cred    *recordv1.OperatorCredential
	csrf    string
	expires time.Time
}

// Kinds of OperatorCredential.
const (
	CredentialToken = "operator_token"
	CredentialLink  = "sign_in_link"
)

// credentialOf is the credential of a session opened with the operator
// token t: its id and who created it.
func credentialOf(t *recordv1.AgentToken) *recordv1.OperatorCredential {
	return &recordv1.OperatorCredential{Operator: t.GetActor(), Kind: CredentialToken, TokenId: t.GetId(),
		TokenCreatedBy: t.GetCreatedBy(), TokenCreatedVia: t.GetCreatedVia()}
}

type oneTime struct {
	operator string
	expires  time.Time
}

// Bounds of the in-memory state (the one-time codes) and of a form.
const (
	maxCodes   = 100
	cookieName = "latch_console"
	maxForm    = 64 << 10
)

// New builds the console.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil || cfg.Reads == nil || cfg.Connect == nil || cfg.Operators == nil || cfg.Catalog == nil {
		return nil, fmt.Errorf("%w: Store, Reads, Connect, Operators and Catalog are required", ErrIncomplete)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 300 * time.Millisecond
	}
	c := &Console{cfg: cfg, log: cfg.Logger.Named("console"), codes: map[string]oneTime{}, stopped: make(chan struct{})}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	conn, err := cfg.Connect(c.VerifySession)
	if err != nil {
		return nil, fmt.Errorf("console: connecting to the API: %w", err)
	}
	c.conn, c.api = conn, controlplanev1.NewControlPlaneClient(conn)
	c.routes()
	return c, nil
}

func (c *Console) parseTemplates() error {
	c.tmpl = map[string]*template.Template{}
	pages, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return err
	}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", p)
		if err != nil {
			return fmt.Errorf("console: template %s: %w", p, err)
		}
		c.tmpl[name] = t
	}
	return nil
}

// Stop ends the live-update streams (EventSource reconnects to the next
// control plane), so the ops listener's graceful stop is not held up by
// open browser tabs. Pages keep being served.
// Stop also closes the API connection: the control plane is stopping.
func (c *Console) Stop() {
	c.stopOnce.Do(func() {
		close(c.stopped)
		if cl, ok := c.conn.(io.Closer); ok {
			cl.Close()
		}
	})
}

// Handler serves everything under Prefix.
func (c *Console) Handler() http.Handler { return c }

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /ui/static/receipt.mjs", serveReceiptJS)
	m.HandleFunc("GET /ui/signin", c.signinPage)
	m.HandleFunc("POST /ui/signin", c.signin)
	m.HandleFunc("POST /ui/signout", c.authed(c.signout))
	m.HandleFunc("GET /ui/{$}", c.authed(c.listPage))
	m.HandleFunc("GET /ui/events", c.authed(c.events))
	m.HandleFunc("GET /ui/executions/{id}", c.authed(c.detailPage))
	m.HandleFunc("GET /ui/executions/{id}/proof", c.authed(c.proofJSON))
	m.HandleFunc("POST /ui/executions/{id}/{action}", c.authed(c.decideExecution))
	m.HandleFunc("GET /ui/sessions", c.authed(c.sessionsPage))
	m.HandleFunc("POST /ui/sessions/{id}/{action}", c.authed(c.decideSession))
	m.HandleFunc("GET /ui/audit", c.authed(c.auditPage))
	m.HandleFunc("GET /ui/notifications", c.authed(c.notificationsPage))
	m.HandleFunc("POST /ui/notifications/replay", c.authed(c.replayEvents))
	m.HandleFunc("GET /ui/observe", c.authed(c.observePage))
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, http.StatusNotFound, "No such page in the console.")
	})
	c.mux = m
}

// ServeHTTP sets the security headers of every answer and serves.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer Chromium sends
	// "Origin: null" on form posts, which the origin check refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm) // a form is a few reasons long
	}
	c.mux.ServeHTTP(w, r)
}

// SignInLink registers a one-time sign-in code for the operator named
// operator, valid for ttl and once, and returns the path and query to open
// on the ops listener (/ui/signin?code=...). `latch dev` prints it.
func (c *Console) SignInLink(operator string, ttl time.Duration) (string, error) {
	if !validName(operator) {
		return "", fmt.Errorf("%w: %q (1-128 letters, digits, _ . @ -)", ErrBadName, operator)
	}
	code := randomToken()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock()
	for k, o := range c.codes {
		if now.After(o.expires) {
			delete(c.codes, k)
		}
	}
	if len(c.codes) >= maxCodes {
		return "", errors.New("console: too many unused sign-in links; use one or wait for them to expire")
	}
	c.codes[hashOf(code)] = oneTime{operator: operator, expires: now.Add(ttl)}
	return Prefix + "signin?code=" + url.QueryEscape(code), nil
}

func validName(s string) bool { return actorname.CheckIssued(s) == nil }

func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// view is what every page template gets.
type view struct {
	Title    string
	Operator string
	CSRF     string
	Nav      string
	Flash    string
	Page     any
}

// authed wraps a handler that needs a signed-in operator: no session sends
// a page read to the sign-in page and refuses anything else (401); a POST
// must carry the session's CSRF token (403 otherwise).
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.session(r)
		if s == nil {
			if r.Method == http.MethodGet && r.URL.Path != Prefix+"events" && !strings.HasSuffix(r.URL.Path, "/proof") {
				http.Redirect(w, r, Prefix+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, nil, http.StatusUnauthorized, "You are not signed in (no console session cookie, or it expired). Sign in again; nothing was done.")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) {
				c.fail(w, r, s, http.StatusForbidden, "The request came from another site (its Origin header is not this console's); nothing was done.")
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
				c.log.Warn("console request refused: bad CSRF token", "operator", s.operator, "path", r.URL.Path)
				c.fail(w, r, s, http.StatusForbidden, "The form's CSRF token does not match your session (a stale page, or a request made by another site); nothing was done. Reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	}
}

// sameOrigin is true when the request has no Origin header (old browsers,
// curl) or one naming this host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// session returns the live session of the request's cookie, or nil. A
// session whose operator token was revoked or expired ends here.
func (c *Console) session(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return nil
	}
	s := c.live(hashOf(ck.Value))
	if s != nil {
		s.csrf = csrfOf(ck.Value)
	}
	return s
}

// csrfOf is the CSRF token of the session whose cookie is cookie: derived
// from it, so that it is kept nowhere, and not from the SHA-256 the store
// keeps (a reader of the store cannot forge it).
func csrfOf(cookie string) string {
	sum := sha256.Sum256([]byte("latch console csrf\x00" + cookie))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// live is the live session of key (the SHA-256 of its cookie), or nil:
// kept in the store, matching the journal record that opened it, before
// its end (and within SessionTTL of its sign-in, whatever its row says),
// and its operator token, if any, neither revoked nor expired. Its CSRF
// token is not set (session sets it from the cookie).
func (c *Console) live(key string) *session {
	if key == "" {
		return nil
	}
	x, err := c.cfg.Store.ConsoleSession(key)
	if errors.Is(err, store.ErrConsoleSessionForged) {
		c.log.Warn("console session refused: it does not match the journal record that opened it", "error", err)
	}
	if err != nil {
		return nil
	}
	now := c.cfg.Clock()
	end := x.GetExpiresAt().AsTime()
	if limit := x.GetOpenedAt().AsTime().Add(c.cfg.SessionTTL); limit.Before(end) {
		end = limit
	}
	if !now.Before(end) {
		return nil
	}
	cred := x.GetCredential()
	s := &session{key: key, id: x.GetId(), operator: cred.GetOperator(), tokenID: cred.GetTokenId(), cred: cred, expires: end}
	if s.tokenID != "" {
		t, err := c.cfg.Store.Token(s.tokenID)
		if err != nil || t.GetRevokedAt() != nil || (t.GetExpiresAt() != nil && !now.Before(t.GetExpiresAt().AsTime())) {
			return nil
		}
	}
	return s
}

// VerifySession is the check the API's authorization interceptor makes of
// every call on the console's connection (authz.ConsoleSession): key must
// be a live session's, and the answer is the credential it was opened
// with, whose operator the call is made as.
func (c *Console) VerifySession(_ context.Context, key string) (*recordv1.OperatorCredential, error) {
	s := c.live(key)
	if s == nil {
		return nil, errNoSession
	}
	return s.cred, nil
}

// errNoSession: a call names no live session (unknown, expired, signed
// out, or its token revoked).
var errNoSession = errors.New("console: the session is not live (expired, signed out, or its token revoked)")

// asOperator is the context of an API call made for s: its metadata names
// the session, which the API's authorization interceptor verifies.
func asOperator(ctx context.Context, s *session) context.Context {
	return metadata.AppendToOutgoingContext(ctx, authz.ConsoleSessionKey, s.key)
}

// open starts a session opened with cred and sets its cookie: its
// operator_signed_in record and its row in the store are written together,
// the record naming the session (OperatorCredential.console_session).
func (c *Console) open(w http.ResponseWriter, cred *recordv1.OperatorCredential, how string, r *http.Request) error {
	now := c.cfg.Clock()
	operator := cred.GetOperator()
	if _, err := c.cfg.Store.PruneConsoleSessions(r.Context(), now); err != nil {
		c.log.Warn("ended console sessions not pruned", "error", err)
	}
	val := randomToken()
	key := hashOf(val)
	cred = proto.Clone(cred).(*recordv1.OperatorCredential)
	cred.ConsoleSession = store.ConsoleSessionID(key)
	expires := now.Add(c.cfg.SessionTTL)
	err := c.cfg.Store.Update(r.Context(), func(tx *store.Tx) error {
		at := timestamppb.New(now)
		n, err := tx.Append(&recordv1.JournalEntry{Time: at, EntryKind: KindSignedIn, Actor: operator, Reason: "signed in to the console " + how, Credential: cred})
		if err != nil {
			return err
		}
		return tx.PutConsoleSession(&recordv1.ConsoleSession{Id: cred.GetConsoleSession(), KeySha256: key, Credential: cred,
			OpenedAt: at, ExpiresAt: timestamppb.New(expires), JournalIndex: n})
	})
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: val, Path: Prefix, HttpOnly: true, Secure: c.cfg.Secure,
		SameSite: http.SameSiteStrictMode, Expires: expires})
	c.log.Info("operator signed in to the console", "operator", operator, "how", how, "token_created_by", cred.GetTokenCreatedBy())
	return nil
}

// signedOut ends the session s: its row goes with the sign-out record.
func (c *Console) signedOut(ctx context.Context, s *session) error {
	return c.cfg.Store.Update(ctx, func(tx *store.Tx) error {
		tx.DeleteConsoleSession(s.id)
		_, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(c.cfg.Clock()), EntryKind: KindSignedOut, Actor: s.operator, Reason: "signed out of the console", Credential: s.cred})
		return err
	})
}

type signinView struct {
	Code, Next, Operator, Error string
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	v := signinView{Code: r.URL.Query().Get("code"), Next: safeNext(r.URL.Query().Get("next"))}
	if v.Code != "" {
		c.mu.Lock()
		o, ok := c.codes[hashOf(v.Code)]
		c.mu.Unlock()
		if !ok || c.cfg.Clock().After(o.expires) {
			v.Code, v.Error = "", "This sign-in link was used already or has expired. Sign in with an operator token (latch operator token create NAME), or restart latch dev for a new link."
		} else {
			v.Operator = o.operator
		}
	}
	c.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Page: v})
}

// signin takes an operator token or a one-time code. The sign-in form has
// no session yet, so it has no CSRF token: SameSite=Strict cookies and the
// Origin check keep another site from signing a browser in.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.fail(w, r, nil, http.StatusForbidden, "The sign-in came from another site; refused.")
		return
	}
	next := safeNext(r.PostFormValue("next"))
	if code := r.PostFormValue("code"); code != "" {
		key := hashOf(code)
		c.mu.Lock()
		o, ok := c.codes[key]
		delete(c.codes, key)
		c.mu.Unlock()
		if !ok || c.cfg.Clock().After(o.expires) {
			c.render(w, r, http.StatusUnauthorized, "signin", view{Title: "Sign in", Page: signinView{Next: next, Error: "This sign-in link was used already or has expired; nothing was signed in."}})
			return
		}
		if err := c.open(w, &recordv1.OperatorCredential{Operator: o.operator, Kind: CredentialLink}, "with a one-time sign-in link", r); err != nil {
			c.fail(w, r, nil, http.StatusServiceUnavailable, "Signing in could not be journaled: "+err.Error())
			return
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	t, err := c.cfg.Operators.AuthenticateOperator(r.Context(), tok)
	if err != nil {
		c.refusedSignIn(r, err)
		c.render(w, r, http.StatusUnauthorized, "signin", view{Title: "Sign in", Page: signinView{Next: next,
			Error: "That is not a live operator token. Create one with `latch operator token create NAME` (agent tokens do not sign in here)."}})
		return
	}
	how := "with operator token " + t.GetId()
	if by := t.GetCreatedBy(); by != "" {
		how += " (created by " + by + ")"
	}
	if err := c.open(w, credentialOf(t), how, r); err != nil {
		c.fail(w, r, nil, http.StatusServiceUnavailable, "Signing in could not be journaled: "+err.Error())
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// refusedSignInEvery bounds the log lines of refused sign-ins: whoever can
// reach the listener must not be able to flood the log.
const refusedSignInEvery = 10 * time.Second

func (c *Console) refusedSignIn(r *http.Request, err error) {
	c.mu.Lock()
	now := c.cfg.Clock()
	if now.Sub(c.refusedAt) < refusedSignInEvery {
		c.refusedSince++
		c.mu.Unlock()
		return
	}
	since := c.refusedSince
	c.refusedAt, c.refusedSince = now, 0
	c.mu.Unlock()
	c.log.Warn("console sign-in refused", "remote", r.RemoteAddr, "error", err, "refused_since_last_line", since)
}

// safeNext keeps a post-sign-in redirect inside the console: next must be
// a clean path under /ui/ (with a query, if any), anything else is /ui/.
// Refused: control characters, whitespace and anything not printable (a
// tab goes into the Location header as it is; browsers drop some of them
// and read what is left), invalid UTF-8, backslashes (browsers read them
// as slashes: /ui/\evil.example), a scheme, a host or user info, a
// fragment, and a path that leaves /ui/ once its dot segments, encoded or
// not, are resolved (/ui/../x, /ui/%2e%2e/x).
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || len(next) > 2048 || !utf8.ValidString(next) {
		return Prefix
	}
	for _, r := range next {
		if r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return Prefix
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Fragment != "" || strings.Contains(next, "#") {
		return Prefix
	}
	if p := path.Clean(u.Path); p != strings.TrimSuffix(Prefix, "/") && !strings.HasPrefix(p, Prefix) {
		return Prefix
	}
	return next
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := c.signedOut(r.Context(), s); err != nil {
		c.log.Warn("sign-out not journaled", "operator", s.operator, "error", err)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// render writes a page; "listpart" and "detailpart" are the live regions
// of the list and detail pages alone (what the live updates fetch).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	entry := "layout.html"
	if base, ok := strings.CutSuffix(name, "part"); ok {
		name, entry = base, "live"
	}
	t := c.tmpl[name]
	if t == nil {
		http.Error(w, "console: no template "+name, http.StatusInternalServerError)
		return
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, entry, v); err != nil {
		c.log.Error("console page failed to render", "page", name, "error", err)
		http.Error(w, "console: the page failed to render; see the control plane's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(b.String())) //nolint:errcheck // the browser went away
}

type failView struct{ Message string }

// fail renders an error page that says what was wrong and what to do.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	v := view{Title: http.StatusText(status), Page: failView{Message: msg}}
	if s != nil {
		v.Operator, v.CSRF = s.operator, s.csrf
	}
	c.render(w, r, status, "error", v)
}

// serveReceiptJS serves receipt.mjs, the JavaScript verifier of package
// receipt, which console.js imports: one copy for the console, agents and
// browsers.
func serveReceiptJS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(receipt.JS)
}
