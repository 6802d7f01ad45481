package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type opts struct {
	data, level, cert, token string
	count                    int
	wait                     time.Duration
	open                     bool
	actors                   listFlag
}

var testBinary = Binary{Name: "test", EnvPrefix: "LATCH_TEST_", NoKey: []string{"version"}, Reloadable: []string{"log_level"}}

func testFlags() (*flag.FlagSet, *opts) {
	o := &opts{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	Register(fs)
	fs.StringVar(&o.data, "data", "", "data dir")
	fs.StringVar(&o.level, "log-level", "info", "level")
	fs.IntVar(&o.count, "count", 1, "count")
	fs.DurationVar(&o.wait, "wait", time.Second, "wait")
	fs.BoolVar(&o.open, "open", false, "open")
	fs.Var(&o.actors, "actor", "an actor (repeatable)")
	fs.StringVar(&o.cert, "tls-cert-file", "", "cert")
	fs.StringVar(&o.token, "api-token", "", "a token")
	fs.Bool("version", false, "print the version")
	Alias(fs, "tls-cert", "tls-cert-file")
	return fs, o
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestKeys(t *testing.T) {
	fs, _ := testFlags()
	var got []string
	for _, e := range testBinary.Keys(fs) {
		got = append(got, e.Key+":"+e.Type)
	}
	want := []string{"actor:list", "api_token:string", "count:int", "data:string", "log_level:string", "open:bool", "tls.cert_file:string", "wait:duration"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Keys() (-want +got):\n%s", d)
	}
	if got := testBinary.EnvName("tls.cert_file"); got != "LATCH_TEST_TLS_CERT_FILE" {
		t.Errorf("EnvName(tls.cert_file) = %q", got)
	}
	if got := Aliases(fs, "tls-cert-file"); !cmp.Equal(got, []string{"tls-cert"}) {
		t.Errorf("Aliases(tls-cert-file) = %q", got)
	}
}

// TestPrecedence: defaults < file < environment < flags, and a deprecated
// alias on the command line counts as its flag.
func TestPrecedence(t *testing.T) {
	fs, o := testFlags()
	file, err := testBinary.Parse(fs,
		[]string{"--config", "testdata/good.yaml", "--count", "9", "--tls-cert", "/flag.pem"},
		env(map[string]string{"LATCH_TEST_LOG_LEVEL": "warn", "LATCH_TEST_COUNT": "8", "LATCH_TEST_TLS_CERT_FILE": "/env.pem"}))
	if err != nil || file != "testdata/good.yaml" {
		t.Fatalf("Parse = %q, %v", file, err)
	}
	got := *o
	want := opts{data: "/var/lib/x", level: "warn", cert: "/flag.pem", count: 9, wait: 90 * time.Second, open: true, actors: listFlag{"alice", "bob"}}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(opts{})); d != "" {
		t.Errorf("Parse (-want +got):\n%s", d)
	}
}

// TestBadFile: every problem at once, each at its line.
func TestBadFile(t *testing.T) {
	fs, _ := testFlags()
	err := testBinary.Load(fs, "testdata/bad.yaml")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load(bad.yaml) = %v, want ErrInvalid", err)
	}
	want := []string{
		`testdata/bad.yaml:1: data: must be a string (quote it)`,
		`testdata/bad.yaml:2: test config: unknown key "log_lvel" (known: actor, api_token, count, data, log_level, open, tls, wait)`,
		`testdata/bad.yaml:3: count: must be a whole number, got "seven"`,
		`testdata/bad.yaml:4: wait: must be a duration like 30s, 10m or 2h (a string), got "90"`,
		`testdata/bad.yaml:5: open: must be true or false`,
		`testdata/bad.yaml:6: actor: must be a string or a list of strings`,
		`testdata/bad.yaml:9: tls: unknown key "cert" (known: cert_file)`,
		`testdata/bad.yaml:10: api_token: a secret is never written in the config file: put it in a file readable only by the service and give its path as api_token_file`,
	}
	if d := cmp.Diff(want, strings.Split(err.Error(), "\n")); d != "" {
		t.Errorf("Load(bad.yaml) (-want +got):\n%s", d)
	}
}

