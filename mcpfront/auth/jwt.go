package auth

// JWT access tokens (the MCP authorization spec's OAuth 2.1 resource server
// side). The verifier trusts a fixed list of issuers; each issuer's signing
// keys come from its JWKS, discovered from its metadata or configured, cached,
// and refetched when a token names a key id the cache does not hold (at most
// once per RefreshInterval per issuer, so forged key ids cannot turn the
// front into a request amplifier).
//
// Library: github.com/go-jose/go-jose/v4 (jwt, jose). go-oidc was the other
// candidate; it is built for OpenID Connect ID tokens (one client id as the
// audience, one issuer per verifier) and its RemoteKeySet refetches on every
// unknown key id without a rate bound. go-jose gives the pieces (an algorithm
// allow-list enforced at parse time, JWK parsing, claim validation) and
// leaves issuer selection and key caching to this file, where they are
// specified and tested.

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/latchhq/latch/internal/egress"
	"github.com/latchhq/latch/internal/loopback"
)

// Defaults of JWTConfig.
const (
	DefaultActorClaim      = "sub"
	DefaultLeeway          = 30 * time.Second
	MaxLeeway              = 5 * time.Minute
	DefaultRefreshInterval = 10 * time.Second
	DefaultMaxKeyAge       = time.Hour
	// maxTokenLen bounds a bearer JWT before it is parsed.
	maxTokenLen = 16 << 10
	// maxDocument bounds a metadata or JWKS document.
	maxDocument = 1 << 20
	// maxKeys bounds the keys kept from one JWKS.
	maxKeys = 100
	// minRSABits refuses weak RSA signing keys.
	minRSABits   = 2048
	fetchTimeout = 10 * time.Second
)

// SigningAlgorithms are the only JWS algorithms accepted: asymmetric ones.
// "none" and the HMAC family (HS256/384/512) are refused at parse time, which
// also closes the "HS256 keyed with the issuer's public key" confusion.
var SigningAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

var (
	// ErrBadJWTConfig is returned by NewJWTVerifier for a configuration it
	// cannot run with.
	ErrBadJWTConfig = errors.New("auth: bad OAuth configuration")
	// ErrKeysUnavailable is returned by Verify when the issuer's signing keys
	// could not be fetched: the token may be fine, the front cannot tell.
	ErrKeysUnavailable = errors.New("auth: the issuer's signing keys are unavailable")
)

// Issuer is one trusted authorization server.
type Issuer struct {
	// URL is the issuer identifier, exactly as tokens carry it in "iss".
	URL string
	// JWKSURL is where its signing keys are. Empty: discovered from the
	// issuer's metadata (RFC 8414 oauth-authorization-server, then OpenID
	// Connect openid-configuration).
	JWKSURL string
}

