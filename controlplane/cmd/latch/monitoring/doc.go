// Package monitoring holds what Latch ships for an operator's monitoring
// stack, next to the latch binary: alerts.yml (Prometheus alert rules, with
// their promtool unit tests in alerts_test.yml) and dashboard.json (a
// Grafana dashboard). It has no Go code; its test validates the rules with
// promtool when installed and checks that every metric the rules and the
// dashboard use is one the binaries register, and that docs/reference/observability.md's metrics
// table names every one of them. Nothing imports it.
package monitoring
