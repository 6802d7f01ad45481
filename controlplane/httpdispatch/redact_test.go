package httpdispatch

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/testlog"
)

// echoForms are the forms a careless target echoes a secret in (the same
// list as package redact's tests, by name).
var echoForms = []struct {
	name   string
	encode func(string) string
}{
	{"raw", func(s string) string { return s }},
	{"json escaped slash", func(s string) string { return strings.ReplaceAll(jsonContent(s), "/", `\/`) }},
	{"json \\u00xx", func(s string) string { return uEscape(s, `\u%04x`) }},
	{"json \\u00XX", func(s string) string { return uEscape(s, `\u%04X`) }},
	{"url query", url.QueryEscape},
	{"url path", url.PathEscape},
	{"base64 std", func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }},
	{"base64 std raw", func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }},
	{"base64 url", func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }},
	{"base64 url raw", func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }},
	{"html named", html.EscapeString},
	{"html numeric", func(s string) string {
		var b strings.Builder
		for _, r := range s {
			if strings.ContainsRune(`&<>"'/`, r) {
				fmt.Fprintf(&b, "&#%d;", r)
			} else {
				b.WriteRune(r)
			}
		}
		return b.String()
	}},
}

func jsonContent(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// uEscape is JSON content with "/", the HTML specials and quotes as \u00XX
// escapes written with format.
func uEscape(s, format string) string {
	var b strings.Builder
	for _, r := range jsonContent(s) {
		if strings.ContainsRune(`<>&'/`, r) {
			fmt.Fprintf(&b, format, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// echoed are the credential values a target saw on the wire, as a careless
// target would echo them.
type echoed func(r *http.Request) []string

func authorization(r *http.Request) []string { return []string{r.Header.Get("Authorization")} }

// TestCredentialEchoedEncoded: a target that echoes a credential (the
// token, the password, the user:pass pair, the session token, the whole
// Authorization value) in any encoded form, in its body and in a header,
// gets none of it into the observation or the log.
func TestCredentialEchoedEncoded(t *testing.T) {
	const token = "tok/en+0123456789=="
	tokens, _ := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"oauth/access+token-0123==","token_type":"Bearer","expires_in":3600}`)
	})
	creds := []struct {
		name string
		cred Credential
		echo echoed
	}{
		{"bearer", vault.Bearer{Token: token}, func(r *http.Request) []string {
			return append(authorization(r), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		}},
		{"basic", vault.Basic{Username: "deployer", Password: "pa/ss<w>&'rd-42"}, func(r *http.Request) []string {
			u, p, _ := r.BasicAuth()
			return append(authorization(r), p, u+":"+p)
		}},
		{"header", vault.Header{Name: "X-Api-Key", Value: "k/ey-0123456789"}, func(r *http.Request) []string {
			return []string{r.Header.Get("X-Api-Key")}
		}},
		{"oauth2 access token", &vault.OAuth2ClientCredentials{TokenURL: tokens.URL + "/token", ClientID: "latch", ClientSecret: "client/secret-0123"},
			func(r *http.Request) []string {
				return append(authorization(r), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			}},
		{"sigv4 session token", vault.SigV4{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			SessionToken: "FwoGZXIvYXdzEJr//////////wEaDH+abc/def==", Region: "us-east-1", Service: "execute-api"},
			func(r *http.Request) []string {
				auth := r.Header.Get("Authorization")
				_, sig, _ := strings.Cut(auth, "Signature=")
				return []string{r.Header.Get("X-Amz-Security-Token"), auth, sig}
			}},
	}
	for _, cr := range creds {
		srv, seen := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
			var body strings.Builder
			for _, f := range echoForms {
				if f.name != r.URL.Query().Get("form") {
					continue
				}
				for i, v := range cr.echo(r) {
					enc := f.encode(v)
					w.Header().Add("X-Echo", enc)
					fmt.Fprintf(&body, "echo %d: %s\n", i, enc)
				}
			}
			io.WriteString(w, body.String())
		})
		for _, f := range echoForms {
			t.Run(cr.name+"/"+f.name, func(t *testing.T) {
				logs := testlog.New(t, hclog.Trace)
				d := newDispatcher(t, Config{Logger: logs, ResultHeaders: []string{"X-Echo"}})
				tg := demoTarget("http", srv.Listener.Addr().String())
				obs, err := d.Send(t.Context(), Call{ExecutionID: "e", Target: tg, Method: "GET", Path: "/x",
					Query: map[string]string{"form": f.name}, Credential: cr.cred})
				if err != nil {
					t.Fatalf("Send = %v", err)
				}
				if !strings.Contains(string(obs.Body), "echo 0: [REDACTED]") {
					t.Errorf("body %q: the echo was not redacted", obs.Body)
				}
				// What the target saw, encoded as it echoed it.
				got := seen()
				for _, v := range cr.echo(&http.Request{Header: got[len(got)-1].header}) {
					for _, enc := range []string{f.encode(v), v} {
						if strings.Contains(string(obs.Body), enc) {
							t.Errorf("observation body holds the %s form %q:\n%s", f.name, enc, obs.Body)
						}
						if strings.Contains(obs.Headers["X-Echo"], enc) {
							t.Errorf("observation header X-Echo holds the %s form %q: %q", f.name, enc, obs.Headers["X-Echo"])
						}
					}
				}
				for _, s := range cr.cred.Secrets() {
					if strings.Contains(logs.Logged(), string(s)) {
						t.Errorf("log holds a secret: %s", logs.Logged())
					}
				}
			})
		}
	}
}

// TestTruncatedBodyEndsInNoEncodedSecret: a body cut by MaxBody in the
// middle of an encoded credential never keeps the start of it.
func TestTruncatedBodyEndsInNoEncodedSecret(t *testing.T) {
	const token = "s3cr3t-t0ken-value-0123456789"
	enc := base64.StdEncoding.EncodeToString([]byte(token))
	srv, _ := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+enc)
	})
	cut := len("ok ") + len(enc)/2
	d := newDispatcher(t, Config{MaxBody: int64(cut)})
	obs, err := d.Send(t.Context(), Call{ExecutionID: "e", Target: demoTarget("http", srv.Listener.Addr().String()),
		Method: "GET", Path: "/x", Credential: vault.Bearer{Token: token}})
	if err != nil {
		t.Fatalf("Send = %v", err)
	}
	if !obs.Truncated || string(obs.Body) != "ok " {
		t.Errorf("Send body = %q (truncated %v), want %q truncated", obs.Body, obs.Truncated, "ok ")
	}
}

// TestShortCredentialRefused: a credential value too short to be redacted
// is never presented (it would be stored as the target echoes it).
func TestShortCredentialRefused(t *testing.T) {
	srv, seen := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Authorization"))
	})
	d := newDispatcher(t, Config{})
	for _, cred := range []Credential{vault.Bearer{Token: "abc"}, vault.Basic{Username: "deployer", Password: "pw"}} {
		_, err := d.Send(t.Context(), Call{ExecutionID: "e", Target: demoTarget("http", srv.Listener.Addr().String()),
			Method: "GET", Path: "/x", Credential: cred})
		if !errors.Is(err, ErrInvalidCall) || !errors.Is(err, ErrNotSent) {
			t.Errorf("Send(%v) = %v, want ErrInvalidCall and ErrNotSent", cred, err)
		}
	}
	if n := len(seen()); n != 0 {
		t.Errorf("target saw %d requests, want 0", n)
	}
}

// quoting is a credential kind whose Apply fails with a message quoting its
// secret (as a token endpoint's error_description may).
type quoting struct{ secret string }

func (q quoting) Apply(*http.Request) error {
	return fmt.Errorf("endpoint said: bad client secret %s (%s)", q.secret, base64.StdEncoding.EncodeToString([]byte(q.secret)))
}
func (quoting) Headers() []string   { return []string{"X-Key"} }
func (q quoting) Secrets() [][]byte { return [][]byte{[]byte(q.secret)} }

// TestErrorTextRedacted: error text that quotes a credential, from its
// Apply or from the transport (a target answering a malformed status line
// holding the echoed token), never carries it; the error classes stay.
func TestErrorTextRedacted(t *testing.T) {
	const token = "tok/en-0123456789"
	d := newDispatcher(t, Config{})
	tg := demoTarget("http", "127.0.0.1:9")
	_, err := d.Send(t.Context(), Call{ExecutionID: "e", Target: tg, Method: "GET", Path: "/x", Credential: quoting{token}})
	if !errors.Is(err, ErrInvalidCall) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("Send(quoting) = %v, want ErrInvalidCall and ErrNotSent", err)
	}
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(token))) {
		t.Errorf("Send(quoting) error = %q, holds the secret", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				req, err := http.ReadRequest(r)
				if err != nil {
					return
				}
				_, tok, _ := strings.Cut(req.Header.Get("Authorization"), " ")
				fmt.Fprintf(c, "HTTP/1.1 %s OK\r\n\r\n", url.QueryEscape(tok))
			}()
		}
	}()
	tg = demoTarget("http", ln.Addr().String())
	_, err = d.Send(t.Context(), Call{ExecutionID: "e", Target: tg, Method: "GET", Path: "/x", Credential: vault.Bearer{Token: token}})
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Send(malformed answer) = %v, want ErrOutcomeUnknown", err)
	}
	if strings.Contains(err.Error(), url.QueryEscape(token)) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Errorf("Send(malformed answer) error = %q, want the echoed token redacted", err)
	}
}