// JWTConfig configures a JWTVerifier.
type JWTConfig struct {
	Logger hclog.Logger
	// Issuers are the trusted authorization servers (at least one).
	Issuers []Issuer
	// Resource is the front's resource URL (e.g. https://mcp.example.com/mcp):
	// a token's "aud" must contain it (RFC 8707, MCP authorization).
	Resource string
	// ActorClaim is the claim whose string value names the actor (default
	// "sub").
	ActorClaim string
	// ActorPrefix is put in front of the claim value ("oidc:" makes the
	// IdP's "alice" the actor "oidc:alice", apart from a static token's
	// "alice"). Ignored for values found in ActorMap.
	ActorPrefix string
	// ActorMap, when not empty, is an allow-list: only tokens whose claim
	// value is a key are accepted, as the mapped actor.
	ActorMap map[string]string
	// Leeway is the clock skew allowed on exp, nbf and iat (default 30s, at
	// most 5m).
	Leeway time.Duration
	// RefreshInterval is the shortest gap between two JWKS fetches for one
	// issuer (default 10s).
	RefreshInterval time.Duration
	// MaxKeyAge is how long fetched keys are used before they are fetched
	// again (default 1h). Stale keys keep working while a refetch fails.
	MaxKeyAge time.Duration
	// AllowPrivate permits metadata and JWKS fetches from private addresses
	// (RFC 1918, unique-local and the like: an issuer inside the operator's
	// network; --oauth-allow-private). Loopback addresses are permitted for
	// an issuer whose URL names a loopback host (a local issuer in
	// development and tests), and otherwise only with AllowPrivate. Cloud
	// metadata, link-local, unspecified and multicast addresses are never
	// dialed. The policy is checked on the resolved address of every
	// connection (internal/egress).
	AllowPrivate bool
	// HTTPClient fetches metadata and JWKS (default: an internal/egress
	// client per issuer under the address policy above, with a 10s timeout,
	// following a redirect only within the origin of the URL fetched). A
	// client given here replaces that policy: it is the caller's.
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Identity is what a verified JWT says about its bearer.
type Identity struct {
	Actor   string
	Issuer  string
	Subject string
	// TokenID names the token in evidence: "jwt_" and 12 hex digits of its
	// SHA-256, never the token.
	TokenID string
	Expiry  time.Time
	Scopes  []string
}

// JWTVerifier verifies JWT access tokens. Build it with NewJWTVerifier; it is
// safe for concurrent use.
type JWTVerifier struct {
	log     hclog.Logger
	cfg     JWTConfig
	issuers map[string]*keySource
	order   []string
}

// NewJWTVerifier validates cfg and fills defaults. It does no network I/O:
// keys are fetched on first use (Warm fetches them ahead).
func NewJWTVerifier(cfg JWTConfig) (*JWTVerifier, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if len(cfg.Issuers) == 0 {
		return nil, fmt.Errorf("%w: no issuer configured (give --oauth-issuer URL)", ErrBadJWTConfig)
	}
	if err := checkFetchURL(cfg.Resource); err != nil {
		return nil, fmt.Errorf("%w: resource URL %q: %v (give --oauth-resource https://HOST/mcp)", ErrBadJWTConfig, cfg.Resource, err)
	}
	if cfg.ActorClaim == "" {
		cfg.ActorClaim = DefaultActorClaim
	}
	if cfg.ActorPrefix != "" {
		if err := ValidateActor(cfg.ActorPrefix); err != nil {
			return nil, fmt.Errorf("%w: actor prefix: %v", ErrBadJWTConfig, err)
		}
	}
	for value, actor := range cfg.ActorMap {
		if value == "" {
			return nil, fmt.Errorf("%w: actor map has an empty claim value", ErrBadJWTConfig)
		}
		if err := ValidateActor(actor); err != nil {
			return nil, fmt.Errorf("%w: actor map %q: %v", ErrBadJWTConfig, value, err)
		}
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = DefaultLeeway
	case cfg.Leeway < 0 || cfg.Leeway > MaxLeeway:
		return nil, fmt.Errorf("%w: leeway %s is outside 0..%s", ErrBadJWTConfig, cfg.Leeway, MaxLeeway)
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.MaxKeyAge <= 0 {
		cfg.MaxKeyAge = DefaultMaxKeyAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &JWTVerifier{log: cfg.Logger.Named("oauth"), cfg: cfg, issuers: make(map[string]*keySource)}
	for _, is := range cfg.Issuers {
		if err := checkFetchURL(is.URL); err != nil {
			return nil, fmt.Errorf("%w: issuer %q: %v", ErrBadJWTConfig, is.URL, err)
		}
		if is.JWKSURL != "" {
			if err := checkFetchURL(is.JWKSURL); err != nil {
				return nil, fmt.Errorf("%w: JWKS URL %q of issuer %s: %v", ErrBadJWTConfig, is.JWKSURL, is.URL, err)
			}
		}
		if _, dup := v.issuers[is.URL]; dup {
			return nil, fmt.Errorf("%w: issuer %s is configured twice", ErrBadJWTConfig, is.URL)
		}
		client := cfg.HTTPClient
		if client == nil {
			client = fetchClient(is.URL, cfg.AllowPrivate)
		}
		v.issuers[is.URL] = &keySource{v: v, issuer: is.URL, jwksURL: is.JWKSURL, client: client}
		v.order = append(v.order, is.URL)
	}
	return v, nil
}

// Resource is the resource URL tokens must be issued for.
func (v *JWTVerifier) Resource() string { return v.cfg.Resource }

// Leeway is the clock skew allowed on exp, nbf and iat.
func (v *JWTVerifier) Leeway() time.Duration { return v.cfg.Leeway }

// Issuers are the trusted issuer identifiers, in configuration order.
func (v *JWTVerifier) Issuers() []string { return append([]string(nil), v.order...) }

// Metadata is the RFC 9728 protected-resource metadata document.
func (v *JWTVerifier) Metadata() *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               v.cfg.Resource,
		AuthorizationServers:   v.Issuers(),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Latch",
	}
}

// Warm fetches every issuer's keys once, so that configuration mistakes show
// at start; it returns the first failure (the verifier keeps retrying on use).
func (v *JWTVerifier) Warm(ctx context.Context) error {
	var first error
	for _, iss := range v.order {
		if _, err := v.issuers[iss].keys(ctx, "", true); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// LooksLikeJWT reports whether token has the shape of a compact JWS (three
// dot-separated parts). Static Latch tokens never contain a dot.
func LooksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2 && !strings.HasPrefix(token, Prefix)
}

// accessClaims are the claims read besides the registered ones.
type accessClaims struct {
	Scope string `json:"scope"` // RFC 9068: space-separated
	Scp   any    `json:"scp"`   // some issuers: an array, others a string
}

// scopes returns the token's scopes from "scope" or "scp".
func (c accessClaims) scopes() []string {
	if c.Scope != "" {
		return strings.Fields(c.Scope)
	}
	switch v := c.Scp.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, s := range v {
			if s, ok := s.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Verify checks token and returns who it names. Failures wrap
// ErrInvalidToken (with the reason, for the log, not for the caller) or
// ErrKeysUnavailable.
func (v *JWTVerifier) Verify(ctx context.Context, token string) (Identity, error) {
	if len(token) > maxTokenLen {
		return Identity{}, fmt.Errorf("%w: the JWT is %d bytes, at most %d are accepted", ErrInvalidToken, len(token), maxTokenLen)
	}
	tok, err := jwt.ParseSigned(token, SigningAlgorithms)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: not an acceptable JWS (asymmetric algorithms only): %v", ErrInvalidToken, err)
	}
	if len(tok.Headers) != 1 {
		return Identity{}, fmt.Errorf("%w: the JWT has %d signatures, want 1", ErrInvalidToken, len(tok.Headers))
	}
	hdr := tok.Headers[0]
	if typ, ok := hdr.ExtraHeaders[jose.HeaderType]; ok {
		// RFC 9068 says "at+jwt"; many issuers still send "JWT". Anything
		// else (an ID token with its own typ, a logout token, a DPoP proof)
		// is not an access token.
		s, _ := typ.(string)
		switch strings.ToLower(s) {
		case "jwt", "at+jwt", "application/at+jwt":
		default:
			return Identity{}, fmt.Errorf("%w: typ %q is not an access token type (JWT or at+jwt)", ErrInvalidToken, typ)
		}
	}
	// The issuer picks the keys; everything read here is checked again
	// once the signature is verified.
	var peek struct {
		Issuer string `json:"iss"`
	}
	if err := tok.UnsafeClaimsWithoutVerification(&peek); err != nil {
		return Identity{}, fmt.Errorf("%w: claims are not a JSON object: %v", ErrInvalidToken, err)
	}
	src, ok := v.issuers[peek.Issuer]
	if !ok {
		return Identity{}, fmt.Errorf("%w: issuer %q is not configured (see --oauth-issuer)", ErrInvalidToken, peek.Issuer)
	}
	keys, err := src.keys(ctx, hdr.KeyID, false)
	if err != nil {
		return Identity{}, err
	}
	var payload json.RawMessage
	verified := false
	for _, k := range keys {
		if !keyFits(k, hdr.Algorithm) {
			continue
		}
		if err := tok.Claims(k.Key, &payload); err != nil {
			continue
		}
		verified = true
		break
	}
	if !verified {
		return Identity{}, fmt.Errorf("%w: no key of issuer %s (kid %q, alg %s) verifies the signature", ErrInvalidToken, src.issuer, hdr.KeyID, hdr.Algorithm)
	}
	var (
		claims jwt.Claims
		raw    map[string]any
		extra  accessClaims
	)
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Identity{}, fmt.Errorf("%w: registered claims are malformed: %v", ErrInvalidToken, err)
	}
	if err := json.Unmarshal(payload, &raw); err != nil {
		return Identity{}, fmt.Errorf("%w: claims are not a JSON object: %v", ErrInvalidToken, err)
	}
	// Scope claims of unexpected shapes are ignored, not fatal.
	_ = json.Unmarshal(payload, &extra)
	now := v.cfg.Now()
	if claims.Expiry == nil {
		return Identity{}, fmt.Errorf("%w: the JWT has no exp claim", ErrInvalidToken)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: src.issuer, Time: now}, v.cfg.Leeway); err != nil {
		return Identity{}, fmt.Errorf("%w: %v (exp %s, nbf %s, now %s, leeway %s)", ErrInvalidToken, err,
			claims.Expiry.Time().UTC().Format(time.RFC3339), numericDate(claims.NotBefore), now.UTC().Format(time.RFC3339), v.cfg.Leeway)
	}
	if !oauthex.MatchesResource(claims.Audience, v.cfg.Resource) {
		return Identity{}, fmt.Errorf("%w: audience %q does not include this resource %s", ErrInvalidToken, []string(claims.Audience), v.cfg.Resource)
	}
	actor, err := v.actorOf(raw)
	if err != nil {
		return Identity{}, err
	}
	sum := sha256.Sum256([]byte(token))
	id := Identity{
		Actor:   actor,
		Issuer:  src.issuer,
		Subject: claims.Subject,
		TokenID: "jwt_" + hex.EncodeToString(sum[:6]),
		Expiry:  claims.Expiry.Time(),
		Scopes:  extra.scopes(),
	}
	return id, nil
}

// actorOf applies the claim → actor rule: the claim must be a string; with
// an ActorMap only listed values are accepted (as their mapped actor);
// otherwise the actor is ActorPrefix + value; either way it must pass
// ValidateActor.
func (v *JWTVerifier) actorOf(raw map[string]any) (string, error) {
	val, ok := raw[v.cfg.ActorClaim]
	if !ok {
		return "", fmt.Errorf("%w: the JWT has no %q claim (the actor claim, see --oauth-actor-claim)", ErrInvalidToken, v.cfg.ActorClaim)
	}
	s, ok := val.(string)
	if !ok || s == "" {
		return "", fmt.Errorf("%w: the actor claim %q is not a non-empty string", ErrInvalidToken, v.cfg.ActorClaim)
	}
	actor := v.cfg.ActorPrefix + s
	if len(v.cfg.ActorMap) > 0 {
		mapped, ok := v.cfg.ActorMap[s]
		if !ok {
			return "", fmt.Errorf("%w: %s %q is not in the actor map (see --oauth-actor-map)", ErrInvalidToken, v.cfg.ActorClaim, s)
		}
		actor = mapped
	}
	if err := ValidateActor(actor); err != nil {
		return "", fmt.Errorf("%w: the actor claim %q does not make an actor name: %v", ErrInvalidToken, v.cfg.ActorClaim, err)
	}
	return actor, nil
}

func numericDate(d *jwt.NumericDate) string {
	if d == nil {
		return "-"
	}
	return d.Time().UTC().Format(time.RFC3339)
}

// keyFits reports whether k may check a signature made with alg.
func keyFits(k jose.JSONWebKey, alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg {
		return false
	}
	switch k.Key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(alg, "ES")
	case ed25519.PublicKey:
		return alg == string(jose.EdDSA)
	}
	return false
}

