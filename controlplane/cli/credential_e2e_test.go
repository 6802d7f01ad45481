package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const credentialCatalog = `
targets:
  aws-api: {channel: http, base_url: %q, allow_private: true, idempotency_header: Idempotency-Key, credential: aws}
  oauth-api: {channel: http, base_url: %q, allow_private: true, idempotency_header: Idempotency-Key, credential: oauth}
tools:
  put_item:
    description: Put an item into a SigV4-signed API.
    input_schema: {type: object, required: [name], properties: {name: {type: string}}}
    target: aws-api
    request: {method: POST, path: /items, body: {name: "{{name}}"}}
    replay: idempotency_key
  list_items:
    description: List items of an OAuth2-protected API.
    input_schema: {type: object, properties: {}}
    target: oauth-api
    request: {method: GET, path: /items}
    replay: read_only
`

// TestCredentialKindsEndToEnd: credentials of kinds aws_sigv4 and
// oauth2_client_credentials stored with latch vault put (JSON on stdin)
// authenticate real calls under latch serve: the SigV4 server recomputes
// each signature, the OAuth2 API accepts only tokens its token endpoint
// issued, and no secret or token is in what the control plane answers.
func TestCredentialKindsEndToEnd(t *testing.T) {
	const akid, secret, clientSecret = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "oauth-client-secret-0123"
	creds := aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}
	awsAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		at, _ := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		sum := sha256.Sum256(body)
		re, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
		auth := r.Header.Get("Authorization")
		_, signed, _ := strings.Cut(auth, "SignedHeaders=")
		signed, _, _ = strings.Cut(signed, ",")
		for _, h := range strings.Split(signed, ";") {
			if h != "host" && h != "content-length" {
				re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
			}
		}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, re, hex.EncodeToString(sum[:]), "execute-api", "eu-west-1", at); err != nil || re.Header.Get("Authorization") != auth || auth == "" {
			http.Error(w, "signature does not match", http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"stored":%s,"auth":%q}`, body, auth)
	}))
	t.Cleanup(awsAPI.Close)
	issued := map[string]bool{}
	oauth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			r.ParseForm()
			if r.PostForm.Get("client_secret") != clientSecret && !func() bool { _, p, _ := r.BasicAuth(); return p == clientSecret }() {
				http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
				return
			}
			tok := fmt.Sprintf("tok-%d-zzzz", len(issued)+1)
			issued[tok] = true
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
			return
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !issued[tok] {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"items":[],"token":%q}`, tok)
	}))
	t.Cleanup(oauth.Close)

	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(fmt.Sprintf(credentialCatalog, awsAPI.URL, oauth.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	startServe(t, data, catalog)
	put := func(name, kind, stdin string) (string, int) {
		var out bytes.Buffer
		code := Main(context.Background(), &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }},
			[]string{"vault", "put", name, "--kind", kind, "--data", data})
		return out.String(), code
	}
	if out, code := put("aws", "aws_sigv4", `{"access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"`+secret+`","region":"eu-west-1","service":"execute-api"}`); code != 0 {
		t.Fatalf("vault put aws: exit %d: %s", code, out)
	}
	if out, code := put("oauth", "oauth2_client_credentials", `{"token_url":"`+oauth.URL+`/token","client_id":"latch","client_secret":"`+clientSecret+`","scopes":["items:read"]}`); code != 0 {
		t.Fatalf("vault put oauth: exit %d: %s", code, out)
	}
	if out, code := put("bad", "aws_sigv4", `{"access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"`+secret+`","colour":"blue"}`); code != 2 || !strings.Contains(out, `"colour"`) || strings.Contains(out, secret) {
		t.Errorf("vault put with an unknown key: exit %d: %s; want 2 naming the key, not the secret", code, out)
	}
	if out, code := put("bad", "aws_sigv4", `{"access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"`+secret+`"}`); code != 1 || !strings.Contains(out, "Region") || strings.Contains(out, secret) {
		t.Errorf("vault put without a region: exit %d: %s; want 1 naming Region, not the secret", code, out)
	}

	c := client(t, data)
	var answers []byte
	for _, call := range []struct{ tool, args string }{{"put_item", `{"name":"widget"}`}, {"list_items", `{}`}, {"list_items", `{}`}} {
		r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: call.tool, Arguments: []byte(call.args), WaitMs: 20000})
		if err != nil {
			t.Fatalf("%s: %v", call.tool, err)
		}
		x := waitFor(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
		if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
			t.Errorf("%s: outcome %v status %d, want succeeded (the target accepted the credential)", call.tool, x.GetOutcome(), x.GetTargetStatus())
		}
		g, err := c.Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: x.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, g.GetResult().GetBody()...)
	}
	if len(issued) != 1 {
		t.Errorf("token endpoint issued %d tokens for two calls, want 1 (cached)", len(issued))
	}
	for _, s := range []string{secret, clientSecret, "tok-1-zzzz"} {
		if bytes.Contains(answers, []byte(s)) {
			t.Errorf("stored results hold %q:\n%s", s, answers)
		}
	}
}

const sealedCatalog = `
targets:
  echo: {channel: http, base_url: %q, allow_private: true, idempotency_header: Idempotency-Key}
tools:
  rotate_secret:
    description: Rotate a secret; each call needs approval.
    input_schema: {type: object, required: [name, secret], properties: {name: {type: string}, secret: {type: string}}}
    target: echo
    request: {method: POST, path: /rotate, body: {name: "{{name}}", secret: "{{secret}}"}}
    replay: review
    approval: every_call
    fingerprint: {secret: [secret]}
`

// TestSecretArgumentSurvivesARestart: an execution with a secret argument,
// awaiting approval when latch serve is killed, is approved after the
// restart and sent with its secret (sealed in the store with a key from the
// vault); no file of the data dir holds the secret in clear.
func TestSecretArgumentSurvivesARestart(t *testing.T) {
	const secret = "Zq9-restart-SECRET-8812"
	got := make(chan string, 4)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Secret string }
		json.NewDecoder(r.Body).Decode(&in)
		got <- in.Secret
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(echo.Close)
	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(fmt.Sprintf(sealedCatalog, echo.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	p := startServe(t, data, catalog)
	c := client(t, data)
	r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "rotate_secret", Arguments: []byte(`{"name":"db","secret":"` + secret + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetExecution().GetId()
	if r.GetExecution().GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("state %v, want awaiting_approval", r.GetExecution().GetState())
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	startServe(t, data, catalog)
	if out, code := runCLI(t, "approvals", "approve", id, "--data", data); code != 0 {
		t.Fatalf("approve after restart: exit %d: %s", code, out)
	}
	c = client(t, data)
	x := waitFor(t, c, id, recordv1.State_STATE_COMPLETED)
	if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("outcome %v, want succeeded", x.GetOutcome())
	}
	if s := <-got; s != secret {
		t.Errorf("target got secret %q, want the one given before the restart", s)
	}
	filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("secret in clear in %s", p)
			}
		}
		return nil
	})
}
