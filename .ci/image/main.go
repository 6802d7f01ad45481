// Command image builds Latch's container image from a release directory
// (.ci/release's output) without a container daemon: an OCI image from
// scratch per platform (the three static binaries, CA certificates, a
// non-root user latch 65532:65532, /var/lib/latch as a volume it owns,
// org.opencontainers.image.* labels) and a multi-arch index over them,
// written as an OCI image layout directory.
//
//	go run . --dist DIST --out DIR [--version V] [--revision SHA] [--created RFC3339]
//
// The build is reproducible: every file time and the image's creation time
// are the commit's time (from the binaries' VCS stamp or --created), the
// layers are written in a fixed order, so one commit and one CA bundle give
// one index digest.
//
// It is its own module so that go-containerregistry stays out of Latch's
// go.mod; nothing imports it.
package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's account: a fixed uid/gid outside the range distributions
// give to people and system users (the "nonroot" of distroless images).
const (
	uid      = 65532
	gid      = 65532
	user     = "latch"
	dataDir  = "var/lib/latch"
	binDir   = "usr/local/bin"
	certPath = "etc/ssl/certs/ca-certificates.crt"
)

// binaries are the release's programs, all installed in /usr/local/bin.
var binaries = []string{"latch", "latch-mcp", "latch-hostagent"}

// Options is one image build.
type Options struct {
	Dist      string   // release directory: NAME_VERSION_OS_ARCH binaries
	Out       string   // OCI layout directory to write (replaced)
	Version   string   // release version; "" reads it from the file names
	Revision  string   // commit; "" reads the binaries' VCS stamp
	Created   string   // commit time, RFC 3339; "" reads the VCS stamp
	Source    string   // org.opencontainers.image.source
	CACerts   string   // PEM bundle installed as /etc/ssl/certs/ca-certificates.crt
	Platforms []string // os/arch
}

func main() {
	var o Options
	var platforms string
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.Dist, "dist", "dist", "release directory (.ci/release OUT)")
	fs.StringVar(&o.Out, "out", "", "OCI image layout directory to write (default DIST/image)")
	fs.StringVar(&o.Version, "version", "", "release version (default: from the binaries' file names)")
	fs.StringVar(&o.Revision, "revision", "", "commit (default: the binaries' vcs.revision stamp)")
	fs.StringVar(&o.Created, "created", "", "creation time, RFC 3339: the commit's time keeps the build reproducible (default: the binaries' vcs.time stamp)")
	fs.StringVar(&o.Source, "source", "https://github.com/latchhq/latch", "org.opencontainers.image.source label")
	fs.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to install (Debian's ca-certificates package)")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	o.Platforms = strings.Split(platforms, ",")
	if o.Out == "" {
		o.Out = filepath.Join(o.Dist, "image")
	}
	err := o.fill()
	var digest v1.Hash
	if err == nil {
		digest, err = Build(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("image: %s written to %s (index %s)\n", o.Version, o.Out, digest)
}

var binaryName = regexp.MustCompile(`^latch_(.+)_linux_amd64$|^latch_(.+)_linux_arm64$`)

// Build writes the OCI layout and returns the index digest. It fills o's
// empty Version, Revision and Created.
func Build(o Options) (v1.Hash, error) {
	if err := o.fill(); err != nil {
		return v1.Hash{}, err
	}
	created, err := time.Parse(time.RFC3339, o.Created)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("--created %q is not an RFC 3339 time (the commit's: git show -s --format=%%cI): %w", o.Created, err)
	}
	created = created.UTC()
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read the CA bundle (install Debian's ca-certificates or pass --ca-certs): %w", err)
	}
	base, err := layer(created, baseFiles(certs))
	if err != nil {
		return v1.Hash{}, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos != "linux" {
			return v1.Hash{}, fmt.Errorf("platform %q: want linux/ARCH", p)
		}
		img, err := o.image(base, created, goarch)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}},
		})
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return v1.Hash{}, err
	}
	lp, err := layout.Write(o.Out, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write the OCI layout %s: %w", o.Out, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
	})); err != nil {
		return v1.Hash{}, fmt.Errorf("write the OCI layout %s: %w", o.Out, err)
	}
	return idx.Digest()
}