// keySource is one issuer's key cache. mu guards the fields and is never
// held during a fetch: verifications with cached keys never wait on the
// network, and those that need the fetch in flight wait for it (inflight)
// instead of starting another or giving up.
type keySource struct {
	v      *JWTVerifier
	issuer string
	client *http.Client // fetches metadata and JWKS

	mu          sync.Mutex
	jwksURL     string
	set         []jose.JSONWebKey
	fetchedAt   time.Time     // last successful fetch
	lastAttempt time.Time     // last fetch attempt, successful or not
	lastErr     error         // of the last attempt
	inflight    chan struct{} // closed when the fetch in flight ends; nil if none
}

// keys returns the keys that may have signed a token with key id kid (all
// keys when kid is ""), fetching when the cache is empty, old, or lacks kid
// and the refresh bound allows. force fetches regardless of the cache (not of
// the bound) for Warm.
func (s *keySource) keys(ctx context.Context, kid string, force bool) ([]jose.JSONWebKey, error) {
	now := s.v.cfg.Now()
	s.mu.Lock()
	fresh := s.set != nil && now.Sub(s.fetchedAt) < s.v.cfg.MaxKeyAge
	if match := matchKeys(s.set, kid); !force && fresh && len(match) > 0 {
		s.mu.Unlock()
		return match, nil
	}
	if ch := s.inflight; ch != nil {
		// Someone is fetching: its answer is ours.
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: issuer %s: %v", ErrKeysUnavailable, s.issuer, ctx.Err())
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cachedLocked(kid)
	}
	if !s.lastAttempt.IsZero() && now.Sub(s.lastAttempt) < s.v.cfg.RefreshInterval {
		defer s.mu.Unlock()
		if s.set != nil && len(matchKeys(s.set, kid)) == 0 {
			s.v.log.Debug("unknown key id, refetch not allowed yet", "issuer", s.issuer, "kid", kid, "refresh_interval", s.v.cfg.RefreshInterval)
		}
		return s.cachedLocked(kid)
	}
	ch := make(chan struct{})
	s.inflight, s.lastAttempt = ch, now
	jwksURL := s.jwksURL
	s.mu.Unlock()

	set, discovered, err := s.fetch(ctx, jwksURL)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight = nil
	close(ch)
	s.lastErr = err
	if err != nil {
		if s.set != nil {
			s.v.log.Warn("could not refresh the issuer's signing keys; using the cached ones", "issuer", s.issuer, "error", err)
		} else {
			s.v.log.Warn("could not fetch the issuer's signing keys", "issuer", s.issuer, "error", err)
		}
		return s.cachedLocked(kid)
	}
	if discovered != "" {
		s.jwksURL = discovered
	}
	s.set, s.fetchedAt = set, now
	s.v.log.Debug("fetched signing keys", "issuer", s.issuer, "jwks_uri", s.jwksURL, "keys", len(set))
	return matchKeys(set, kid), nil
}

