package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/loopback"
	"github.com/latchhq/latch/mcpfront/auth"
)

// defaultResource is http://LISTEN/mcp on a loopback listen address, and ""
// (no default: --oauth-resource is required) otherwise.
func defaultResource(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || !loopback.HostPort(listen) {
		return ""
	}
	return "http://" + listen + "/mcp"
}

// newVerifier builds the verifier and fetches every issuer's keys once, so
// that a wrong issuer or JWKS URL shows at start. A failure there is logged,
// not fatal: the issuer may come up later and the verifier retries on use.
func newVerifier(ctx context.Context, cfg auth.JWTConfig, logger hclog.Logger) (*auth.JWTVerifier, error) {
	cfg.Logger = logger
	v, err := auth.NewJWTVerifier(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := v.Warm(wctx); err != nil {
		logger.Warn("OAuth issuer keys not available yet; JWTs are refused until they are", "error", err)
	}
	return v, nil
}
