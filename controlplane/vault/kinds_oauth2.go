package vault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/latchhq/latch/internal/egress"
	"github.com/latchhq/latch/internal/loopback"
)

// OAuth2ClientCredentials presents an access token obtained from TokenURL
// with the OAuth 2.0 client credentials grant (RFC 6749 §4.4), through
// golang.org/x/oauth2/clientcredentials. The token is kept (in the vault,
// per credential) until shortly before it expires and then fetched again;
// it is sent as "Authorization: Bearer <token>". Neither the client secret
// nor a token is ever logged or printed, and both are redacted from stored
// results (Secrets).
type OAuth2ClientCredentials struct {
	TokenURL, ClientID, ClientSecret string
	Scopes                           []string
	// Audience, when set, is sent as the "audience" parameter (Auth0,
	// Okta and others name the API this way).
	Audience string

	cache *tokenCache
}

// tokenFetchTimeout bounds one token request.
const tokenFetchTimeout = 30 * time.Second

// tokenClient fetches tokens (internal/egress). The token URL is the
// operator's (latch vault put), so loopback and private token servers are
// allowed; cloud metadata, link-local and the other never-dialed addresses
// are not, checked on the resolved address of every connection. A redirect
// is never followed: the token request is a POST carrying the client
// secret, which must not go anywhere but token_url.
var tokenClient = egress.NewClient(egress.Config{
	Policy:  egress.Policy{AllowPrivate: true},
	Timeout: tokenFetchTimeout,
}, nil)

// expiryMargin: a token this close to expiry is fetched again, so it does
// not expire on the way to the target. A short-lived token gets a quarter
// of its lifetime instead.
const expiryMargin = 30 * time.Second

// tokenCache holds the current and the previous access token of one
// credential (the previous one may still be on a request in flight, and
// is still redacted).
type tokenCache struct {
	mu       sync.Mutex
	key      string // what the tokens were fetched with (see cacheKey)
	tok      *oauth2.Token
	margin   time.Duration // how early tok is replaced
	previous string

	// now is the clock deciding expiry (tests); nil is time.Now.
	now func() time.Time
}

func (c *tokenCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// token returns a valid access token, fetching one when there is none or it
// is about to expire. Concurrent callers wait for one fetch.
func (o *OAuth2ClientCredentials) token(ctx context.Context) (string, error) {
	c := o.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	key := o.cacheKey()
	if c.key != key {
		c.key, c.tok, c.previous = key, nil, ""
	}
	if c.tok != nil && c.tok.AccessToken != "" && (c.tok.Expiry.IsZero() || c.tok.Expiry.Sub(c.clock()) > c.margin) {
		return c.tok.AccessToken, nil
	}
	fetchedAt := c.clock()
	cfg := clientcredentials.Config{
		ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL, Scopes: o.Scopes,
		// Credentials in the body, as most servers accept; the header
		// style is tried by x/oauth2 when this one is refused.
		AuthStyle: oauth2.AuthStyleAutoDetect,
	}
	if o.Audience != "" {
		cfg.EndpointParams = url.Values{"audience": {o.Audience}}
	}
	fctx, cancel := context.WithTimeout(ctx, tokenFetchTimeout)
	defer cancel()
	fctx = context.WithValue(fctx, oauth2.HTTPClient, tokenClient)
	tok, err := cfg.Token(fctx)
	if err != nil {
		return "", tokenError(o.TokenURL, err)
	}
	if !validHeaderValue(tok.AccessToken) || hasSpace(tok.AccessToken) || tok.AccessToken == "" {
		return "", fmt.Errorf("oauth2 token endpoint %s answered an empty or malformed access token", redactURL(o.TokenURL))
	}
	if c.tok != nil {
		c.previous = c.tok.AccessToken
	}
	c.tok = tok
	c.margin = expiryMargin
	if life := tok.Expiry.Sub(fetchedAt); !tok.Expiry.IsZero() && life/4 < c.margin {
		c.margin = max(life/4, 0)
	}
	return tok.AccessToken, nil
}

// cacheKey ties cached tokens to everything they were fetched with: a
// credential replaced under the same name fetches a new token.
func (o *OAuth2ClientCredentials) cacheKey() string {
	return fmt.Sprintf("%q %q %q %q %q", o.TokenURL, o.ClientID, o.ClientSecret, o.Scopes, o.Audience)
}

// tokenError says why a token request failed without quoting the secret or
// a token: the endpoint's status and its OAuth error code and description.
func tokenError(tokenURL string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("oauth2 token endpoint %s refused the client credentials", redactURL(tokenURL))
		if re.Response != nil {
			msg += fmt.Sprintf(" (HTTP %d", re.Response.StatusCode)
			if re.ErrorCode != "" {
				msg += ", " + re.ErrorCode
			}
			msg += ")"
		}
		if re.ErrorDescription != "" && validHeaderValue(re.ErrorDescription) && len(re.ErrorDescription) < 300 {
			msg += ": " + re.ErrorDescription
		}
		return errors.New(msg + "; check the client ID, secret, scopes and audience (latch vault put)")
	}
	if errors.Is(err, egress.ErrRefused) || errors.Is(err, egress.ErrRedirect) {
		// The inner error names addresses and origins only, never the
		// token URL's path or query.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("oauth2 token request to %s was not sent: %w", redactURL(tokenURL), err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("oauth2 token endpoint %s did not answer: %v", redactURL(tokenURL), ne)
	}
	return fmt.Errorf("oauth2 token request to %s failed; check token_url and that it answers the client credentials grant", redactURL(tokenURL))
}

