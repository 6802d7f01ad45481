package sshdial

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/internal/testing/sshtest"
	"github.com/latchhq/latch/internal/testing/testbin"
)

func TestExec(t *testing.T) {
	_, target := serverWithKey(t, sshtest.Options{})
	c, err := newPool(t, func(c *Config) { c.MaxOutput = 16 }).Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client: %v", err)
	}
	tests := []struct {
		name  string
		argv  []string
		stdin string
		want  ExecResult
	}{
		{
			name: "output and exit 0",
			argv: []string{"echo", "hello"},
			want: ExecResult{Stdout: []byte("hello\n"), StdoutBytes: 6},
		},
		{
			name: "exit status and stderr",
			argv: []string{"sh", "-c", "echo oops >&2; exit 3"},
			want: ExecResult{ExitCode: 3, Stderr: []byte("oops\n"), StderrBytes: 5},
		},
		{
			name: "arguments stay arguments",
			argv: []string{"printf", "%s|", "a b", "$HOME", "it's", "`id`", ";rm", ""},
			want: ExecResult{Stdout: []byte("a b|$HOME|it's|`"), StdoutBytes: 25, StdoutTruncated: true},
		},
		{
			name:  "stdin",
			argv:  []string{"cat"},
			stdin: "from stdin",
			want:  ExecResult{Stdout: []byte("from stdin"), StdoutBytes: 10},
		},
		{
			name: "output capped",
			argv: []string{"sh", "-c", "printf '%040d' 0"},
			want: ExecResult{Stdout: []byte(strings.Repeat("0", 16)), StdoutBytes: 40, StdoutTruncated: true},
		},
		{
			name: "command not found",
			argv: []string{"/nonexistent/latch-migrate"},
			want: ExecResult{ExitCode: 127},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdin *strings.Reader
			if tt.stdin != "" {
				stdin = strings.NewReader(tt.stdin)
			}
			var got ExecResult
			var err error
			if stdin != nil {
				got, err = c.Exec(ctxT(t), tt.argv, stdin)
			} else {
				got, err = c.Exec(ctxT(t), tt.argv, nil)
			}
			if err != nil {
				t.Fatalf("Exec(%q): %v", tt.argv, err)
			}
			if tt.want.Stderr == nil && tt.want.ExitCode == 127 {
				got.Stderr, got.StderrBytes, got.StderrTruncated = nil, 0, false // shell's wording varies
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Exec(%q) mismatch (-want +got):\n%s", tt.argv, diff)
			}
		})
	}
}

func TestExecNotSent(t *testing.T) {
	tests := []struct {
		name string
		opts sshtest.Options
	}{
		{"session refused", sshtest.Options{RefuseSessions: true}},
		{"exec refused", sshtest.Options{RefuseExec: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, target := serverWithKey(t, tt.opts)
			c, err := newPool(t, nil).Client(ctxT(t), target)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Exec(ctxT(t), []string{"true"}, nil)
			if !errors.Is(err, ErrNotSent) || errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("Exec() error = %v, want ErrNotSent only", err)
			}
		})
	}
}

func TestExecBadCommand(t *testing.T) {
	_, target := serverWithKey(t, sshtest.Options{})
	c, err := newPool(t, nil).Client(ctxT(t), target)
	if err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{nil, {""}, {"echo", "a\x00b"}} {
		if _, err := c.Exec(ctxT(t), argv, nil); !errors.Is(err, ErrBadCommand) {
			t.Errorf("Exec(%q) error = %v, want ErrBadCommand", argv, err)
		}
	}
}

func TestExecDropIsOutcomeUnknown(t *testing.T) {
	started := make(chan struct{}, 1)
	srv, target := serverWithKey(t, sshtest.Options{Handler: blockingHandler(started)})
	c, err := newPool(t, nil).Client(ctxT(t), target)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctxT(t), []string{"/opt/app/bin/migrate", "--to", "42"}, nil)
		errc <- err
	}()
	<-started
	srv.DropAll()
	err = <-errc
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotSent) || !IsDrop(err) {
		t.Fatalf("Exec() error = %v, want ErrOutcomeUnknown (a drop)", err)
	}
}