// cachedLocked answers from the cache (stale or not): the matching keys, or
// ErrKeysUnavailable when no key set was ever fetched.
func (s *keySource) cachedLocked(kid string) ([]jose.JSONWebKey, error) {
	if s.set == nil {
		return nil, fmt.Errorf("%w: issuer %s: %w (next attempt after %s)", ErrKeysUnavailable, s.issuer, s.lastErr, s.v.cfg.RefreshInterval)
	}
	return matchKeys(s.set, kid), nil
}

func matchKeys(set []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		return set
	}
	var out []jose.JSONWebKey
	for _, k := range set {
		if k.KeyID == kid {
			out = append(out, k)
		}
	}
	return out
}

// fetch discovers the JWKS URL when jwksURL is "" (returning it) and fetches
// the key set.
func (s *keySource) fetch(ctx context.Context, jwksURL string) (set []jose.JSONWebKey, discovered string, err error) {
	// The fetch serves every waiting verification, not only the request
	// that started it: a client hanging up must not abort it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	if jwksURL == "" {
		jwksURL, err = s.discover(ctx)
		if err != nil {
			return nil, "", err
		}
		discovered = jwksURL
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := s.getJSON(ctx, jwksURL, &doc); err != nil {
		return nil, "", fmt.Errorf("JWKS %s: %w", jwksURL, err)
	}
	for _, rawKey := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(rawKey); err != nil {
			// Keys of kinds this verifier cannot use (encryption keys,
			// unknown curves) are skipped, not fatal.
			s.v.log.Trace("skipped a JWKS key", "issuer", s.issuer, "error", err)
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		k = k.Public() // never keep private or symmetric material
		if !k.Valid() || !k.IsPublic() {
			continue
		}
		if rk, ok := k.Key.(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
			s.v.log.Warn("skipped a weak RSA key", "issuer", s.issuer, "kid", k.KeyID, "bits", rk.N.BitLen())
			continue
		}
		set = append(set, k)
		if len(set) == maxKeys {
			break
		}
	}
	if len(set) == 0 {
		return nil, "", fmt.Errorf("JWKS %s holds no usable public signing key", jwksURL)
	}
	sort.SliceStable(set, func(i, j int) bool { return set[i].KeyID < set[j].KeyID })
	return set, discovered, nil
}

