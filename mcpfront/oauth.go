package mcpfront

// The front as an OAuth 2.1 resource server (MCP authorization, 2026-07-28):
// it publishes RFC 9728 protected-resource metadata, points 401 answers at it
// (WWW-Authenticate resource_metadata), and accepts JWT access tokens whose
// audience is its resource URL, next to static Latch tokens. Tokens are
// checked here and never leave the front: the control plane receives the
// actor, targets receive only what the catalog's request template and the
// vault put in (the Authorization header of an agent's request is not
// forwarded anywhere).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/latchhq/latch/mcpfront/auth"
)

// MetadataPath is RFC 9728's well-known path for protected-resource metadata.
const MetadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadataURL is where the metadata of resource is published: the
// well-known path inserted between the resource URL's host and its path
// (RFC 9728 §3.1), e.g. https://h/mcp → https://h/.well-known/oauth-protected-resource/mcp.
func ResourceMetadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", fmt.Errorf("%w: resource URL %q is not an absolute http(s) URL", ErrBadConfig, resource)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: resource URL %q must not have a query or fragment (RFC 9728 §1.2)", ErrBadConfig, resource)
	}
	return u.Scheme + "://" + u.Host + MetadataPath + strings.TrimSuffix(u.EscapedPath(), "/"), nil
}

// registerOAuth serves the metadata document at the root well-known path,
// at the path-suffixed form for the resource URL's path, and for /mcp (the
// path this handler serves MCP on, when a proxy maps the resource elsewhere).
func (f *Front) registerOAuth(mux *http.ServeMux) {
	h := sdkauth.ProtectedResourceMetadataHandler(f.cfg.OAuth.Metadata())
	paths := map[string]bool{MetadataPath: true, MetadataPath + "/mcp": true}
	if u, err := url.Parse(f.cfg.OAuth.Resource()); err == nil {
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			paths[MetadataPath+p] = true
		}
	}
	for p := range paths {
		mux.Handle(p, h)
	}
}

// authRequired: with static tokens or OAuth configured every HTTP request
// needs a bearer token.
func (f *Front) authRequired() bool { return f.cfg.Tokens != nil || f.cfg.OAuth != nil }

// errKeysUnavailable is what a caller is told when the issuer's keys cannot
// be fetched (a 500 from the SDK middleware): the token may well be valid.
var errKeysUnavailable = errors.New("mcpfront: the authorization server's signing keys are unavailable; try again shortly")

// verifyToken is the SDK TokenVerifier: a bearer token shaped like a JWT goes
// to the OAuth verifier (when configured), any other to the static token
// store. Any refusal is a 401 "invalid token": the reason is logged, never
// told to the caller.
func (f *Front) verifyToken(ctx context.Context, token string, r *http.Request) (*sdkauth.TokenInfo, error) {
	if f.cfg.OAuth != nil && auth.LooksLikeJWT(token) {
		id, err := f.cfg.OAuth.Verify(ctx, token)
		if errors.Is(err, auth.ErrKeysUnavailable) {
			f.log.Warn("access token not verifiable", "peer", r.RemoteAddr, "error", err)
			return nil, errKeysUnavailable
		}
		if err != nil {
			f.log.Debug("access token refused", "peer", r.RemoteAddr, "error", err)
			return nil, sdkauth.ErrInvalidToken
		}
		return &sdkauth.TokenInfo{
			UserID:     id.Actor,
			Scopes:     id.Scopes,
			Expiration: id.Expiry,
			Extra:      map[string]any{"token_id": id.TokenID, "issuer": id.Issuer},
		}, nil
	}
	if f.cfg.Tokens == nil {
		f.log.Debug("bearer token refused", "peer", r.RemoteAddr, "error", "not a JWT and no static tokens are configured")
		return nil, sdkauth.ErrInvalidToken
	}
	actor, tokenID, err := f.cfg.Tokens.Verify(ctx, token)
	if err != nil || actor == "" {
		f.log.Debug("bearer token refused", "peer", r.RemoteAddr, "error", err)
		return nil, sdkauth.ErrInvalidToken
	}
	extra := map[string]any{"token_id": tokenID}
	if fw, ok := f.cfg.Tokens.(CredentialForwarder); ok && fw.ForwardCredential(token) {
		extra[extraCredential] = token // sent with Submit (call.go); never logged
	}
	return &sdkauth.TokenInfo{UserID: actor, Extra: extra}, nil
}

// challenge is the WWW-Authenticate value of a 401 (RFC 6750 §3, RFC 9728
// §5.1): the metadata URL when OAuth is on, and error="invalid_token" only
// when the request carried credentials (a request without any gets no error
// code, as RFC 6750 §3.1 asks).
func (f *Front) challenge(r *http.Request) string {
	params := []string{`realm="latch"`}
	if f.metadataURL != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", f.metadataURL))
	}
	if r.Header.Get("Authorization") != "" {
		params = append(params, `error="invalid_token"`)
	}
	return "Bearer " + strings.Join(params, ", ")
}