func TestFileProblems(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"syntax", "data: [\n", "x.yaml:1: YAML: did not find expected node content"},
		{"two documents", "data: a\n---\ndata: b\n", `x.yaml:2: a config file is one YAML document; remove the extra "---" document`},
		{"not a mapping", "- a\n", "x.yaml:1: test config: must be a mapping"},
		{"duplicate", "data: a\ndata: b\n", `x.yaml:2: test config: duplicate key "data" (first at line 1)`},
		{"version has no key", "version: true\n", `x.yaml:1: test config: unknown key "version"`},
		{"bad env", "", "LATCH_TEST_COUNT: parse error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "x.yaml")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			fs, _ := testFlags()
			_, err := testBinary.Parse(fs, []string{"--config", p}, env(map[string]string{"LATCH_TEST_COUNT": map[bool]string{true: "x"}[tc.name == "bad env"]}))
			if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), dir+"/", ""), tc.want) {
				t.Errorf("Parse(%q) = %v, want %q", tc.text, err, tc.want)
			}
		})
	}
	fs, _ := testFlags()
	if err := testBinary.Load(fs, filepath.Join(dir, "absent.yaml")); err == nil || !strings.Contains(err.Error(), "cannot read the config file") {
		t.Errorf("Load(absent) = %v, want it to say the file cannot be read", err)
	}
	fs, _ = testFlags()
	if err := os.WriteFile(filepath.Join(dir, "empty.yaml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := testBinary.Load(fs, filepath.Join(dir, "empty.yaml")); err != nil {
		t.Errorf("Load(empty) = %v, want nil (an empty file sets nothing)", err)
	}
}

func TestSecretHook(t *testing.T) {
	b := testBinary
	b.Secret = func(key, value string) string {
		if key == "data" && strings.Contains(value, "pw") {
			return "no passwords"
		}
		return ""
	}
	p := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(p, []byte("data: pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, o := testFlags()
	err := b.Load(fs, p)
	if err == nil || !strings.Contains(err.Error(), "x.yaml:1: data: no passwords") || o.data != "" {
		t.Errorf("Load = %v, data %q; want the value refused and not set", err, o.data)
	}
}

func TestChanged(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.yaml")
	write := func(s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("log_level: info\ndata: /a\n")
	running, _ := testFlags()
	args := []string{"--config", p}
	if _, err := testBinary.Parse(running, args, nil); err != nil {
		t.Fatal(err)
	}
	write("log_level: debug\ndata: /b\ncount: 1\n")
	build := func() *flag.FlagSet { fs, _ := testFlags(); return fs }
	_, reload, restart, err := testBinary.Reread(running, build, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(reload, []string{"log_level"}) || !cmp.Equal(restart, []string{"data"}) {
		t.Errorf("Reread = reload %q, restart %q; want [log_level], [data]", reload, restart)
	}
	write("log_level: [\n")
	if _, _, _, err := testBinary.Reread(running, build, args, nil); err == nil {
		t.Error("Reread of a broken file = nil error")
	}
}

func TestSections(t *testing.T) {
	doc := []byte("intro\n<!-- BEGIN GENERATED a -->\nold\n<!-- END GENERATED a -->\nend\n")
	out, err := ReplaceSection(doc, "a", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Section(out, "a"); got != "new\n" {
		t.Errorf("Section after ReplaceSection = %q", got)
	}
	if _, err := Section(doc, "b"); err == nil {
		t.Error("Section(missing) = nil error")
	}
	fs, _ := testFlags()
	ref := testBinary.Reference(fs)
	if !strings.Contains(ref, "| `tls.cert_file` | `LATCH_TEST_TLS_CERT_FILE` | `--tls-cert-file` (deprecated: `--tls-cert`) |") {
		t.Errorf("Reference lacks the tls.cert_file row:\n%s", ref)
	}
}

// FuzzLoad: no file makes Load panic.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{"data: a\n", "tls: {cert_file: x}\n", "actor: [a, *b]\n", "a: &x [*x]\n"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		p := filepath.Join(dir, "f.yaml")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		fs, _ := testFlags()
		_ = testBinary.Load(fs, p)
	})
}
