package tracing

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The gRPC hop carries W3C trace context in metadata (traceparent,
// tracestate), as otelgrpc does, without spans of its own: the spans that
// matter are Latch's (submit, dispatch, recovery query), not one per RPC.

func outgoing(ctx context.Context) context.Context {
	tp := Traceparent(ctx)
	if tp == "" {
		return ctx
	}
	kv := []string{HeaderTraceparent, tp}
	c := map[string]string{}
	InjectHeader(ctx, mapSetter(c))
	if ts := c[HeaderTracestate]; ts != "" {
		kv = append(kv, HeaderTracestate, ts)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

type mapSetter map[string]string

func (m mapSetter) Set(k, v string) { m[k] = v }

// Incoming returns ctx with the remote span context of an incoming gRPC
// call's metadata, when it carries one.
func Incoming(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	tp := md.Get(HeaderTraceparent)
	if len(tp) == 0 {
		return ctx
	}
	var ts string
	if v := md.Get(HeaderTracestate); len(v) > 0 {
		ts = v[0]
	}
	return WithTraceparent(ctx, tp[0], ts)
}

// UnaryClient sends ctx's trace context with each unary call.
func UnaryClient() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(outgoing(ctx), method, req, reply, cc, opts...)
	}
}

// StreamClient sends ctx's trace context with each streaming call.
func StreamClient() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(outgoing(ctx), desc, cc, method, opts...)
	}
}

// UnaryServer puts an incoming call's trace context into its ctx.
func UnaryServer() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(Incoming(ctx), req)
	}
}

// StreamServer puts an incoming stream's trace context into its ctx.
func StreamServer() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &tracedStream{ServerStream: ss, ctx: Incoming(ss.Context())})
	}
}

type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *tracedStream) Context() context.Context { return s.ctx }
