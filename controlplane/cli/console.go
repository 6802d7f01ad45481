package cli

import (
	"context"
	"fmt"
	"os/user"
	"time"

	"github.com/latchhq/latch/controlplane/console"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/tools"
)

// mountConsole serves the operator console at /ui/ on the ops listener.
func mountConsole(ob *observability, ops *opshttp.Server, st *stack, secure bool) (*console.Console, error) {
	srv := st.srv
	verify := fmt.Sprintf("latch audit verify %s", srv.DataDir())
	if srv.OnPostgres() {
		// Never the URL itself: it may hold a password.
		verify = "latch audit verify --store 'postgres://…'   (the connection string latch serve --store uses, with a read-only role)"
	}
	c, err := console.New(console.Config{
		Logger: ob.log, Store: srv.Store, Reads: srv.Engine, Decisions: srv.API(), Operators: srv.Tokens,
		Catalog:       func() *tools.Catalog { return srv.Catalog.Current().Catalog },
		VerifierKey:   srv.VerifierKey(),
		VerifyCommand: verify,
		Secure:        secure,
		Counts:        ob.telemetry.Executions,
	})
	if err != nil {
		return nil, err
	}
	ops.Handle(console.Prefix, c.Handler())
	srv.Go(func(ctx context.Context) error {
		<-ctx.Done()
		c.Stop() // end the event streams so the ops listener stops promptly
		return nil
	})
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
