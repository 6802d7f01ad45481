// Package buildinfo says which build a Latch binary is: the release version
// `task release` stamps into it, else the module version, plus the VCS
// revision and time `go build` records in a checkout, the Go version and
// the platform. `latch version`, `latch-mcp --version`, `latch-hostagent
// version` and the latch_build_info metric all read it here.
//
// Any package may import it; it imports nothing of Latch.
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is stamped by the release build:
//
//	go build -ldflags "-X github.com/latchhq/latch/internal/buildinfo.version=v1.2.3"
var version string

// Info is one binary's build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"revision_time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// Read returns the running binary's build. Version is "(devel)" for a
// build that recorded none (go run, go test).
func Read() Info {
	v := Info{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			v.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		v.Version = version
	}
	return v
}

// Print writes the build as `latch version` shows it: the binary's name and
// version, the revision with its time, the Go version and platform.
func (i Info) Print(w io.Writer, binary string) {
	fmt.Fprintf(w, "%s %s\n", binary, i.Version)
	if i.Revision != "" {
		mod := ""
		if i.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(w, "revision %s%s", i.Revision, mod)
		if i.Time != "" {
			fmt.Fprintf(w, ", %s", i.Time)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%s %s\n", i.GoVersion, i.Platform)
}
