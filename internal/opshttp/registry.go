package opshttp

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/latchhq/latch/internal/buildinfo"
)

// NewRegistry is a binary's registry: the Go runtime and process
// collectors and latch_build_info.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	b := buildinfo.Read()
	revision := b.Revision
	if revision == "" {
		revision = "unknown"
	}
	promauto.With(reg).NewGauge(prometheus.GaugeOpts{
		Name: "latch_build_info", Help: "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": revision},
	}).Set(1)
	return reg
}
