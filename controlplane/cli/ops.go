package cli

import (
	"flag"
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/stack"
	"github.com/latchhq/latch/internal/config"
	"github.com/latchhq/latch/internal/loopback"
)

// devOpsListen is where `latch dev` serves /metrics, /healthz and /readyz.
const devOpsListen = "127.0.0.1:7410"

// opsFlags are the ops listener's and the log format's flags, shared by
// serve and dev.
type opsFlags struct {
	listen, cert, key string
	logFormat         string
	// advertise is the URL browsers reach the ops listener at (standbys
	// send them there while this replica is active).
	advertise string
}

func addOpsFlags(fs *flag.FlagSet, defaultListen string) *opsFlags {
	o := &opsFlags{}
	what := "serve /metrics, /healthz, /readyz and the console (/ui/) on this address (e.g. 127.0.0.1:7410); TLS required unless loopback"
	if defaultListen != "" {
		what = "address of /metrics, /healthz, /readyz and the console /ui/ (TLS required unless loopback)"
	}
	fs.StringVar(&o.listen, "ops-listen", defaultListen, what)
	fs.StringVar(&o.cert, "ops-tls-cert-file", "", "with --ops-listen: serve HTTPS with this certificate (PEM)")
	fs.StringVar(&o.key, "ops-tls-key-file", "", "with --ops-listen: the certificate's key (PEM)")
	fs.StringVar(&o.advertise, "ops-advertise", "", "with --ops-listen and a PostgreSQL --store: the URL browsers reach this replica's console at (e.g. https://ops-a.example:7410), where standbys send them while it is active (default: the --ops-listen URL)")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json (one JSON object per line)")
	config.Alias(fs, "http-listen", "ops-listen")
	config.Alias(fs, "http-tls-cert", "ops-tls-cert-file")
	config.Alias(fs, "http-tls-key", "ops-tls-key-file")
	config.Alias(fs, "http-advertise", "ops-advertise")
	return o
}

func (o *opsFlags) validate(level string) error {
	if o.logFormat != "text" && o.logFormat != "json" {
		return usagef("--log-format %q is not text or json", o.logFormat)
	}
	if hclog.LevelFromString(level) == hclog.NoLevel {
		return usagef("--log-level %q is not one of trace, debug, info, warn, error", level)
	}
	if (o.cert != "" || o.key != "") && o.listen == "" {
		return usagef("--ops-tls-cert-file and --ops-tls-key-file need --ops-listen")
	}
	if o.listen != "" && o.cert == "" && !loopback.HostPort(o.listen) {
		return usagef("--ops-listen %s is not a loopback address: pass --ops-tls-cert-file and --ops-tls-key-file, or a loopback address", o.listen)
	}
	return nil
}

// formattedLogger is the root logger of serve and dev.
func formattedLogger(w io.Writer, level, format string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "latch", Level: hclog.LevelFromString(level), Output: w, JSONFormat: format == "json"})
}

// config is the stack's ops listener configuration.
func (o *opsFlags) config() stack.OpsConfig {
	return stack.OpsConfig{Listen: o.listen, TLSCert: o.cert, TLSKey: o.key, Advertise: o.advertise}
}
