package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
)

func testFingerprinter(tb testing.TB) *Fingerprinter {
	tb.Helper()
	f, err := New(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return f
}

// decodeArgs decodes JSON arguments as the MCP front would: numbers kept
// as json.Number so no precision is lost before canonicalization.
func decodeArgs(tb testing.TB, s string) map[string]any {
	tb.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		tb.Fatalf("decode %q: %v", s, err)
	}
	return m
}

func baseIntent(args map[string]any) Intent {
	return Intent{
		Actor:         "agent:ci",
		Tool:          "deploy_release",
		Channel:       "http",
		Target:        "http://127.0.0.1:9090/v1/releases",
		CredentialRef: "deploy-service",
		Method:        "POST",
		Arguments:     args,
		IntentScope:   "actor:agent:ci",
	}
}

func TestNewKeyLength(t *testing.T) {
	if _, err := New(make([]byte, KeySize-1)); !errors.Is(err, ErrShortKey) {
		t.Errorf("New(31 bytes) error = %v, want ErrShortKey", err)
	}
	if _, err := New(nil); !errors.Is(err, ErrShortKey) {
		t.Errorf("New(nil) error = %v, want ErrShortKey", err)
	}
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if len(k) != KeySize {
		t.Fatalf("GenerateKey() = %d bytes, want %d", len(k), KeySize)
	}
	k2, _ := GenerateKey()
	if bytes.Equal(k, k2) {
		t.Errorf("GenerateKey() returned the same key twice")
	}
	if _, err := New(k); err != nil {
		t.Errorf("New(GenerateKey()) error: %v", err)
	}
}

func TestRecordShape(t *testing.T) {
	f := testFingerprinter(t)
	in := baseIntent(decodeArgs(t, `{"service":"api","version":"1.2.3","region":"us-east-1"}`))
	rec, err := f.Record(in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"actor":"agent:ci","arguments":{"region":"us-east-1","service":"api","version":"1.2.3"},"channel":"http","credential_ref":"deploy-service","intent_scope":"actor:agent:ci","method":"POST","target":"http://127.0.0.1:9090/v1/releases","tool":"deploy_release"}`
	if string(rec) != want {
		t.Errorf("Record() =\n%s\nwant\n%s", rec, want)
	}
	sum := f.Sum(rec)
	if !regexp.MustCompile(`^hmac-sha256:[0-9a-f]{64}$`).MatchString(sum) {
		t.Errorf("Sum() = %q, want hmac-sha256:<64 hex>", sum)
	}

	// SSH shape: command, cwd and repeat_of appear; method does not.
	ssh := Intent{Actor: "a", Tool: "run_migration", Channel: "ssh", Target: "SHA256:abc deploy",
		CredentialRef: "k", Command: []string{"/opt/app/bin/migrate", "--to", "7"}, Cwd: "/opt/app",
		IntentScope: "run:1", RepeatOf: "act_01"}
	rec, err = f.Record(ssh, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"actor":"a","arguments":{},"channel":"ssh","command":["/opt/app/bin/migrate","--to","7"],"credential_ref":"k","cwd":"/opt/app","intent_scope":"run:1","repeat_of":"act_01","target":"SHA256:abc deploy","tool":"run_migration"}`
	if string(rec) != want {
		t.Errorf("Record(ssh) =\n%s\nwant\n%s", rec, want)
	}
}

