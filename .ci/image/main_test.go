package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// repoRoot is Latch's checkout, two levels up from .ci/image.
const repoRoot = "../.."

// testRelease returns a release directory, its version and the platforms
// it holds: LATCH_DIST (CI passes .ci/release's output, both platforms),
// else one built here for this machine's platform only.
func testRelease(t *testing.T) (dist, version string, platforms []string) {
	t.Helper()
	if d := os.Getenv("LATCH_DIST"); d != "" {
		return d, os.Getenv("LATCH_DIST_VERSION"), []string{"linux/amd64", "linux/arm64"}
	}
	if runtime.GOOS != "linux" {
		t.Skip("the image holds linux binaries; set LATCH_DIST to a release directory to test on another OS")
	}
	dist, version = t.TempDir(), "v0.0.0-imagetest"
	for _, pkg := range []string{"controlplane/cmd/latch", "mcpfront/cmd/latch-mcp", "hostagent/cmd/latch-hostagent"} {
		out := filepath.Join(dist, fmt.Sprintf("%s_%s_linux_%s", filepath.Base(pkg), version, runtime.GOARCH))
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags",
			"-s -w -buildid= -X github.com/latchhq/latch/internal/buildinfo.version="+version, "-o", out, "./"+pkg)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return dist, version, []string{"linux/" + runtime.GOARCH}
}

// gitCommit is the checkout's commit and its time, the labels' source
// when the binaries carry no VCS stamp (a worktree).
func gitCommit(t *testing.T) (rev, created string) {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot, "show", "-s", "--format=%H %cI").Output()
	if err != nil {
		t.Fatalf("git show: %v", err)
	}
	rev, created, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	return rev, created
}

// TestImage builds the image twice, checks that both builds are identical,
// that each platform's config says what a runtime needs (entrypoint, the
// non-root user, the volume, the labels), then unpacks this machine's
// platform and runs its binaries from the root filesystem.
func TestImage(t *testing.T) {
	dist, version, platforms := testRelease(t)
	rev, created := gitCommit(t)
	opts := func(out string) Options {
		return Options{Dist: dist, Out: out, Version: version, Revision: rev, Created: created,
			Source: "https://github.com/latchhq/latch", CACerts: "/etc/ssl/certs/ca-certificates.crt", Platforms: platforms}
	}
	first := filepath.Join(t.TempDir(), "image")
	d1, err := Build(opts(first))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Build(opts(filepath.Join(t.TempDir(), "image")))
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("two builds of one release give index %s and %s, want identical", d1, d2)
	}

	lp, err := layout.FromPath(first)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topm.Manifests) != 1 || topm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("index.json = %+v, want one index named %s", topm.Manifests, version)
	}
	idx, err := top.ImageIndex(topm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range im.Manifests {
		got = append(got, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if !slices.Equal(got, platforms) {
		t.Fatalf("index platforms = %v, want %v", got, platforms)
	}
	createdAt, _ := time.Parse(time.RFC3339, created)
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != m.Platform.Architecture || cf.OS != "linux" {
			t.Errorf("%s: config platform %s/%s", m.Platform.Architecture, cf.OS, cf.Architecture)
		}
		if !cf.Created.Equal(createdAt) {
			t.Errorf("%s: created %v, want the commit's time %v", m.Platform.Architecture, cf.Created, createdAt)
		}
		want := v1.Config{
			User:         "65532:65532",
			Entrypoint:   []string{"/usr/local/bin/latch"},
			Cmd:          []string{"--help"},
			WorkingDir:   "/var/lib/latch",
			Env:          []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			Volumes:      map[string]struct{}{"/var/lib/latch": {}},
			ExposedPorts: map[string]struct{}{"7400/tcp": {}, "7410/tcp": {}, "7411/tcp": {}},
			Labels: map[string]string{
				"org.opencontainers.image.title":       "latch",
				"org.opencontainers.image.description": cf.Config.Labels["org.opencontainers.image.description"],
				"org.opencontainers.image.version":     version,
				"org.opencontainers.image.revision":    rev,
				"org.opencontainers.image.source":      "https://github.com/latchhq/latch",
				"org.opencontainers.image.created":     createdAt.UTC().Format(time.RFC3339),
			},
		}
		if diff := cmp.Diff(want, cf.Config); diff != "" {
			t.Errorf("%s: image config (-want +got):\n%s", m.Platform.Architecture, diff)
		}
		size := int64(0)
		layers, _ := img.Layers()
		for _, l := range layers {
			s, _ := l.Size()
			size += s
		}
		t.Logf("%s: %d layers, %.1f MB compressed", m.Platform.Architecture, len(layers), float64(size)/1e6)
		if m.Platform.Architecture == runtime.GOARCH {
			runFromRootFS(t, img, version)
		}
	}
}

// runFromRootFS unpacks img's root filesystem, checks its accounts and the
// data volume's owner, and runs the three binaries from it: chrooted into
// it as the image's user when the test runs as root (CI), else directly.
func runFromRootFS(t *testing.T, img v1.Image, version string) {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	headers := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[strings.TrimSuffix(h.Name, "/")] = h
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			// Extract walks the layers top first: a file may come before its directory.
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("unexpected entry %s of type %c in the image", h.Name, h.Typeflag)
		}
	}
	if h := headers["var/lib/latch"]; h == nil || h.Uid != 65532 || h.Gid != 65532 || h.Mode&0o777 != 0o700 {
		t.Errorf("var/lib/latch = %+v, want a directory 0700 owned by 65532:65532", h)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !bytes.Contains(passwd, []byte("\nlatch:x:65532:65532:")) {
		t.Errorf("etc/passwd = %q (%v), want the latch user 65532", passwd, err)
	}
	if h := headers["etc/ssl/certs/ca-certificates.crt"]; h == nil || h.Size == 0 {
		t.Errorf("the image has no CA bundle")
	}
	asRoot := os.Geteuid() == 0
	for _, c := range []struct {
		bin  string
		args []string
		want string
	}{
		{"latch", []string{"version"}, "latch " + version + "\n"},
		{"latch-hostagent", []string{"version"}, "latch-hostagent " + version + "\n"},
		{"latch-mcp", []string{"--version"}, "latch-mcp " + version + "\n"},
	} {
		var cmd *exec.Cmd
		if asRoot {
			// The image's own view: its root, its user, its PATH.
			cmd = exec.Command("/usr/local/bin/"+c.bin, c.args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
			cmd.Dir = "/"
			cmd.Env = []string{"PATH=/usr/local/bin"}
		} else {
			cmd = exec.Command(filepath.Join(root, "usr/local/bin", c.bin), c.args...)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c.want) {
			t.Errorf("%s %v from the image (chroot %v) = %q, %v; want it to start with %q", c.bin, c.args, asRoot, out, err, c.want)
		}
	}
}
