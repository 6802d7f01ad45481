// Package httpchannel connects the engine to HTTP targets: it renders a
// tool's request template, injects the target's credential from the vault,
// sends through httpdispatch (which classifies failures with httptrace) and
// turns what happened into an engine.Attempt.
package httpchannel

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/vault"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Credentials looks up a credential_ref. Implemented by *vault.Vault.
type Credentials interface {
	Get(name string) (vault.Credential, error)
}

// Config names the channel's dependencies.
type Config struct {
	Logger     hclog.Logger
	Dispatcher *httpdispatch.Dispatcher
	// Credentials may be nil when no target uses a credential.
	Credentials Credentials
}

// Channel implements engine.Channel for HTTP targets.
type Channel struct {
	log   hclog.Logger
	d     *httpdispatch.Dispatcher
	creds Credentials
}

var _ engine.Channel = (*Channel)(nil)

// New builds the channel.
func New(cfg Config) (*Channel, error) {
	if cfg.Dispatcher == nil {
		return nil, errors.New("httpchannel: Config.Dispatcher is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Channel{log: cfg.Logger.Named("httpchannel"), d: cfg.Dispatcher, creds: cfg.Credentials}, nil
}

// Dispatch sends the tool's request with the execution ID as idempotency key
// (the target's idempotency_header) and wherever the request template says
// {{execution_id}}. An observed call (engine.Call.Observed) carries no
// idempotency header: the target sees what it saw before Latch.
func (c *Channel) Dispatch(ctx context.Context, call engine.Call) engine.Attempt {
	method, path, query, headers, body, err := call.Tool.RenderRequestAs(call.Execution.GetId(), call.Arguments)
	if err != nil {
		return engine.Attempt{Class: engine.NotSent, Reason: "request template: " + err.Error()}
	}
	cred, a, ok := c.credential(call)
	if !ok {
		return a
	}
	// The exchange ends by the recorded send time plus the timeout, which
	// is what the evidence rule counts on.
	timeout := call.Tool.DispatchTimeout(call.Target)
	budget := call.Budget(timeout)
	if budget <= 0 {
		return call.TooLate(timeout)
	}
	obs, err := c.d.Send(ctx, httpdispatch.Call{
		ExecutionID: call.Execution.GetId(), NoIdempotencyKey: call.Observed(), Target: call.Target, Method: method, Path: path,
		Query: query, Headers: headers, Body: body, Credential: cred, Timeout: budget,
	})
	if err != nil {
		return failed(err)
	}
	if call.Recovery && (obs.Status == 409 || obs.Status == 425) {
		// The IETF Idempotency-Key draft's answer to a key whose first
		// request is still being processed: no outcome yet.
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("the re-send under the same key answered %d: the target reports the original request still in progress; no evidence yet, asking again", obs.Status)}
	}
	return observed(obs)
}

// Identity is the target and action in the canonical intent record: the
// method and the base URL's scheme, host and path joined with the request's
// path template (never the rendered path, which carries arguments).
func (c *Channel) Identity(tool *tools.Tool, target *tools.Target) engine.Identity {
	if tool.Request == nil {
		return engine.Identity{}
	}
	base := target.BaseURL
	if u, err := url.Parse(target.BaseURL); err == nil {
		base = u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")
	}
	return engine.Identity{Method: tool.Request.Method, Target: base + tool.Request.Path}
}

// Query asks the target's status endpoint about the execution. The answer
// means what the target's status contract says (tools.StatusQuery.Classify):
// a 2xx not listed as in progress is the stored answer, which becomes the
// result (its status, selected headers and body); an in-progress status
// (202, 409, 425 by default) and anything unlisted are no evidence; an absent
// one (404, 410 by default) is Absent, which the engine counts only after the
// settle point.
func (c *Channel) Query(ctx context.Context, call engine.Call) engine.Attempt {
	sq := call.Target.Status
	if sq == nil {
		return engine.Attempt{Class: engine.Unsupported, Reason: "target " + call.Target.Name + " has no status endpoint"}
	}
	cred, a, ok := c.credential(call)
	if !ok {
		return a
	}
	// The dispatcher builds the status request from the target's status
	// endpoint (Method and Path left empty).
	obs, err := c.d.Status(ctx, httpdispatch.Call{
		ExecutionID: call.Execution.GetId(), Target: call.Target, Credential: cred, Timeout: call.Tool.Timeout,
	})
	if err != nil {
		a := failed(err)
		if a.Class == engine.NotSent {
			a.Class = engine.Unknown // a query that did not go out proves nothing
		}
		return a
	}
	switch sq.Classify(obs.Status) {
	case tools.StatusAbsent:
		return engine.Attempt{Class: engine.Absent, Reason: fmt.Sprintf("status endpoint answered %d (absent) for this execution ID", obs.Status)}
	case tools.StatusInProgress:
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("status endpoint answered %d: the target has the request and reports it still in progress; asking again", obs.Status)}
	case tools.StatusCompleted:
		a := observed(obs)
		a.Reason = fmt.Sprintf("status endpoint answered %d with the stored answer", obs.Status)
		return a
	default:
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("status endpoint answered %d, which proves nothing either way; asking again", obs.Status)}
	}
}

func (c *Channel) credential(call engine.Call) (httpdispatch.Credential, engine.Attempt, bool) {
	ref := call.Target.Credential
	if ref == "" {
		return nil, engine.Attempt{}, true
	}
	if c.creds == nil {
		return nil, engine.Attempt{Class: engine.NotSent, Reason: "no vault is configured for credential " + ref}, false
	}
	v, err := c.creds.Get(ref)
	if err != nil {
		reason := "credential " + ref + ": " + err.Error()
		if errors.Is(err, vault.ErrLocked) {
			reason = "vault_locked: the vault is locked (latch vault unlock)"
		}
		return nil, engine.Attempt{Class: engine.NotSent, Reason: reason}, false
	}
	kind, err := v.HTTP()
	if err != nil {
		return nil, engine.Attempt{Class: engine.NotSent, Reason: "credential " + ref + ": " + err.Error()}, false
	}
	return kind, engine.Attempt{}, true
}

func failed(err error) engine.Attempt {
	switch {
	case errors.Is(err, httpdispatch.ErrOutcomeUnknown):
		return engine.Attempt{Class: engine.Unknown, Reason: err.Error()}
	default: // ErrNotSent, ErrRefused, ErrInvalidCall: nothing left the gateway
		return engine.Attempt{Class: engine.NotSent, Reason: err.Error()}
	}
}

func observed(obs *httpdispatch.Observation) engine.Attempt {
	outcome := recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
	if obs.Status >= 200 && obs.Status < 300 {
		outcome = recordv1.Outcome_OUTCOME_SUCCEEDED
	}
	return engine.Attempt{
		Class: engine.Observed, Outcome: outcome,
		Result: &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_STATUS, Status: int32(obs.Status), Headers: obs.Headers, Body: obs.Body, BodyTruncated: obs.Truncated},
		Reason: fmt.Sprintf("HTTP %d", obs.Status),
	}
}

// DevTarget points an http target of the embedded example catalog at the
// demo target `latch dev` runs: a base URL of exampleURL becomes demoURL.
func DevTarget(t *tools.Target, exampleURL, demoURL string) {
	if t.BaseURL == exampleURL {
		t.BaseURL = demoURL
	}
}
