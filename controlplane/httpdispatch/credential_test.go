package httpdispatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// unpresentable is a credential kind whose Apply always fails.
type unpresentable struct{}

func (unpresentable) Apply(*http.Request) error { return errors.New("no key material") }
func (unpresentable) Headers() []string         { return nil }
func (unpresentable) Secrets() [][]byte         { return nil }

// signer is a request-signing kind written the way an AWS SigV4 or an
// HMAC-signed webhook kind would be: it hashes the method, path, a header
// and the payload (read through GetBody) into a signature header. The
// dispatcher knows nothing of it.
type signer struct{ key string }

func (s signer) sign(method, path, date string, body []byte) string {
	m := hmac.New(sha256.New, []byte(s.key))
	io.WriteString(m, method+"\n"+path+"\n"+date+"\n")
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func (s signer) Apply(r *http.Request) error {
	if r.GetBody == nil {
		return errors.New("no GetBody: cannot hash the payload")
	}
	rc, err := r.GetBody()
	if err != nil {
		return err
	}
	body, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	r.Header.Set("X-Signature", s.sign(r.Method, r.URL.EscapedPath(), r.Header.Get("X-Date"), body))
	return nil
}
func (signer) Headers() []string   { return []string{"X-Signature"} }
func (s signer) Secrets() [][]byte { return [][]byte{[]byte(s.key)} }

// TestSigningCredential: a kind that signs the whole request (headers the
// template set, and the body) goes through the dispatcher unchanged; its
// header never reaches a stored result, and the template cannot set it.
func TestSigningCredential(t *testing.T) {
	srv, seen := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Signature", r.Header.Get("X-Signature")) // echoed
		w.WriteHeader(http.StatusCreated)
	})
	d := newDispatcher(t, Config{ResultHeaders: []string{"X-Signature", "Location"}})
	cred := signer{key: "k-0123456789"}
	call := releaseCall(demoTarget("http", srv.Listener.Addr().String()), "e1", "1.0")
	call.Credential = cred
	call.Headers = map[string]string{"X-Date": "20261201T000000Z"}
	obs, err := d.Send(t.Context(), call)
	if err != nil {
		t.Fatalf("Send = %v", err)
	}
	got := seen()[0]
	want := cred.sign(got.method, strings.SplitN(got.uri, "?", 2)[0], "20261201T000000Z", got.body)
	if sig := got.header.Get("X-Signature"); sig != want {
		t.Errorf("target saw X-Signature %q, want %q (the signature of what it received)", sig, want)
	}
	if v, ok := obs.Headers["X-Signature"]; ok {
		t.Errorf("observation kept the credential's header X-Signature = %q", v)
	}
	call.Headers = map[string]string{"x-signature": "forged"}
	if _, err := d.Send(t.Context(), call); !errors.Is(err, ErrInvalidCall) || !errors.Is(err, ErrNotSent) {
		t.Errorf("Send with a template setting the credential's header = %v, want ErrInvalidCall and ErrNotSent", err)
	}
	if n := len(seen()); n != 1 {
		t.Errorf("target saw %d requests, want 1", n)
	}
}