// fill reads what was not given from the release directory: the version
// from the amd64 (else arm64) latch binary's file name, the revision and
// time from its VCS stamp.
func (o *Options) fill() error {
	ents, err := os.ReadDir(o.Dist)
	if err != nil {
		return fmt.Errorf("read the release directory (build it with .ci/release DIR): %w", err)
	}
	var latch string
	for _, e := range ents {
		if m := binaryName.FindStringSubmatch(e.Name()); m != nil {
			v := m[1] + m[2]
			if o.Version == "" {
				o.Version = v
			}
			if v == o.Version && (latch == "" || strings.HasSuffix(e.Name(), "amd64")) {
				latch = filepath.Join(o.Dist, e.Name())
			}
		}
	}
	if latch == "" {
		return fmt.Errorf("%s holds no latch_%s_linux_ARCH binary: build the release with .ci/release first", o.Dist, o.Version)
	}
	if o.Revision == "" || o.Created == "" {
		bi, err := buildinfo.ReadFile(latch)
		if err != nil {
			return fmt.Errorf("read the build stamp of %s: %w", latch, err)
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && o.Revision == "":
				o.Revision = s.Value
			case s.Key == "vcs.time" && o.Created == "":
				o.Created = s.Value
			}
		}
	}
	if o.Revision == "" || o.Created == "" {
		return errors.New("the binaries carry no VCS stamp (built outside a git clone, e.g. in a worktree): pass --revision $(git rev-parse HEAD) --created $(git show -s --format=%cI)")
	}
	return nil
}

// image is one platform's image: the base layer, a layer of its binaries,
// and the config.
func (o *Options) image(base v1.Layer, created time.Time, goarch string) (v1.Image, error) {
	var bins []file
	for _, b := range binaries {
		src := filepath.Join(o.Dist, fmt.Sprintf("%s_%s_linux_%s", b, o.Version, goarch))
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("read %s (is the release built for this platform?): %w", b, err)
		}
		bins = append(bins, file{name: binDir + "/" + b, mode: 0o755, data: data})
	}
	binLayer, err := layer(created, bins)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, base, binLayer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goarch
	cf.Created = v1.Time{Time: created}
	cf.History = nil
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, gid),
		Entrypoint: []string{"/" + binDir + "/latch"},
		Cmd:        []string{"--help"},
		WorkingDir: "/" + dataDir,
		Env:        []string{"PATH=/" + binDir, "SSL_CERT_FILE=/" + certPath},
		Volumes:    map[string]struct{}{"/" + dataDir: {}},
		ExposedPorts: map[string]struct{}{
			"7400/tcp": {}, // latch serve --grpc-listen
			"7410/tcp": {}, // the ops listener (/metrics, /healthz, /readyz)
			"7411/tcp": {}, // latch-mcp
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "latch",
			"org.opencontainers.image.description": "Latch: exactly-once execution gateway for AI agents' side-effecting tool calls (latch, latch-mcp, latch-hostagent)",
			"org.opencontainers.image.version":     o.Version,
			"org.opencontainers.image.revision":    o.Revision,
			"org.opencontainers.image.source":      o.Source,
			"org.opencontainers.image.created":     created.Format(time.RFC3339),
		},
	}
	return mutate.ConfigFile(img, cf)
}

// file is one entry of a layer: a directory when data is nil and dir is set.
type file struct {
	name     string
	mode     int64
	dir      bool
	uid, gid int
	data     []byte
}

// baseFiles are the files every platform shares: the accounts, the CA
// bundle and the directories a process expects (/tmp, the data volume).
func baseFiles(certs []byte) []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:latch:/%s:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n", user, uid, gid, dataDir)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", user, gid)
	return []file{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl", dir: true, mode: 0o755},
		{name: "etc/ssl/certs", dir: true, mode: 0o755},
		{name: certPath, mode: 0o644, data: certs},
		{name: "tmp", dir: true, mode: 0o1777},
		{name: "usr", dir: true, mode: 0o755},
		{name: "usr/local", dir: true, mode: 0o755},
		{name: binDir, dir: true, mode: 0o755},
		{name: "var", dir: true, mode: 0o755},
		{name: "var/lib", dir: true, mode: 0o755},
		// latch serve keeps its store, journal and control socket here: 0700
		// like the systemd unit's StateDirectoryMode.
		{name: dataDir, dir: true, mode: 0o700, uid: uid, gid: gid},
	}
}

// layer is a gzip-compressed OCI layer of files, in the order given, every
// time set to mtime.
func layer(mtime time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: mtime, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
