package vault

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/tools"
)

const (
	testAKID   = "AKIAIOSFODNN7EXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

// sigv4Server checks every request's SigV4 signature the way AWS does: it
// hashes the body it received, rebuilds the request from the signed
// headers, signs it again with the same signer and key, and compares.
// 200 when they match, 403 with the reason otherwise.
type sigv4Server struct {
	creds           aws.Credentials
	region, service string
	mu              sync.Mutex
	accepted        int
}

func (s *sigv4Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := s.verify(r, body); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	s.mu.Lock()
	s.accepted++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok":true,"echo":%q}`, r.Header.Get("X-Amz-Security-Token"))
}

func (s *sigv4Server) verify(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return fmt.Errorf("no SigV4 Authorization header")
	}
	var signed []string
	for _, part := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ", ") {
		if v, ok := strings.CutPrefix(part, "SignedHeaders="); ok {
			signed = strings.Split(v, ";")
		}
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("bad X-Amz-Date: %v", err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	re, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	re.ContentLength = int64(len(body))
	for _, h := range signed {
		if h == "host" || h == "content-length" {
			continue
		}
		re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), s.creds, re, hash, s.service, s.region, at); err != nil {
		return err
	}
	if got, want := auth, re.Header.Get("Authorization"); got != want {
		return fmt.Errorf("signature mismatch: got %q, recomputed %q", got, want)
	}
	return nil
}

func newSigV4Server(t *testing.T, sessionToken string) (*sigv4Server, *httptest.Server) {
	s := &sigv4Server{creds: aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: sessionToken}, region: "eu-west-1", service: "execute-api"}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func sigv4Cred(session string) Credential {
	return Credential{Kind: KindAWSSigV4, Fields: Fields{"access_key_id": testAKID, "secret_access_key": testSecret, "session_token": session, "region": "eu-west-1", "service": "execute-api"}}
}

// TestSigV4ThroughTheDispatcher: a request the dispatcher sends with an
// aws_sigv4 credential (query, template headers and a JSON body) carries a
// signature the server recomputes; with a session token too.
func TestSigV4ThroughTheDispatcher(t *testing.T) {
	for _, session := range []string{"", "FQoGZXIvYXdzEXAMPLEsessiontoken"} {
		t.Run(fmt.Sprintf("session token %v", session != ""), func(t *testing.T) {
			srv, ts := newSigV4Server(t, session)
			c := sigv4Cred(session)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			kind, err := c.HTTP()
			if err != nil {
				t.Fatal(err)
			}
			d := newDispatcher(t, hclog.NewNullLogger())
			call := httpdispatch.Call{
				ExecutionID: "act_1",
				Target:      &tools.Target{Name: "aws", Channel: tools.ChannelHTTP, HTTPTarget: tools.HTTPTarget{BaseURL: ts.URL, AllowPrivate: true}},
				Method:      http.MethodPost, Path: "/prod/items/a%20b",
				Query:      map[string]string{"z": "1", "a": "two words"},
				Headers:    map[string]string{"X-Request-Id": "r-1", "Content-Type": "application/json"},
				Body:       []byte(`{"item":"widget","count":3}`),
				Credential: kind,
			}
			obs, err := d.Send(t.Context(), call)
			if err != nil {
				t.Fatalf("Send = %v", err)
			}
			if obs.Status != http.StatusOK {
				t.Fatalf("server answered %d %s; want the signature accepted", obs.Status, obs.Body)
			}
			if session != "" && bytes.Contains(obs.Body, []byte(session)) {
				t.Errorf("stored body %s holds the session token", obs.Body)
			}
			if srv.accepted != 1 {
				t.Errorf("server accepted %d requests, want 1", srv.accepted)
			}
		})
	}
}

// TestSigV4RefusesTampering: a body, query or key changed after signing
// fails the server's check.
func TestSigV4RefusesTampering(t *testing.T) {
	_, ts := newSigV4Server(t, "")
	signed := func(t *testing.T, c Credential, body string) *http.Request {
		kind, err := c.HTTP()
		if err != nil {
			t.Fatal(err)
		}
		r, _ := http.NewRequest(http.MethodPut, ts.URL+"/v1/things?x=1", strings.NewReader(body))
		if err := kind.Apply(r); err != nil {
			t.Fatalf("Apply = %v", err)
		}
		return r
	}
	send := func(t *testing.T, r *http.Request) int {
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(t, signed(t, sigv4Cred(""), `{"n":1}`)); code != http.StatusOK {
		t.Fatalf("untampered request: %d, want 200", code)
	}
	tests := []struct {
		name   string
		tamper func(r *http.Request)
		cred   Credential
	}{
		{"body replaced (same length)", func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(`{"n":9}`))
		}, sigv4Cred("")},
		{"query changed", func(r *http.Request) { r.URL.RawQuery = "x=2" }, sigv4Cred("")},
		{"method changed", func(r *http.Request) { r.Method = http.MethodPost }, sigv4Cred("")},
		{"wrong secret", func(*http.Request) {}, func() Credential { c := sigv4Cred(""); c.Fields["secret_access_key"] = "not-the-secret-0123"; return c }()},
		{"wrong region", func(*http.Request) {}, func() Credential { c := sigv4Cred(""); c.Fields["region"] = "us-east-1"; return c }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := signed(t, tt.cred, `{"n":1}`)
			tt.tamper(r)
			if code := send(t, r); code != http.StatusForbidden {
				t.Errorf("tampered request (%s): %d, want 403", tt.name, code)
			}
		})
	}
}

// TestSigV4NeedsARereadableBody: a body the signer cannot read again is an
// error, never a signature over the wrong payload.
func TestSigV4NeedsARereadableBody(t *testing.T) {
	kind, _ := sigv4Cred("").HTTP()
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/x", io.NopCloser(strings.NewReader("x")))
	r.GetBody = nil
	if err := kind.Apply(r); err == nil || strings.Contains(err.Error(), testSecret) {
		t.Errorf("Apply(body without GetBody) = %v, want an error that names no secret", err)
	}
}

func TestSigV4Validate(t *testing.T) {
	checkValidate(t, func() Credential { return sigv4Cred("") }, testSecret, []validateCase{
		{"complete", func(*Credential) {}, true},
		{"no region", func(c *Credential) { c.Fields["region"] = "" }, false},
		{"no secret", func(c *Credential) { c.Fields["secret_access_key"] = "" }, false},
		{"bad key id", func(c *Credential) { c.Fields["access_key_id"] = "akia lower" }, false},
		{"bad service", func(c *Credential) { c.Fields["service"] = "Exec API" }, false},
		{"token field of another kind", func(c *Credential) { c.Fields["token"] = "x" }, false},
	})
}