func TestExecCancelIsOutcomeUnknown(t *testing.T) {
	started := make(chan struct{}, 1)
	_, target := serverWithKey(t, sshtest.Options{Handler: blockingHandler(started)})
	c, err := newPool(t, nil).Client(ctxT(t), target)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, []string{"sleep", "600"}, nil)
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec() error = %v, want ErrOutcomeUnknown caused by context.Canceled", err)
	}
	if c.Err() != nil {
		t.Errorf("cancelling one command ended the connection: %v", c.Err())
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "''"},
		{"plain", "plain"},
		{"/opt/app/bin/migrate", "/opt/app/bin/migrate"},
		{"--to=42", "'--to=42'"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"~root", "'~root'"},
		{"#x", "'#x'"},
		{"a\nb", "'a\nb'"},
		{"*", "'*'"},
	}
	for _, tt := range tests {
		if got := ShellQuote(tt.in); got != tt.want {
			t.Errorf("ShellQuote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestShellJoinRoundTrip runs the quoted line through a real /bin/sh and
// checks it parses back into the same argv.
func TestShellJoinRoundTrip(t *testing.T) {
	cases := [][]string{
		{""},
		{"", " ", "a b", "it's", `"q"`, "\\", "$(id)", "`id`", "a;b", "a|b", "a&b", "*", "?", "[a]",
			"~", "#c", "x=1", "{a,b}", "\n", "\t", "!", "é ü", "'", "''", "\\'"},
	}
	for _, argv := range cases {
		checkRoundTrip(t, argv)
	}
}

func FuzzShellJoin(f *testing.F) {
	for _, s := range []string{"", "a b", "it's", "$(id)", "'\"\\", "\n#~*"} {
		f.Add(s, "x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.IndexByte(a, 0) >= 0 || strings.IndexByte(b, 0) >= 0 {
			if _, err := ShellJoin([]string{"printf", a, b}); !errors.Is(err, ErrBadCommand) {
				t.Fatalf("ShellJoin with NUL: error = %v, want ErrBadCommand", err)
			}
			return
		}
		checkRoundTrip(t, []string{a, b})
	})
}

func checkRoundTrip(t *testing.T, args []string) {
	t.Helper()
	line, err := ShellJoin(append([]string{"printf", `%s\0`}, args...))
	if err != nil {
		t.Fatalf("ShellJoin: %v", err)
	}
	out, err := exec.Command("/bin/sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if diff := cmp.Diff(args, got); diff != "" {
		t.Errorf("sh parsed %q differently (-want +got):\n%s", line, diff)
	}
}

// TestRotatedKeyRetiresTheOldConnection: a target asked for with a new
// client key gets a new connection, while a command still running on the
// old one finishes there and is observed; the old connection closes after.
func TestRotatedKeyRetiresTheOldConnection(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{}) // accepts any client key
	target := Target{Name: "web-01", Address: srv.Addr(), User: "deploy", HostKey: srv.HostKey(), Signer: sshtest.NewSigner(t)}
	pool := newPool(t, nil)
	old, err := pool.Client(ctxT(t), target)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	began, gate := filepath.Join(dir, "began"), filepath.Join(dir, "gate")
	type result struct {
		res ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := old.Exec(ctxT(t), []string{"/bin/sh", "-c", `: > "` + began + `"; i=0; while [ ! -e "` + gate + `" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; echo finished`}, nil)
		done <- result{res, err}
	}()
	testbin.Eventually(t, "command running", func() bool { _, err := os.Stat(began); return err == nil })

	rotated := target
	rotated.Signer = sshtest.NewSigner(t)
	cur, err := pool.Client(ctxT(t), rotated)
	if err != nil {
		t.Fatal(err)
	}
	if cur == old || srv.Accepted() != 2 {
		t.Fatalf("after the key changed: same client %v, connections %d; want a second connection", cur == old, srv.Accepted())
	}
	if old.Err() != nil {
		t.Fatalf("the old connection closed while its command ran: %v", old.Err())
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || string(r.res.Stdout) != "finished\n" {
		t.Fatalf("command on the retired connection = %q, %v; want it to finish", r.res.Stdout, r.err)
	}
	testbin.Eventually(t, "the retired connection to close", func() bool { return old.Err() != nil })
	if _, err := cur.Exec(ctxT(t), []string{"true"}, nil); err != nil {
		t.Errorf("the new connection: %v", err)
	}
}