// redactURL drops userinfo and query from a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable token_url)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// Apply sets "Authorization: Bearer <access token>", fetching the token
// first when none is cached or it is about to expire.
func (o *OAuth2ClientCredentials) Apply(r *http.Request) error {
	if o.cache == nil {
		o.cache = &tokenCache{}
	}
	tok, err := o.token(r.Context())
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// Headers is Authorization.
func (*OAuth2ClientCredentials) Headers() []string { return []string{"Authorization"} }

// Secrets are the client secret (alone and as the "id:secret" pair basic
// authentication to the token endpoint sends) and the current and previous
// access tokens.
func (o *OAuth2ClientCredentials) Secrets() [][]byte {
	out := [][]byte{[]byte(o.ClientSecret), []byte(o.ClientID + ":" + o.ClientSecret)}
	if o.cache == nil {
		return out
	}
	o.cache.mu.Lock()
	defer o.cache.mu.Unlock()
	if o.cache.tok != nil && o.cache.tok.AccessToken != "" {
		out = append(out, []byte(o.cache.tok.AccessToken))
	}
	if o.cache.previous != "" {
		out = append(out, []byte(o.cache.previous))
	}
	return out
}

// String never shows the secret or a token.
func (*OAuth2ClientCredentials) String() string {
	return "vault.OAuth2ClientCredentials{" + redacted + "}"
}

func (o *OAuth2ClientCredentials) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, o.String()) }

func (*OAuth2ClientCredentials) MarshalJSON() ([]byte, error) {
	return redactedJSON(KindOAuth2ClientCredentials)
}

// oauth2Kind fetches an access token from token_url with the client
// credentials grant, keeps it until it expires (in the vault's token cache
// of the credential), and sends it as a bearer token.
type oauth2Kind struct{}

func (oauth2Kind) Name() Kind { return KindOAuth2ClientCredentials }

func (oauth2Kind) Fields() []Field {
	return []Field{
		{Name: "token_url", Required: true, Help: "the token endpoint (https; http only on loopback)"},
		{Name: "client_id", Required: true, Help: "the client ID"},
		{Name: "client_secret", Required: true, Secret: true, Help: "the client secret"},
		{Name: "scopes", Type: FieldList, Help: "the scopes to ask for (optional)"},
		{Name: "audience", Help: "the audience parameter (optional; Auth0, Okta)"},
	}
}

// Validate checks the token URL (https, or http on a loopback address: a
// local token server in tests and development) and the other fields' forms.
func (oauth2Kind) Validate(c Credential) error {
	u, err := url.Parse(c.Get("token_url"))
	if err != nil || u.Host == "" || u.User != nil {
		return invalidf("oauth2 token_url must be an absolute https URL without user info")
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !loopback.Host(u.Hostname())) {
		return invalidf("oauth2 token_url must use https (http only on a loopback address)")
	}
	if !validHeaderValue(c.Get("client_id")) || !validHeaderValue(c.Get("client_secret")) || !validHeaderValue(c.Get("audience")) {
		return invalidf("oauth2 client ID, secret or audience holds control characters")
	}
	for _, s := range ListValue(c.Get("scopes")) {
		if s == "" || hasSpace(s) || !validHeaderValue(s) {
			return invalidf("oauth2 scopes must be non-empty and hold no spaces (give each scope separately)")
		}
	}
	return nil
}

func (oauth2Kind) HTTP(c Credential) HTTPCredential {
	cache := c.tokens
	if cache == nil {
		cache = &tokenCache{}
	}
	return &OAuth2ClientCredentials{TokenURL: c.Get("token_url"), ClientID: c.Get("client_id"), ClientSecret: c.Get("client_secret"), Scopes: ListValue(c.Get("scopes")), Audience: c.Get("audience"), cache: cache}
}
