package opshttp

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// NewRegistry is a binary's registry: the Go runtime and process
// collectors and latch_build_info.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	version, revision := Build()
	promauto.With(reg).NewGauge(prometheus.GaugeOpts{
		Name: "latch_build_info", Help: "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision},
	}).Set(1)
	return reg
}

// Build is the module version and VCS revision the binary was built from
// ("(devel)" and "unknown" when the build did not record them).
func Build() (version, revision string) {
	version, revision = "(devel)", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, revision
	}
	if v := bi.Main.Version; v != "" {
		version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			revision = s.Value
		}
	}
	return version, revision
}
