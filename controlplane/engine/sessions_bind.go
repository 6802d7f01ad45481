package engine

import recordv1 "github.com/latchhq/latch/proto/latch/record/v1"

// sessionFor names the session of a Submit: sessionOf, except that with
// Sessions.BindRuns a run id's session is bound to whoever named it, the
// front's MCP session id (which the front issued and the SDK ties to the
// token's actor), else the token id, else nothing more (a stateless caller
// without a token id, e.g. a JWT: bound to the actor, as without
// BindRuns). The binder is appended after the last "@" of the key
// ("run:R@mcp:X"); binders never hold "@" (the go-sdk's session ids are
// base32, token ids tok_…), so a client's run id cannot name another's
// binding. The run id stays the intent scope: a re-sent call on a new MCP
// session still attaches to its execution; only authorization is per
// binder.
func (e *Engine) sessionFor(actor, scope string, ev *recordv1.Evidence) (id, key string) {
	if !e.cfg.Sessions.BindRuns || scope == "" {
		return sessionOf(actor, scope, ev)
	}
	switch {
	case ev.GetMcpSessionId() != "":
		scope += "@mcp:" + ev.GetMcpSessionId()
	case ev.GetTokenId() != "":
		scope += "@token:" + ev.GetTokenId()
	default:
		scope += "@actor"
	}
	return sessionOf(actor, scope, ev)
}
