package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// probeControlPlane asks the control plane's health service once at start.
// A refusal (this front's certificate or uid is not listed by `latch
// serve`) is fatal: every call would fail. A control plane that does not
// answer yet is only logged: calls wait for it.
func probeControlPlane(ctx context.Context, conn grpc.ClientConnInterface, target string, log hclog.Logger) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(pctx, &healthpb.HealthCheckRequest{})
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.PermissionDenied:
		return fmt.Errorf("the control plane at %s refuses this front: %s (list this front's certificate identity with `latch serve --front-identity`, or its uid with --front-uid)", target, status.Convert(err).Message())
	}
	log.Warn("the control plane does not answer yet; calls will wait for it (check --control-plane and --tls-*; a refused TLS handshake is in the control plane's log)", "control_plane", target, "error", err)
	return nil
}
