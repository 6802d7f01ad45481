package tracing

import (
	"context"
	"net/http"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestConfigured(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := Configured(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("Configured(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceparentRoundTrip(t *testing.T) {
	ctx := WithTraceparent(context.Background(), tp, "vendor=x")
	if got := Traceparent(ctx); got != tp {
		t.Errorf("Traceparent(WithTraceparent(%q)) = %q", tp, got)
	}
	h := http.Header{}
	InjectHeader(ctx, h)
	if h.Get("traceparent") != tp || h.Get("tracestate") != "vendor=x" {
		t.Errorf("InjectHeader set %v", h)
	}
	// Across a gRPC hop: the client side's metadata is the server side's.
	md, _ := metadata.FromOutgoingContext(outgoing(ctx))
	in := Incoming(metadata.NewIncomingContext(context.Background(), md))
	if got := Traceparent(in); got != tp {
		t.Errorf("after the gRPC hop, traceparent = %q, want %q", got, tp)
	}
}

func TestBadTraceparentIsIgnored(t *testing.T) {
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		if got := Traceparent(WithTraceparent(context.Background(), bad, "")); got != "" {
			t.Errorf("WithTraceparent(%q) kept %q, want nothing", bad, got)
		}
	}
}

// FuzzWithTraceparent: a client's trace context never panics and never
// comes back as something that is not a valid traceparent.
func FuzzWithTraceparent(f *testing.F) {
	f.Add(tp, "a=b")
	f.Add("00-xyz", "")
	f.Fuzz(func(t *testing.T, traceparent, tracestate string) {
		out := Traceparent(WithTraceparent(context.Background(), traceparent, tracestate))
		if out != "" && len(out) != len(tp) {
			t.Errorf("WithTraceparent(%q) gave %q", traceparent, out)
		}
	})
}