func TestFingerprintStableAcrossSpelling(t *testing.T) {
	f := testFingerprinter(t)
	base := `{"service":"api","replicas":1,"limit":100,"opts":{"a":true,"b":[1,2]}}`
	same := []string{
		`{"opts":{"b":[1,2],"a":true},"limit":100,"replicas":1,"service":"api"}`,
		"{ \"service\" : \"api\",\n\t\"replicas\": 1.0, \"limit\": 1e2, \"opts\": {\"a\": true, \"b\": [1.00, 2e0]} }",
		`{"service":"\u0061pi","replicas":10e-1,"limit":100.000,"opts":{"a":true,"b":[0.1e1,20E-1]}}`,
	}
	_, want, err := f.Fingerprint(baseIntent(decodeArgs(t, base)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range same {
		_, got, err := f.Fingerprint(baseIntent(decodeArgs(t, s)), nil, nil)
		if err != nil {
			t.Fatalf("Fingerprint(%s) error: %v", s, err)
		}
		if got != want {
			t.Errorf("Fingerprint(%s) = %s, want %s (same as %s)", s, got, want, base)
		}
	}
	// nil and empty arguments are the same intent.
	_, a, _ := f.Fingerprint(baseIntent(nil), nil, nil)
	_, b, _ := f.Fingerprint(baseIntent(map[string]any{}), nil, nil)
	if a != b {
		t.Errorf("Fingerprint(nil args) = %s, Fingerprint({} args) = %s; want equal", a, b)
	}
}

func TestFingerprintChanges(t *testing.T) {
	f := testFingerprinter(t)
	args := `{"service":"api","version":"1.2.3"}`
	_, base, err := f.Fingerprint(baseIntent(decodeArgs(t, args)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*Intent)
	}{
		{"argument value", func(in *Intent) { in.Arguments["version"] = "1.2.4" }},
		{"argument type", func(in *Intent) { in.Arguments["version"] = json.Number("1.2") }},
		{"extra argument", func(in *Intent) { in.Arguments["region"] = "eu" }},
		{"actor", func(in *Intent) { in.Actor = "agent:other" }},
		{"tool", func(in *Intent) { in.Tool = "rollback" }},
		{"target", func(in *Intent) { in.Target = "http://127.0.0.1:9091/v1/releases" }},
		{"credential", func(in *Intent) { in.CredentialRef = "other" }},
		{"method", func(in *Intent) { in.Method = "PUT" }},
		{"scope", func(in *Intent) { in.IntentScope = "run:2" }},
		{"repeat_of", func(in *Intent) { in.RepeatOf = "act_01HX" }},
		{"cwd", func(in *Intent) { in.Cwd = "/tmp" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseIntent(decodeArgs(t, args))
			tt.mutate(&in)
			_, got, err := f.Fingerprint(in, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got == base {
				t.Errorf("Fingerprint after changing %s = %s, unchanged", tt.name, got)
			}
		})
	}
	// A different server key gives a different fingerprint.
	other, _ := New(bytes.Repeat([]byte{8}, KeySize))
	_, got, _ := other.Fingerprint(baseIntent(decodeArgs(t, args)), nil, nil)
	if got == base {
		t.Errorf("Fingerprint under another key = %s, same as under the first", got)
	}
}

func TestIgnoreAndSecret(t *testing.T) {
	f := testFingerprinter(t)
	const password = "correct-horse-battery-staple"
	mk := func(nonce, pw string) Intent {
		return baseIntent(map[string]any{"service": "api", "nonce": nonce, "password": pw, "token": map[string]any{"k": pw}})
	}
	rec1, fp1, err := f.Fingerprint(mk("n-1", password), []string{"nonce"}, []string{"password", "token", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rec1, []byte(password)) || bytes.Contains(rec1, []byte("horse")) {
		t.Fatalf("record contains the secret: %s", rec1)
	}
	if bytes.Contains(rec1, []byte("nonce")) || bytes.Contains(rec1, []byte("n-1")) {
		t.Errorf("record contains the ignored argument: %s", rec1)
	}
	var got struct{ Arguments map[string]string }
	if err := json.Unmarshal(rec1, &got); err != nil {
		t.Fatal(err)
	}
	hex64 := regexp.MustCompile(`^hmac-sha256:[0-9a-f]{64}$`)
	for _, k := range []string{"password", "token"} {
		if !hex64.MatchString(got.Arguments[k]) {
			t.Errorf("record argument %s = %q, want hmac-sha256:<hex>", k, got.Arguments[k])
		}
	}
	if _, ok := got.Arguments["absent"]; ok {
		t.Errorf("record invented the absent secret argument: %s", rec1)
	}

	// The ignored argument does not affect the fingerprint.
	_, fp2, _ := f.Fingerprint(mk("n-2", password), []string{"nonce"}, []string{"password", "token"})
	if fp2 != fp1 {
		t.Errorf("fingerprint changed with an ignored argument: %s vs %s", fp1, fp2)
	}
	// A different secret does.
	_, fp3, _ := f.Fingerprint(mk("n-1", "another"), []string{"nonce"}, []string{"password", "token"})
	if fp3 == fp1 {
		t.Errorf("fingerprint did not change with the secret argument")
	}
	// Without ignore, the nonce counts.
	_, fp4, _ := f.Fingerprint(mk("n-2", password), nil, []string{"password", "token"})
	_, fp5, _ := f.Fingerprint(mk("n-1", password), nil, []string{"password", "token"})
	if fp4 == fp5 {
		t.Errorf("fingerprint ignores an argument that is not marked ignore")
	}
	// Naming a secret twice hides it once.
	_, fp6, _ := f.Fingerprint(mk("n-1", password), []string{"nonce"}, []string{"password", "token", "password"})
	if fp6 != fp1 {
		t.Errorf("fingerprint changed when a secret is listed twice: %s vs %s", fp6, fp1)
	}
	// The caller's map is not modified.
	in := mk("n-1", password)
	if _, err := f.Record(in, []string{"nonce"}, []string{"password"}); err != nil {
		t.Fatal(err)
	}
	if in.Arguments["password"] != password || in.Arguments["nonce"] != "n-1" {
		t.Errorf("Record modified the caller's arguments: %v", in.Arguments)
	}
}

func TestSecretErrorDoesNotLeak(t *testing.T) {
	f := testFingerprinter(t)
	for _, secret := range []any{json.Number("hunter2"), json.Number("1e999hunter2"), json.RawMessage(`{"hunter2":1,"hunter2":2}`), json.RawMessage(`1e999`)} {
		in := baseIntent(map[string]any{"password": secret})
		_, err := f.Record(in, nil, []string{"password"})
		if !errors.Is(err, ErrNotCanonicalizable) {
			t.Fatalf("Record with secret %s: error %v, want ErrNotCanonicalizable", secret, err)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "999") {
			t.Errorf("Record with secret %s: error leaks the secret: %v", secret, err)
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	f := testFingerprinter(b)
	in := baseIntent(decodeArgs(b, `{"service":"api","version":"1.2.3","region":"us-east-1","replicas":3,"labels":{"team":"core","tier":"1"}}`))
	for b.Loop() {
		if _, _, err := f.Fingerprint(in, []string{"region"}, []string{"service"}); err != nil {
			b.Fatal(err)
		}
	}
}
