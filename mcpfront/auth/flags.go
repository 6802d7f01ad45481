package auth

import (
	"flag"
	"fmt"
	"strings"
)

// Flags are the --oauth-* command-line flags of every command that starts an
// MCP front (latch-mcp, latch dev). Register them, then call Config.
type Flags struct {
	issuers     listFlag
	jwksURLs    listFlag
	resource    string
	actorClaim  string
	actorPrefix prefixFlag
	actorMap    listFlag
	private     bool
}

// DefaultActorPrefix is put before the claim value when
// --oauth-actor-prefix and --oauth-actor-map are not given: a JWT with
// sub=dev acts as oauth:dev, never as the static-token actor dev. Token
// actors hold no ':' (actorname.CheckIssued), so the two cannot meet.
const DefaultActorPrefix = "oauth:"

// prefixFlag is --oauth-actor-prefix, remembering whether it was given
// (an empty prefix given on purpose is not the default).
type prefixFlag struct {
	value string
	set   bool
}

func (p *prefixFlag) String() string     { return p.value }
func (p *prefixFlag) Set(v string) error { p.value, p.set = v, true; return nil }

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.Var(&f.issuers, "oauth-issuer", "trusted OAuth authorization server (issuer URL, exactly as in the tokens' iss; repeatable); turns on JWT access tokens")
	fs.Var(&f.jwksURLs, "oauth-jwks-url", "JWKS URL of the issuer, instead of discovering it from the issuer's metadata; ISSUER=URL when several issuers are configured (repeatable)")
	fs.StringVar(&f.resource, "oauth-resource", "", "this front's resource URL, the audience tokens must carry (default http://LISTEN/mcp on a loopback listen address; required otherwise)")
	fs.StringVar(&f.actorClaim, "oauth-actor-claim", DefaultActorClaim, "JWT claim whose string value is the actor")
	fs.Var(&f.actorPrefix, "oauth-actor-prefix", "prefix put before the claim value to make the actor (default \""+DefaultActorPrefix+"\" unless --oauth-actor-map is given: a JWT with sub=dev acts as "+DefaultActorPrefix+"dev, never as the static-token actor dev). An empty prefix, sharing the static-token actors' namespace, is refused; map claim values to such actors with --oauth-actor-map instead")
	fs.BoolVar(&f.private, "oauth-allow-private", false, "fetch issuer metadata and JWKS from private (RFC 1918, unique-local) addresses too; loopback is allowed for an issuer on a loopback host")
	fs.Var(&f.actorMap, "oauth-actor-map", "CLAIMVALUE=ACTOR (repeatable); when given, only listed claim values are accepted, as the mapped actor")
}

// Enabled reports whether an issuer was given.
func (f *Flags) Enabled() bool { return len(f.issuers) > 0 }

// MappedActors are the actors of --oauth-actor-map, in flag order.
func (f *Flags) MappedActors() []string {
	var out []string
	for _, m := range f.actorMap {
		if _, actor, ok := strings.Cut(m, "="); ok && actor != "" {
			out = append(out, actor)
		}
	}
	return out
}

// Config checks the flags and returns the verifier's configuration (without
// Logger). defaultResource is the resource URL when --oauth-resource is not
// given ("" when there is no safe default: the flag is then required).
// JWT actors must not share the namespace of the front's other actors
// (static-token actors, latch-mcp --actor, latch dev's dev): without
// --oauth-actor-prefix the prefix is DefaultActorPrefix, and an empty one
// without --oauth-actor-map is refused (every command that takes these
// flags accepts static tokens or an --actor as well). Errors wrap
// ErrBadJWTConfig.
func (f *Flags) Config(defaultResource string) (JWTConfig, error) {
	var cfg JWTConfig
	if !f.Enabled() {
		if len(f.jwksURLs) > 0 || f.resource != "" || len(f.actorMap) > 0 || f.actorPrefix.set || f.private {
			return cfg, fmt.Errorf("%w: --oauth-jwks-url, --oauth-resource, --oauth-actor-map, --oauth-actor-prefix and --oauth-allow-private need --oauth-issuer URL", ErrBadJWTConfig)
		}
		return cfg, nil
	}
	jwks := map[string]string{}
	for _, v := range f.jwksURLs {
		iss, u := "", v
		if i := strings.Index(v, "=http"); i > 0 {
			iss, u = v[:i], v[i+1:]
		} else if len(f.issuers) == 1 {
			iss = f.issuers[0]
		} else {
			return cfg, fmt.Errorf("%w: --oauth-jwks-url %s: with several --oauth-issuer, write ISSUER=URL", ErrBadJWTConfig, v)
		}
		if _, dup := jwks[iss]; dup {
			return cfg, fmt.Errorf("%w: --oauth-jwks-url given twice for issuer %s", ErrBadJWTConfig, iss)
		}
		jwks[iss] = u
	}
	for _, iss := range f.issuers {
		cfg.Issuers = append(cfg.Issuers, Issuer{URL: iss, JWKSURL: jwks[iss]})
		delete(jwks, iss)
	}
	for iss := range jwks {
		return cfg, fmt.Errorf("%w: --oauth-jwks-url names issuer %s, which is not an --oauth-issuer", ErrBadJWTConfig, iss)
	}
	cfg.Resource = f.resource
	if cfg.Resource == "" {
		if defaultResource == "" {
			return cfg, fmt.Errorf("%w: --oauth-resource URL is required on a non-loopback listen address: give the URL clients reach this front at (https://HOST/mcp), the audience tokens are issued for", ErrBadJWTConfig)
		}
		cfg.Resource = defaultResource
	}
	cfg.AllowPrivate = f.private
	cfg.ActorClaim = f.actorClaim
	cfg.ActorPrefix = f.actorPrefix.value
	switch {
	case len(f.actorMap) > 0:
		// An allow-list of explicit actors: the prefix is not used.
	case !f.actorPrefix.set:
		cfg.ActorPrefix = DefaultActorPrefix
	case f.actorPrefix.value == "":
		return cfg, fmt.Errorf("%w: --oauth-actor-prefix is empty: JWT actors would share the namespace of static-token actors (a JWT with sub=dev would act as the token actor dev); give a prefix (default %q), or list the claim values allowed to act as named actors with --oauth-actor-map VALUE=ACTOR", ErrBadJWTConfig, DefaultActorPrefix)
	}
	if len(f.actorMap) > 0 {
		cfg.ActorMap = map[string]string{}
		for _, m := range f.actorMap {
			value, actor, ok := strings.Cut(m, "=")
			if !ok || value == "" || actor == "" {
				return cfg, fmt.Errorf("%w: --oauth-actor-map %q is not CLAIMVALUE=ACTOR", ErrBadJWTConfig, m)
			}
			if _, dup := cfg.ActorMap[value]; dup {
				return cfg, fmt.Errorf("%w: --oauth-actor-map maps %q twice", ErrBadJWTConfig, value)
			}
			cfg.ActorMap[value] = actor
		}
	}
	if _, err := NewJWTVerifier(cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}
