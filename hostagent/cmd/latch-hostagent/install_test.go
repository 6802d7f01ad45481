package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// release writes a release directory as .ci/release lays it out: the
// binary (this test's build of latch-hostagent, plus a suffix so that two
// releases differ), the unit, an optional config and SHA256SUMS.
func release(t *testing.T, version, extra, config string) string {
	t.Helper()
	dir := t.TempDir()
	bin, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("latch-hostagent.service")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		fmt.Sprintf("latch-hostagent_%s_linux_%s", version, runtime.GOARCH): append(bin, extra...),
		"latch-hostagent.service": unit,
	}
	if config != "" {
		files["latch-hostagent.yaml"] = []byte(config)
	}
	var names []string
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var sums strings.Builder
	for _, n := range names {
		h := sha256.Sum256(files[n])
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(h[:]), n)
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// install runs the script with sh (dash on Debian: the script is POSIX) and
// returns its output and exit status.
func install(t *testing.T, root string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"install-hostagent.sh", "--root", root, "--arch", runtime.GOARCH}, args...)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("run install-hostagent.sh: %v", err)
	return "", 0
}

// snapshot is every file under root with its contents, mode and inode:
// the script writes through a new file and a rename, so two equal
// snapshots mean a run wrote nothing.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		ino := uint64(0)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		out[strings.TrimPrefix(p, root)] = fmt.Sprintf("%x %s %d", h, fi.Mode(), ino)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInstallScript walks an installation's life: a first install, a
// second run that changes nothing, an upgrade that replaces the untouched
// config, an upgrade that finds the config changed locally and keeps it,
// and releases the script must refuse.
func TestInstallScript(t *testing.T) {
	root := t.TempDir()
	v1 := release(t, "v1.0.0", "", "socket: /run/latch-hostagent/agent.sock\n")
	cfg := filepath.Join(root, "etc/latch/latch-hostagent.yaml")

	out, code := install(t, root, v1)
	if code != 0 {
		t.Fatalf("first install: exit %d\n%s", code, out)
	}
	bin := filepath.Join(root, "usr/local/bin/latch-hostagent")
	if v, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(v), "latch-hostagent ") {
		t.Errorf("installed binary: version = %q, %v", v, err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed binary mode = %v, %v; want 0755", fi.Mode(), err)
	}
	// The release's unit, running the binary where the script put it.
	wantUnit := strings.Replace(readFile(t, "latch-hostagent.service"), "\nExecStart=/usr/bin/latch-hostagent ", "\nExecStart=/usr/local/bin/latch-hostagent ", 1)
	if !strings.Contains(wantUnit, "\nExecStart=/usr/local/bin/latch-hostagent ") {
		t.Fatalf("latch-hostagent.service has no ExecStart=/usr/bin/latch-hostagent line")
	}
	if readFile(t, filepath.Join(root, "etc/systemd/system/latch-hostagent.service")) != wantUnit {
		t.Errorf("the installed unit is not the release's with ExecStart pointing at /usr/local/bin/latch-hostagent")
	}
	if got := readFile(t, cfg); got != "socket: /run/latch-hostagent/agent.sock\n" {
		t.Errorf("installed config = %q", got)
	}

	before := snapshot(t, root)
	out, code = install(t, root, v1)
	if code != 0 || !strings.Contains(out, "nothing changed") {
		t.Errorf("second run: exit %d, output %q; want 0 and \"nothing changed\"", code, out)
	}
	if after := snapshot(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("second run changed files:\nbefore %v\nafter  %v", before, after)
	}

	// An upgrade: new binary, new config, the old config untouched here.
	v2 := release(t, "v1.1.0", "\x00v2", "socket: /run/latch-hostagent/agent.sock\nlog_level: info\n")
	out, code = install(t, root, v2)
	if code != 0 || !strings.Contains(out, "updated  "+bin) || !strings.Contains(out, "updated  "+cfg) {
		t.Errorf("upgrade: exit %d, output %q; want the binary and the untouched config updated", code, out)
	}
	if got := readFile(t, cfg); !strings.Contains(got, "log_level") {
		t.Errorf("upgrade left config %q, want the release's", got)
	}

	// The operator edits the config; the next release must not overwrite it.
	local := "socket: /srv/agent.sock # ours\n"
	if err := os.WriteFile(cfg, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	v3 := release(t, "v1.2.0", "\x00v3", "socket: /run/latch-hostagent/agent.sock\nlog_level: warn\n")
	out, code = install(t, root, v3)
	if code != 3 || !strings.Contains(out, "kept") {
		t.Errorf("upgrade over a changed config: exit %d, output %q; want 3 and \"kept\"", code, out)
	}
	if got := readFile(t, cfg); got != local {
		t.Errorf("changed config = %q after the upgrade, want it kept (%q)", got, local)
	}
	if got := readFile(t, cfg+".new"); !strings.Contains(got, "log_level: warn") {
		t.Errorf("%s.new = %q, want the release's config", cfg, got)
	}
	before = snapshot(t, root)
	if out, code = install(t, root, v3); code != 3 || !strings.Contains(out, "already at") {
		t.Errorf("second run over a changed config: exit %d, output %q; want 3 and the .new already there", code, out)
	}
	if after := snapshot(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("second run over a changed config changed files")
	}

	// From a URL (a loopback server over the same directory).
	srv := httptest.NewServer(http.FileServer(http.Dir(v3)))
	defer srv.Close()
	if out, code = install(t, root, srv.URL); code != 3 || strings.Contains(out, "updated") {
		t.Errorf("install from %s: exit %d, output %q; want 3 (the kept config) and nothing updated", srv.URL, code, out)
	}
	fresh := t.TempDir()
	if out, code = install(t, fresh, srv.URL+"/"); code != 0 || !strings.Contains(out, "installed") {
		t.Errorf("fresh install from %s: exit %d, output %q", srv.URL, code, out)
	}
}

// TestInstallScriptRefuses checks the releases the script must not install
// from, and that it installs nothing from them.
func TestInstallScriptRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, dir string)
		want string
		code int
	}{
		{"tampered binary", func(t *testing.T, dir string) {
			p := filepath.Join(dir, fmt.Sprintf("latch-hostagent_v1.0.0_linux_%s", runtime.GOARCH))
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("x"); err != nil {
				t.Fatal(err)
			}
		}, "does not match SHA256SUMS", 1},
		{"unit not listed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "SHA256SUMS")
			b := readFile(t, p)
			var keep []string
			for _, l := range strings.Split(strings.TrimSpace(b), "\n") {
				if !strings.HasSuffix(l, "latch-hostagent.service") {
					keep = append(keep, l)
				}
			}
			if err := os.WriteFile(p, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "does not list latch-hostagent.service", 1},
		{"no SHA256SUMS", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "SHA256SUMS")); err != nil {
				t.Fatal(err)
			}
		}, "SHA256SUMS not found", 1},
		{"two versions", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "SHA256SUMS")
			b := readFile(t, p) + strings.Repeat("0", 64) + "  latch-hostagent_v0.9.0_linux_" + runtime.GOARCH + "\n"
			if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "pass --version", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := release(t, "v1.0.0", "", "a: 1\n")
			tc.edit(t, dir)
			root := t.TempDir()
			out, code := install(t, root, dir)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("install: exit %d, output %q; want %d and %q", code, out, tc.code, tc.want)
			}
			if got := snapshot(t, root); len(got) != 0 {
				t.Errorf("a refused release installed %v", got)
			}
		})
	}
	if out, code := install(t, t.TempDir()); code != 2 || !strings.Contains(out, "usage") {
		t.Errorf("no SOURCE: exit %d, output %q; want 2 and the usage", code, out)
	}
}
