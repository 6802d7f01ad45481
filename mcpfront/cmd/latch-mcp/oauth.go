package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/loopback"
	"github.com/latchhq/latch/mcpfront/auth"
)

// oauthOptions are the --oauth-* flags: the front as an OAuth 2.1 resource
// server (README "Agent identity: OAuth 2.1 / JWT").
type oauthOptions struct {
	issuers     stringList
	jwksURLs    stringList
	resource    string
	actorClaim  string
	actorPrefix string
	actorMap    stringList
}

func (o *oauthOptions) register(fs *flag.FlagSet) {
	fs.Var(&o.issuers, "oauth-issuer", "trusted OAuth authorization server (issuer URL, exactly as in the tokens' iss; repeatable); turns on JWT access tokens")
	fs.Var(&o.jwksURLs, "oauth-jwks-url", "JWKS URL of the issuer, instead of discovering it from the issuer's metadata; ISSUER=URL when several issuers are configured (repeatable)")
	fs.StringVar(&o.resource, "oauth-resource", "", "this front's resource URL, the audience tokens must carry (default http://LISTEN/mcp on a loopback --listen; required otherwise)")
	fs.StringVar(&o.actorClaim, "oauth-actor-claim", auth.DefaultActorClaim, "JWT claim whose string value is the actor")
	fs.StringVar(&o.actorPrefix, "oauth-actor-prefix", "", "prefix put before the claim value to make the actor (e.g. \"oidc:\" keeps IdP users apart from static-token actors)")
	fs.Var(&o.actorMap, "oauth-actor-map", "CLAIMVALUE=ACTOR (repeatable); when given, only listed claim values are accepted, as the mapped actor")
}

func (o *oauthOptions) enabled() bool { return len(o.issuers) > 0 }

// config checks the flags and returns the verifier's configuration; every
// error is a usage error.
func (o *oauthOptions) config(listen string) (auth.JWTConfig, error) {
	var cfg auth.JWTConfig
	if !o.enabled() {
		if len(o.jwksURLs) > 0 || o.resource != "" || len(o.actorMap) > 0 || o.actorPrefix != "" {
			return cfg, fmt.Errorf("%w: --oauth-jwks-url, --oauth-resource, --oauth-actor-map and --oauth-actor-prefix need --oauth-issuer URL", errUsage)
		}
		return cfg, nil
	}
	jwks := map[string]string{}
	for _, v := range o.jwksURLs {
		iss, u := "", v
		if i := strings.Index(v, "=http"); i > 0 {
			iss, u = v[:i], v[i+1:]
		} else if len(o.issuers) == 1 {
			iss = o.issuers[0]
		} else {
			return cfg, fmt.Errorf("%w: --oauth-jwks-url %s: with several --oauth-issuer, write ISSUER=URL", errUsage, v)
		}
		if _, dup := jwks[iss]; dup {
			return cfg, fmt.Errorf("%w: --oauth-jwks-url given twice for issuer %s", errUsage, iss)
		}
		jwks[iss] = u
	}
	for _, iss := range o.issuers {
		cfg.Issuers = append(cfg.Issuers, auth.Issuer{URL: iss, JWKSURL: jwks[iss]})
		delete(jwks, iss)
	}
	for iss := range jwks {
		return cfg, fmt.Errorf("%w: --oauth-jwks-url names issuer %s, which is not an --oauth-issuer", errUsage, iss)
	}
	cfg.Resource = o.resource
	if cfg.Resource == "" {
		host, _, err := net.SplitHostPort(listen)
		if err != nil || !loopback.HostPort(listen) || host == "" {
			return cfg, fmt.Errorf("%w: --oauth-resource URL is required on a non-loopback --listen %s: give the URL clients reach this front at (https://HOST/mcp), the audience tokens are issued for", errUsage, listen)
		}
		cfg.Resource = "http://" + listen + "/mcp"
	}
	cfg.ActorClaim = o.actorClaim
	cfg.ActorPrefix = o.actorPrefix
	if len(o.actorMap) > 0 {
		cfg.ActorMap = map[string]string{}
		for _, m := range o.actorMap {
			value, actor, ok := strings.Cut(m, "=")
			if !ok || value == "" || actor == "" {
				return cfg, fmt.Errorf("%w: --oauth-actor-map %q is not CLAIMVALUE=ACTOR", errUsage, m)
			}
			if _, dup := cfg.ActorMap[value]; dup {
				return cfg, fmt.Errorf("%w: --oauth-actor-map maps %q twice", errUsage, value)
			}
			cfg.ActorMap[value] = actor
		}
	}
	// Validate now, so that mistakes are bad arguments (exit 2).
	if _, err := auth.NewJWTVerifier(cfg); err != nil {
		return cfg, fmt.Errorf("%w: %v", errUsage, err)
	}
	return cfg, nil
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
