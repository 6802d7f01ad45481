package vault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestCredentialPrintsNoSecret(t *testing.T) {
	creds, secrets := sampleCredentials(t)
	for name, c := range creds {
		t.Run(name, func(t *testing.T) {
			p := &c
			wrapped := struct {
				Name string
				Cred Credential
				Ptr  *Credential
			}{name, c, p}
			out := fmt.Sprintf("%v %+v %#v", c, c, c) +
				fmt.Sprintf("%v %+v %#v", p, p, p) +
				fmt.Sprintf("%s %q %x %X %d %T", c, c, c, c, c, c) +
				fmt.Sprintf("%v %+v %#v", wrapped, wrapped, wrapped) +
				fmt.Sprintf("%v %#v", []Credential{c}, map[string]Credential{name: c}) +
				fmt.Sprint(c, p) + fmt.Sprintln(c, p) + c.String() + c.GoString()
			if !strings.Contains(out, redacted) || !strings.Contains(out, string(c.Kind)) {
				t.Fatalf("formatted credential lacks its kind or the redaction marker: %s", out)
			}
			assertNoSecret(t, "fmt output", out, secrets)

			j, err := json.Marshal(wrapped)
			if err != nil {
				t.Fatal(err)
			}
			assertNoSecret(t, "JSON output", string(j), secrets)

			var sb bytes.Buffer
			slog.New(slog.NewJSONHandler(&sb, nil)).Info("msg", "cred", c, "ptr", p)
			slog.New(slog.NewTextHandler(&sb, nil)).Info("msg", "cred", c, "ptr", p)
			assertNoSecret(t, "slog output", sb.String(), secrets)

			var hb bytes.Buffer
			for _, js := range []bool{false, true} {
				l := hclog.New(&hclog.LoggerOptions{Output: &hb, JSONFormat: js})
				l.Info("msg", "cred", c, "ptr", p)
				l.With("cred", c).Error("failed", "error", fmt.Errorf("dispatch with %v", c))
			}
			if !strings.Contains(hb.String(), redacted) {
				t.Fatalf("hclog output lacks the redaction marker: %s", hb.String())
			}
			assertNoSecret(t, "hclog output", hb.String(), secrets)
		})
	}
}

func TestCredentialKindLabelNotEchoed(t *testing.T) {
	c := Credential{Kind: "sk-live-pasted-into-kind", Fields: Fields{"token": "x"}}
	out := fmt.Sprintf("%v %#v", c, c)
	if strings.Contains(out, "sk-live") {
		t.Errorf("unknown kind echoed: %s", out)
	}
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), "sk-live") {
		t.Errorf("Validate() = %v, want an error that does not echo the kind", err)
	}
}

func TestValidate(t *testing.T) {
	key := sshKeyPEM(t)
	const secret = "S3CRET-value"
	tests := []struct {
		name string
		c    Credential
		ok   bool
	}{
		{"bearer", Credential{Kind: KindBearer, Fields: Fields{"token": secret}}, true},
		{"bearer empty", Credential{Kind: KindBearer}, false},
		{"bearer newline", Credential{Kind: KindBearer, Fields: Fields{"token": secret + "\r\nX-Evil: 1"}}, false},
		{"bearer space", Credential{Kind: KindBearer, Fields: Fields{"token": "a " + secret}}, false},
		{"bearer stray password", Credential{Kind: KindBearer, Fields: Fields{"token": "t", "password": secret}}, false},
		{"bearer too short to redact", Credential{Kind: KindBearer, Fields: Fields{"token": "abc"}}, false},
		{"bearer inside the redaction mark", Credential{Kind: KindBearer, Fields: Fields{"token": "DACT"}}, false},
		{"basic password too short to redact", Credential{Kind: KindBasic, Fields: Fields{"username": "u", "password": "pw"}}, false},
		{"header value too short to redact", Credential{Kind: KindHeader, Fields: Fields{"header": "X-K", "value": "v"}}, false},
		{"basic", Credential{Kind: KindBasic, Fields: Fields{"username": "u", "password": secret}}, true},
		{"basic empty password", Credential{Kind: KindBasic, Fields: Fields{"username": "u"}}, true},
		{"basic colon in password", Credential{Kind: KindBasic, Fields: Fields{"username": "u", "password": "a:" + secret}}, true},
		{"basic no username", Credential{Kind: KindBasic, Fields: Fields{"password": secret}}, false},
		{"basic colon in username", Credential{Kind: KindBasic, Fields: Fields{"username": "u:" + secret}}, false},
		{"basic control in password", Credential{Kind: KindBasic, Fields: Fields{"username": "u", "password": secret + "\n"}}, false},
		{"basic stray token", Credential{Kind: KindBasic, Fields: Fields{"username": "u", "token": secret}}, false},
		{"header", Credential{Kind: KindHeader, Fields: Fields{"header": "X-Api-Key", "value": secret}}, true},
		{"header no value", Credential{Kind: KindHeader, Fields: Fields{"header": "X-Api-Key"}}, false},
		{"header no name", Credential{Kind: KindHeader, Fields: Fields{"value": secret}}, false},
		{"header line pasted as name", Credential{Kind: KindHeader, Fields: Fields{"header": "Authorization: Bearer " + secret, "value": "v"}}, false},
		{"header value injection", Credential{Kind: KindHeader, Fields: Fields{"header": "X-K", "value": secret + "\nX-Evil: 1"}}, false},
		{"header stray key", Credential{Kind: KindHeader, Fields: Fields{"header": "X-K", "value": "v", "private_key": string([]byte(secret))}}, false},
		{"ssh key", Credential{Kind: KindSSHKey, Fields: Fields{"private_key": string(key)}}, true},
		{"ssh key garbage", Credential{Kind: KindSSHKey, Fields: Fields{"private_key": string([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\n" + secret + "\n-----END OPENSSH PRIVATE KEY-----\n"))}}, false},
		{"ssh key empty", Credential{Kind: KindSSHKey}, false},
		{"ssh key stray token", Credential{Kind: KindSSHKey, Fields: Fields{"private_key": string(key), "token": secret}}, false},
		{"no kind", Credential{Fields: Fields{"token": secret}}, false},
		{"unknown kind", Credential{Kind: "oauth", Fields: Fields{"token": secret}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.ok {
				if err != nil {
					t.Errorf("Validate(%s) = %v, want nil", tc.name, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("Validate(%s) = %v, want ErrInvalidCredential", tc.name, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Validate(%s) error quotes the secret: %v", tc.name, err)
			}
		})
	}
}

func TestValidateEncryptedSSHKey(t *testing.T) {
	v, _, _ := newUnlocked(t, "pass")
	enc := encryptedSSHKey(t)
	err := v.Put("k", Credential{Kind: KindSSHKey, Fields: Fields{"private_key": string(enc)}})
	if !errors.Is(err, ErrInvalidCredential) || !strings.Contains(err.Error(), "passphrase-protected") {
		t.Errorf("Put(encrypted ssh key) = %v, want ErrInvalidCredential naming the passphrase", err)
	}
}