// discover reads the issuer's metadata and returns its jwks_uri. It tries,
// in the order the MCP authorization spec gives: RFC 8414 with path
// insertion, OpenID Connect with path insertion (issuers with a path), OpenID
// Connect with the path appended. The document's issuer must equal the
// configured one (RFC 8414 §3.3).
func (s *keySource) discover(ctx context.Context) (string, error) {
	u, err := url.Parse(s.issuer)
	if err != nil {
		return "", fmt.Errorf("issuer %q: %v", s.issuer, err)
	}
	path := strings.TrimSuffix(u.Path, "/")
	base := u.Scheme + "://" + u.Host
	candidates := []string{base + "/.well-known/oauth-authorization-server" + path}
	if path != "" {
		candidates = append(candidates, base+"/.well-known/openid-configuration"+path)
	}
	candidates = append(candidates, base+path+"/.well-known/openid-configuration")
	var tried []string
	for _, c := range candidates {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		err := s.getJSON(ctx, c, &meta)
		var nf errNotFound
		if errors.As(err, &nf) {
			tried = append(tried, c)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("issuer metadata %s: %w", c, err)
		}
		if meta.Issuer != s.issuer {
			return "", fmt.Errorf("issuer metadata %s names issuer %q, want %q (the tokens' iss must equal --oauth-issuer exactly)", c, meta.Issuer, s.issuer)
		}
		if meta.JWKSURI == "" {
			return "", fmt.Errorf("issuer metadata %s has no jwks_uri (give --oauth-jwks-url)", c)
		}
		if err := checkFetchURL(meta.JWKSURI); err != nil {
			return "", fmt.Errorf("issuer metadata %s: jwks_uri %q: %v", c, meta.JWKSURI, err)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("no issuer metadata found at %s (give --oauth-jwks-url)", strings.Join(tried, ", "))
}

type errNotFound struct{ status int }

func (e errNotFound) Error() string { return fmt.Sprintf("HTTP %d", e.status) }

func (s *keySource) getJSON(ctx context.Context, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		// Not there (404, or the 400/403 some servers answer for unknown
		// paths): discovery tries the next well-known URL.
		return errNotFound{resp.StatusCode}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return err
	}
	if len(body) > maxDocument {
		return fmt.Errorf("document exceeds %d bytes", maxDocument)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("not a JSON document: %v", err)
	}
	return nil
}

// fetchClient is the default client of one issuer (see
// JWTConfig.AllowPrivate): loopback only for an issuer on a loopback host,
// private addresses only when allowed, redirects only within an origin
// (internal/egress).
func fetchClient(issuer string, allowPrivate bool) *http.Client {
	loop := false
	if u, err := url.Parse(issuer); err == nil {
		loop = isLoopback(u.Hostname())
	}
	return egress.NewClient(egress.Config{
		Policy: egress.Policy{
			AllowPrivate:  allowPrivate,
			AllowLoopback: loop,
			Hint:          "give --oauth-allow-private if the issuer's metadata or keys are meant to be fetched from it",
		},
		Timeout: fetchTimeout,
	}, nil)
}

// checkFetchURL accepts absolute https URLs, and http ones on a loopback
// host (a local issuer in development and tests).
func checkFetchURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Host == "" || u.Fragment != "" || u.User != nil {
		return errors.New("want an absolute URL with a host, without user info or fragment")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return errors.New("http is allowed only on a loopback host; use https")
	}
	return fmt.Errorf("scheme %q is not https", u.Scheme)
}

// isLoopback: "localhost" (in any case, as host names are) or a loopback
// IP, internal/loopback's rule.
func isLoopback(host string) bool { return loopback.Host(strings.ToLower(host)) }
