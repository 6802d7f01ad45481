// Package kindtest is the contract every credential kind passes
// (vault.CredentialKind), built in or registered by another package: Run
// it from the kind's tests with one valid credential of the kind. Only
// tests import it.
package kindtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/vault"
)

// Run checks kind k against sample, a credential of k that Validate
// accepts with every field set that k declares secret:
//
//   - k is registered under its name, and sample validates;
//   - without any one required field, or with a field k does not declare,
//     Validate refuses it (ErrInvalidCredential) and the error quotes no
//     secret;
//   - a secret field too short to be redacted is refused;
//   - k has at least one capability (HTTPKind, SSHKind, EnvKind);
//   - its presentations print and marshal no secret, and an HTTP
//     presentation names every secret field's value in Secrets and sets
//     only the headers it names.
func Run(t *testing.T, k vault.CredentialKind, sample vault.Credential) {
	t.Helper()
	if got, ok := vault.Lookup(k.Name()); !ok || got.Name() != k.Name() {
		t.Fatalf("kind %s is not registered (vault.Register)", k.Name())
	}
	if sample.Kind != k.Name() {
		t.Fatalf("sample is a %s credential, want %s", sample.Kind, k.Name())
	}
	if err := sample.Validate(); err != nil {
		t.Fatalf("Validate(sample) = %v, want nil", err)
	}
	var secrets []string
	for _, f := range k.Fields() {
		if f.Secret && sample.Get(f.Name) != "" {
			secrets = append(secrets, sample.Get(f.Name))
		}
	}
	noSecret := func(what, s string) {
		t.Helper()
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				t.Errorf("%s quotes a secret field's value: %s", what, s)
			}
		}
	}
	refused := func(name string, c vault.Credential) {
		t.Helper()
		err := c.Validate()
		if !errors.Is(err, vault.ErrInvalidCredential) {
			t.Errorf("Validate(%s) = %v, want ErrInvalidCredential", name, err)
			return
		}
		noSecret("Validate("+name+")", err.Error())
	}
	with := func(name, v string) vault.Credential {
		c := vault.Credential{Kind: sample.Kind, Fields: vault.Fields{}}
		for n, x := range sample.Fields {
			c.Fields[n] = x
		}
		if v == "" {
			delete(c.Fields, name)
		} else {
			c.Fields[name] = v
		}
		return c
	}
	for _, f := range k.Fields() {
		if f.Required {
			refused("without "+f.Name, with(f.Name, ""))
		}
		if f.Secret {
			refused(f.Name+" too short to redact", with(f.Name, "ab"))
		}
	}
	refused("with an undeclared field", with("not_a_field_of_the_kind", "x"))

	var caps int
	if _, ok := k.(vault.HTTPKind); ok {
		caps++
		h, err := sample.HTTP()
		if err != nil {
			t.Fatalf("HTTP() = %v", err)
		}
		checkPrinted(t, "HTTP presentation", h, noSecret)
		got := map[string]bool{}
		for _, s := range h.Secrets() {
			got[string(s)] = true
		}
		for _, sec := range secrets {
			if !got[sec] {
				t.Errorf("HTTP presentation's Secrets() lacks a secret field's value (%d bytes)", len(sec))
			}
		}
		r, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://target.example/v1/x", strings.NewReader("{}"))
		r.Header.Set("Content-Type", "application/json")
		before := r.Header.Clone()
		if err := h.Apply(r); err == nil {
			named := map[string]bool{}
			for _, n := range h.Headers() {
				named[http.CanonicalHeaderKey(n)] = true
			}
			for n := range r.Header {
				if _, was := before[n]; !was && !named[n] {
					t.Errorf("Apply set header %s, which Headers() does not name", n)
				}
			}
		} else {
			noSecret("Apply error", err.Error())
		}
	}
	if _, ok := k.(vault.SSHKind); ok {
		caps++
		s, err := sample.SSH()
		if err != nil {
			t.Fatalf("SSH() = %v", err)
		}
		checkPrinted(t, "SSH presentation", s, noSecret)
	}
	if _, ok := k.(vault.EnvKind); ok {
		caps++
		if v, err := sample.Env(); err != nil || v == "" {
			t.Errorf("Env() = %d bytes, %v; want the value", len(v), err)
		}
	}
	if caps == 0 {
		t.Errorf("kind %s has no capability (HTTPKind, SSHKind, EnvKind): no channel can use it", k.Name())
	}
	checkPrinted(t, "Credential", sample, noSecret)
}

func checkPrinted(t *testing.T, what string, v any, noSecret func(what, s string)) {
	t.Helper()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		noSecret(what+" printed with "+verb, fmt.Sprintf(verb, v))
	}
	if b, err := json.Marshal(v); err == nil {
		noSecret(what+" as JSON", string(b))
	}
}
