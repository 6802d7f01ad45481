package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKinds: every stored kind turns into the kind of its channel, presents
// itself the way it did when the dispatcher held the switch, and prints no
// secret however it is formatted.
func TestKinds(t *testing.T) {
	const secret = "s3cr3t-value-0123"
	key := sshKeyPEM(t)
	tests := []struct {
		name        string
		c           Credential
		httpErr     error // from HTTP
		sshErr      error // from SSH
		wantHeaders http.Header
		wantNames   []string
	}{
		{"bearer", Credential{Kind: KindBearer, Fields: Fields{"token": secret}}, nil, ErrWrongKind,
			http.Header{"Authorization": {"Bearer " + secret}}, []string{"Authorization"}},
		{"basic", Credential{Kind: KindBasic, Fields: Fields{"username": "u", "password": secret}}, nil, ErrWrongKind,
			http.Header{"Authorization": {"Basic dTpzM2NyM3QtdmFsdWUtMDEyMw=="}}, []string{"Authorization"}},
		{"header", Credential{Kind: KindHeader, Fields: Fields{"header": "x-api-key", "value": secret}}, nil, ErrWrongKind,
			http.Header{"X-Api-Key": {secret}}, []string{"X-Api-Key"}},
		{"ssh key", Credential{Kind: KindSSHKey, Fields: Fields{"private_key": string(key)}}, ErrWrongKind, nil, nil, nil},
		{"unknown kind", Credential{Kind: "magic", Fields: Fields{"token": secret}}, ErrInvalidCredential, ErrWrongKind, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := tt.c.HTTP()
			if !errors.Is(err, tt.httpErr) || (tt.httpErr == nil) != (err == nil) {
				t.Fatalf("HTTP() error = %v, want %v", err, tt.httpErr)
			}
			s, serr := tt.c.SSH()
			if !errors.Is(serr, tt.sshErr) || (tt.sshErr == nil) != (serr == nil) {
				t.Fatalf("SSH() error = %v, want %v", serr, tt.sshErr)
			}
			for _, e := range []error{err, serr} {
				if e != nil {
					assertNoSecret(t, "error", e.Error(), []string{secret})
				}
			}
			if h != nil {
				r, _ := http.NewRequest(http.MethodPost, "http://t.test/x", http.NoBody)
				r.Header = http.Header{}
				if err := h.Apply(r); err != nil {
					t.Fatalf("Apply = %v", err)
				}
				if diff := cmp.Diff(tt.wantHeaders, r.Header); diff != "" {
					t.Errorf("headers after Apply (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantNames, h.Headers()); diff != "" {
					t.Errorf("Headers() (-want +got):\n%s", diff)
				}
				if len(h.Secrets()) == 0 {
					t.Error("Secrets() is empty: nothing would be redacted")
				}
				js, _ := json.Marshal(h)
				assertNoSecret(t, "formatted kind", fmt.Sprintf("%v %+v %#v %s %q %x", h, h, h, h, h, h)+string(js), []string{secret})
			}
			if s != nil {
				signer, err := s.Signer()
				if err != nil || signer.PublicKey() == nil {
					t.Fatalf("Signer() = %v, %v", signer, err)
				}
				assertNoSecret(t, "formatted kind", fmt.Sprintf("%v %+v %#v", s, s, s), []string{string(key[40:80])})
			}
		})
	}
	for _, bad := range []HTTPCredential{Bearer{}, Bearer{Token: "a\nb"}, Basic{Username: "a:b"}, Header{Name: "Bad Name", Value: "v"}, Header{Name: "X-K"}} {
		r, _ := http.NewRequest(http.MethodGet, "http://t.test/", http.NoBody)
		if err := bad.Apply(r); err == nil {
			t.Errorf("Apply(%T with bad fields) = nil, want an error", bad)
		}
	}
	if _, err := (SSHKey{PrivateKey: []byte("not a key " + secret)}).Signer(); err == nil {
		t.Error("Signer() of garbage = nil error")
	} else {
		assertNoSecret(t, "Signer error", err.Error(), []string{secret})
	}
}

// TestRegistryKinds: every built-in kind is registered under its name,
// its fields are named once each, and it presents itself through at least
// one capability (a kind no channel can use is a mistake).
func TestRegistryKinds(t *testing.T) {
	for _, k := range builtIn {
		got, ok := Lookup(k.Name())
		if !ok || got != k {
			t.Errorf("Lookup(%q) = %v, %v, want the built-in", k.Name(), got, ok)
		}
		seen := map[string]bool{}
		for _, f := range k.Fields() {
			if seen[f.Name] {
				t.Errorf("kind %s names field %q twice", k.Name(), f.Name)
			}
			seen[f.Name] = true
		}
		if !isHTTP(k) && !isSSH(k) && !isEnv(k) {
			t.Errorf("kind %s has no capability (HTTPKind, SSHKind, EnvKind)", k.Name())
		}
	}
	if n := len(Kinds()); n < len(builtIn) {
		t.Errorf("Kinds() has %d kinds, want at least the %d built-ins", n, len(builtIn))
	}
}
