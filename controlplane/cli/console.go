package cli

import (
	"context"
	"fmt"
	"net/http"
	"os/user"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latchhq/latch/controlplane/console"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/tools"
)

// mountConsole serves the operator console at /ui/ on the ops listener. A
// PostgreSQL standby has no state to show: /ui/ sends the browser to the
// active replica's console (the URL it published: server.ActiveConsole),
// or, while that is not known, says it is a standby (503); once it takes
// over it serves the console and publishes advertise as its own.
func mountConsole(ob *observability, ops *opshttp.Server, st *stack, secure bool, advertise string) (*console.Console, error) {
	srv := st.srv
	if srv.Loaded() {
		c, err := newConsole(ob, st, secure)
		if err != nil {
			return nil, err
		}
		ops.Handle(console.Prefix, c.Handler())
		srv.Go(func(ctx context.Context) error {
			if err := srv.PublishConsole(ctx, advertise); err != nil {
				ob.log.Warn("console address not published: standbys answer 503 instead of sending browsers here", "error", err)
			}
			<-ctx.Done()
			c.Stop() // end the event streams so the ops listener stops promptly
			return nil
		})
		return c, nil
	}
	var h atomic.Pointer[http.Handler]
	ops.Handle(console.Prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := h.Load(); p != nil {
			(*p).ServeHTTP(w, r)
			return
		}
		if u := srv.ActiveConsole(); u != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// The host is the one the lease holder published in the
			// store; only the path under /ui/ and the query come from
			// the request.
			http.Redirect(w, r, strings.TrimSuffix(u, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect) //nolint:gosec // see above: the destination host is not the request's

			return
		}
		role := srv.Role()
		msg := "this control plane replica is a standby: the console is served by the active replica"
		if role.Active != "" {
			msg += " (API at " + role.Active + ")"
		}
		http.Error(w, msg+"; this one serves it once it takes over", http.StatusServiceUnavailable)
	}))
	srv.Go(func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case <-srv.ActiveC():
		}
		c, err := newConsole(ob, st, secure)
		if err != nil {
			return err
		}
		ch := c.Handler()
		h.Store(&ch)
		if err := srv.PublishConsole(ctx, advertise); err != nil {
			ob.log.Warn("console address not published: standbys answer 503 instead of sending browsers here", "error", err)
		}
		ob.log.Info("operator console serving: this replica took over", "url", advertise)
		<-ctx.Done()
		c.Stop()
		return nil
	})
	return nil, nil
}

// newConsole builds the console over the loaded state.
func newConsole(ob *observability, st *stack, secure bool) (*console.Console, error) {
	srv := st.srv
	verify := fmt.Sprintf("latch audit verify %s", srv.DataDir())
	if srv.OnPostgres() {
		// Never the URL itself: it may hold a password.
		verify = "latch audit verify --store 'postgres://…'   (the connection string latch serve --store uses, with a read-only role)"
	}
	c, err := console.New(console.Config{
		Logger: ob.log, Store: srv.Store, Reads: srv.Engine, Connect: srv.ConsoleConn, Operators: srv.Tokens,
		Catalog:       func() *tools.Catalog { return srv.Catalog.Current().Catalog },
		VerifierKey:   srv.VerifierKey(),
		VerifyCommand: verify,
		Secure:        secure,
		Counts:        ob.telemetry.Executions,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// devSignInLink is the one-time console link `latch dev` prints: it signs
// in as the operator who runs latch dev (their login name, as `latch exec
// resolve --operator` defaults to $USER), valid for a day.
func devSignInLink(env *Env, c *console.Console, opsURL string) (string, string, error) {
	name := env.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if !tokens.ValidActor(name) {
		name = "operator" // a login name the journal's name rule refuses
	}
	path, err := c.SignInLink(name, 24*time.Hour)
	if err != nil {
		return "", "", err
	}
	return opsURL + path, name, nil
}
