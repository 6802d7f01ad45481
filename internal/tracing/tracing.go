// Package tracing sets up OpenTelemetry traces for Latch's binaries and
// carries W3C trace context across their boundaries: gRPC metadata (front →
// control plane → host agent), HTTP headers (control plane → targets), an
// MCP request's `_meta.traceparent` and a command's TRACEPARENT variable.
//
// Tracing is off unless the standard OTLP variables name an endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
// spans are then exported over OTLP/HTTP, configured by the other
// OTEL_EXPORTER_OTLP_* variables the exporter reads itself. Library code
// receives a trace.TracerProvider in its Config and never touches the
// global one. Imported by the three binaries' packages; it imports nothing
// of Latch's.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Names of the span attributes every Latch span about an execution carries.
const (
	AttrExecutionID = attribute.Key("latch.execution_id")
	AttrTool        = attribute.Key("latch.tool")
	AttrDisposition = attribute.Key("latch.disposition")
	AttrState       = attribute.Key("latch.state")
)

// Header names of W3C trace context (lowercase: gRPC metadata keys are).
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
	// EnvTraceparent is the variable a host-agent command receives.
	EnvTraceparent = "TRACEPARENT"
)

// Provider is a tracer provider and the function that flushes and stops it.
type Provider struct {
	trace.TracerProvider
	shutdown func(context.Context) error
}

// Shutdown flushes pending spans and stops the exporter; a no-op when
// tracing is off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.shutdown == nil {
		return nil
	}
	return p.shutdown(ctx)
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.shutdown != nil }

// Configured reports whether getenv names an OTLP endpoint and tracing is
// not disabled (OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none).
func Configured(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv builds the provider of a binary named service (the resource's
// service.name unless OTEL_SERVICE_NAME says otherwise): an OTLP/HTTP
// exporter with a batching processor when Configured(os.Getenv), else a
// no-op provider.
//
// With tracing on, it routes the OTel SDK's errors (a collector that cannot
// be reached, say) to log at warn level, so they keep the binary's log format:
// that handler is process-global, which is why only the binaries call
// FromEnv.
func FromEnv(ctx context.Context, service, version string, log hclog.Logger) (*Provider, error) {
	if !Configured(os.Getenv) {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	if log != nil {
		l := log.Named("otel")
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { l.Warn("trace export failed", "error", err) }))
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP/HTTP exporter (check the OTEL_EXPORTER_OTLP_* variables): %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES override
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource (check OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{TracerProvider: tp, shutdown: tp.Shutdown}, nil
}

// OrNoop returns tp, or a no-op provider when tp is nil.
func OrNoop(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return noop.NewTracerProvider()
	}
	return tp
}

var propagator = propagation.TraceContext{}

// Traceparent is the W3C traceparent of ctx's span, or "" when ctx holds no
// valid span context.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "" // what the propagator injects then, without its map
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[HeaderTraceparent]
}

// WithTraceparent returns ctx with the remote span context traceparent
// names (and tracestate, which may be ""). An invalid or empty traceparent
// leaves ctx as it is: trace context from a client is a hint, never an
// error.
func WithTraceparent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{HeaderTraceparent: traceparent, HeaderTracestate: tracestate})
}

// InjectHeader sets traceparent (and tracestate) on h from ctx's span.
func InjectHeader(ctx context.Context, h interface{ Set(string, string) }) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return // TraceContext injects nothing for it
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	for k, v := range c {
		h.Set(k, v)
	}
}
