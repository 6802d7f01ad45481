package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/dueq"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/actorname"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Sentinel errors; the gRPC service maps them to status codes.
var (
	ErrUnknownTool      = errors.New("engine: unknown tool")
	ErrInvalidArguments = errors.New("engine: invalid arguments")
	ErrInvalidRequest   = errors.New("engine: invalid request")
	ErrNotFound         = errors.New("engine: execution not found")
	ErrBadRepeatOf      = errors.New("engine: bad repeat_of")
	ErrTooLate          = errors.New("engine: execution already dispatched")
	ErrNotResolvable    = errors.New("engine: execution is not awaiting a decision")
	ErrClosed           = errors.New("engine: shutting down")
)

// Refusal is the error of a request the engine refuses for a reason the
// caller can act on: Err is the sentinel it matches (errors.Is), Problem
// what is wrong, written for the caller without any package prefix (the
// API sends it as the ErrorInfo's "problem" and the MCP front hands it to
// the model as is, as tools.ArgumentError's Problem).
type Refusal struct {
	Err     error
	Problem string
}

func (r *Refusal) Error() string { return r.Err.Error() + ": " + r.Problem }

// Unwrap makes errors.Is(err, r.Err) true.
func (r *Refusal) Unwrap() error { return r.Err }

// badRepeatOf starts the problem of every ErrBadRepeatOf refusal.
const badRepeatOf = "repeat_of does not cite a settled execution of this actor and tool"

func refuse(sentinel error, format string, args ...any) error {
	return &Refusal{Err: sentinel, Problem: fmt.Sprintf(format, args...)}
}

// Problem is the caller-facing problem of the *Refusal or
// *tools.ArgumentError in err's chain, or "" when there is none.
func Problem(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Problem
	}
	return tools.ArgumentProblem(err)
}

// Channel performs executions on targets of one kind; the engine knows a
// channel only through this seam and Config.Channels (doc.go says how to add
// one). Implemented by the httpchannel and hostchannel adapters.
type Channel interface {
	// Dispatch performs the action once under the execution's ID: one
	// attempt, never retried inside the channel (retry.go).
	Dispatch(ctx context.Context, c Call) Attempt
	// Query asks the target what became of the execution, without acting.
	Query(ctx context.Context, c Call) Attempt
	// Identity is what the canonical intent record says of the tool's
	// target and action; it enters the fingerprint, so it must be stable
	// across releases for an unchanged catalog entry.
	Identity(tool *tools.Tool, target *tools.Target) Identity
}

// Identity is a channel's part of the canonical intent record (docs/design §3).
type Identity struct {
	// Target names the target the way its channel addresses it (HTTP:
	// scheme+host+path template; SSH: host key fingerprint and account).
	Target string
	// Method is the protocol verb, if the channel has one.
	Method string
	// Command and Cwd are the argv template and working directory of a
	// channel that runs commands.
	Command []string
	Cwd     string
}

// Call is what a channel needs to act.
type Call struct {
	Execution *recordv1.Execution
	Tool      *tools.Tool
	Target    *tools.Target
	// Arguments with defaults materialised and secrets in clear (memory only).
	Arguments map[string]any
	// Recovery is set when the call re-sends or queries after an unknown
	// outcome: an answer that only says "still in progress" (409) is then
	// not an outcome.
	Recovery bool
	// RecordTask, set on dispatches (and recovery re-sends), durably records
	// the handle the target gave the execution mid-dispatch (an upstream MCP
	// server's task ID) on the execution (target_task_id) before it
	// returns; a channel calls it before it waits for the task's outcome, so
	// a later Query can ask about it even if this process dies (task.go).
	RecordTask func(taskID string) error
	// Delay, on dispatches (and re-sends), is how long after the send time
	// recorded for it (dispatched_at, last_sent_at) the call starts: the
	// settle point counts from that record. Budget takes it off a bound.
	Delay time.Duration
}

// Budget is what is left of an in-flight bound counted from the recorded
// send time (the dispatch timeout, or the longer InFlight the channel's
// absences report) when the call starts. A channel bounds the part of its
// work that may still reach the target by it, so nothing it sends is on its
// way after the settle point; at zero or less it is too late to send, and
// it returns NotSent.
func (c Call) Budget(bound time.Duration) time.Duration { return bound - c.Delay }

// TooLate is what a channel returns when Budget(bound) is used up before it
// sent anything.
func (c Call) TooLate(bound time.Duration) Attempt {
	return Attempt{Class: NotSent, Reason: fmt.Sprintf("the send started %s after it was recorded, past the %s it may take: nothing was sent", c.Delay, bound)}
}

// AttemptClass is what a dispatch or query proved.
type AttemptClass int

const (
	// Observed: the target answered (Result and Outcome are set).
	Observed AttemptClass = iota + 1
	// NotSent: provably nothing reached the target.
	NotSent
	// Unknown: something may have reached the target; no answer was seen.
	Unknown
	// Absent: a query found that the target has no record of the execution.
	// It proves nothing happened only when Durable, or when observed after
	// the settle point (see recoverOne); earlier it is no evidence.
	Absent
	// Unsupported: the channel cannot answer this question for this tool.
	Unsupported
)

// Attempt is a channel's answer.
type Attempt struct {
	Class   AttemptClass
	Outcome recordv1.Outcome
	// Result is the answer as stored and shown: the channel fills the
	// fields its kind of answer has (recordv1.Result; doc.go).
	Result *recordv1.Result
	// Reason says what happened, for the journal (never secrets).
	Reason string
	// Final, with NotSent: dispatching again under the same execution ID
	// cannot succeed (a host agent never re-runs an ID), or the failure
	// will not pass by itself (a host key mismatch, a refused login), so
	// the execution rests at not_executed at once instead of spending the
	// dispatch retries (retry.go).
	Final bool
	// Durable, with Absent: the target has recorded that it will never act
	// on this execution ID (a host agent's not_started marker), so the
	// absence holds whenever it is observed, settle or not.
	Durable bool
	// InFlight, with Absent: how long after its send the channel's request
	// may still reach the target, when that is longer than the tool's
	// dispatch timeout (a host agent's Run deadline). The settle point is
	// counted from the longer of the two.
	InFlight time.Duration
}

// Authorizer contributes the first rules of the decision order (docs/design §9):
// the gates every execution passes before the engine's own session and
// approval rules (see decisionOrder). Implemented by *policy.Policy (the
// vault rule, then the actor rule); nil: only the engine's rules.
type Authorizer interface {
	Rules() []Rule
}

// Rule is one step of the decision order. Decide returns the zero Decision
// to pass the execution to the next rule.
type Rule struct {
	Name   string
	Decide func(ctx context.Context, x *recordv1.Execution, tool *tools.Tool) Decision
}

// Decision is one rule's verdict: reject, wait for approval, or (zero) pass.
type Decision struct {
	Reject       bool
	NeedApproval bool
	Reason       string
	// Code is what Reason is about, recorded with it (REASON_CODE_OTHER
	// when unset): the code readers branch on, never the text.
	Code recordv1.ReasonCode
	// Transient marks a rejection whose cause passes (a locked vault): the
	// rejected execution is not indexed for matching, so a retry after
	// the cause is gone is a new execution rather than the same rejection.
	Transient bool
}

// Config names the engine's dependencies.
type Config struct {
	Logger hclog.Logger
	Store  *store.Store
	// Catalog is the catalog in force at start; SetCatalog replaces it.
	Catalog *tools.Catalog
	// CatalogVersion names it (catalog.Version; default "unversioned").
	CatalogVersion string
	Fingerprinter  *fingerprint.Fingerprinter
	Channels       map[tools.Channel]Channel
	Authorizer     Authorizer
	// Clock defaults to time.Now.
	Clock func() time.Time
	// NewID defaults to "act_" + a monotonic ULID. Clock and NewID are all
	// the engine reads of time and chance (retry jitter is drawn from the
	// execution ID: RetryPolicy.BackoffOf), so a simulator that sets them and
	// runs in a synctest bubble replays a schedule from its seed.
	NewID func() string
	// MaxDispatches bounds dispatches of one execution after not_executed
	// failures (default 3).
	MaxDispatches int
	// Recovery tunes the recovery worker.
	Recovery RecoveryConfig
	// Sessions sets the session rule of the decision order.
	Sessions SessionConfig
	// ApprovalTTL is how long an execution may await approval before it is
	// rejected as expired (default 10m).
	ApprovalTTL time.Duration
	// Sealer seals secret arguments at rest so an execution accepted before
	// a restart can be sent after it (secrets.go). Nil: they live in memory
	// only, and a restart before dispatch cancels the execution.
	Sealer Sealer
	// Observer, when set, is told about every channel call (observe.go).
	Observer Observer
}

// RecoveryConfig tunes recovery of unknown outcomes (see recovery.go for
// how the work is scheduled).
type RecoveryConfig struct {
	// Interval is how often expired approvals are rejected, and the longest
	// the recovery queue sleeps before it reads the clock again (default 1s).
	Interval time.Duration
	// MinBackoff, MaxBackoff bound the delay between attempts on one
	// execution (defaults 1s, 5m). MinBackoff is also the backoff floor: no
	// two recovery queries of one execution start less than MinBackoff
	// apart, whatever asks for them.
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts before the execution goes to needs_review (default 30).
	// Only queries made when an execution was due count; a query pulled
	// earlier by an attaching retry does not.
	MaxAttempts int
	// Workers is how many recovery queries (and start-up dispatches) run
	// at once (default 4).
	Workers int
	// PerTarget is how many of them may work on one target at once
	// (default 2), so a slow target cannot hold every worker.
	PerTarget int
}

// Engine runs executions.
type Engine struct {
	cfg Config
	log hclog.Logger
	st  *store.Store
	// rules is the decision order (decisionOrder), fixed at New.
	rules []Rule

	// catalog is the catalog in force; catalogChanged is closed (and
	// replaced) when SetCatalog installs another one.
	catalog        atomic.Pointer[catalogInForce]
	catalogMu      sync.Mutex
	catalogChanged chan struct{}

	watchMu  sync.Mutex
	watchers map[string]map[chan *recordv1.Execution]struct{}

	// secrets holds arguments in clear for executions not yet dispatched
	// whose tool marks arguments secret: they never touch the disk.
	secretsMu sync.Mutex
	secrets   map[string]map[string]any
	// sealedWaiting are executions whose sealed arguments wait for the
	// vault to be unlocked (ResumeSealed).
	sealedWaiting map[string]struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// rq holds recovery and start-up work by due time (recovery.go);
	// rstate what recovery remembers per execution between rounds.
	rq       *dueq.Queue[job]
	rstateMu sync.Mutex
	rstate   map[string]*recoveryState

	// dispatchRetry and recoveryRetry are the engine's retry rules
	// (retry.go), fixed at New from MaxDispatches and Recovery.
	dispatchRetry, recoveryRetry RetryPolicy

	// sessionsFailed is closed when an authorized session was found to
	// disagree with its journal record (sessions.go); sessionMismatches
	// holds what was found (guarded by sessionMu).
	sessionMu         sync.Mutex
	sessionMismatches []store.Mismatch
	sessionsFailed    chan struct{}
	sessionFailOnce   sync.Once
	// clearedSessions: session id -> clearedSession (checkSession).
	clearedSessions sync.Map
}

// New builds an engine. Call Start to run recovery, Close to stop.
func New(cfg Config) (*Engine, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("engine: Config.Store is required")
	case cfg.Catalog == nil:
		return nil, errors.New("engine: Config.Catalog is required")
	case cfg.Fingerprinter == nil:
		return nil, errors.New("engine: Config.Fingerprinter is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.CatalogVersion == "" {
		cfg.CatalogVersion = "unversioned"
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return "act_" + ulid.Make().String() }
	}
	if cfg.ApprovalTTL <= 0 {
		cfg.ApprovalTTL = 10 * time.Minute
	}
	if cfg.MaxDispatches <= 0 {
		cfg.MaxDispatches = 3
	}
	r := &cfg.Recovery
	if r.Interval <= 0 {
		r.Interval = time.Second
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = time.Second
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 5 * time.Minute
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 30
	}
	if r.Workers <= 0 {
		r.Workers = 4
	}
	if r.PerTarget <= 0 {
		r.PerTarget = 2
	}
	rq, err := dueq.New[job](dueq.Config{Clock: cfg.Clock, GroupLimit: r.PerTarget, MaxWait: r.Interval})
	if err != nil {
		return nil, fmt.Errorf("engine: recovery queue: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		cfg:            cfg,
		log:            cfg.Logger.Named("engine"),
		st:             cfg.Store,
		watchers:       map[string]map[chan *recordv1.Execution]struct{}{},
		secrets:        map[string]map[string]any{},
		sealedWaiting:  map[string]struct{}{},
		sessionsFailed: make(chan struct{}),
		ctx:            ctx,
		cancel:         cancel,
		rq:             rq,
		rstate:         map[string]*recoveryState{},

		dispatchRetry: RetryPolicy{Min: r.MinBackoff / 4, Max: r.MaxBackoff, Limit: cfg.MaxDispatches, Jitter: true},
		recoveryRetry: RetryPolicy{Min: r.MinBackoff, Max: r.MaxBackoff, Limit: r.MaxAttempts},
	}
	e.rules = decisionOrder(cfg.Authorizer, e)
	e.catalog.Store(&catalogInForce{cat: cfg.Catalog, version: cfg.CatalogVersion})
	e.catalogChanged = make(chan struct{})
	cfg.Store.OnCommit(e.notify)
	return e, nil
}

// SubmitInput is one requested action.
type SubmitInput struct {
	Actor     string
	Tool      string
	Arguments json.RawMessage
	// Scope is the explicit run id; "" scopes by actor.
	Scope    string
	Evidence *recordv1.Evidence
}

// SubmitResult tells the caller what its request became.
type SubmitResult struct {
	Disposition recordv1.Disposition
	Execution   *recordv1.Execution
	Note        string
}

const maxNameLen = 256

// Submit matches the request to a prior execution of the same intent or
// creates a new one; the check and the insert are one atomic step.
func (e *Engine) Submit(ctx context.Context, in SubmitInput) (*SubmitResult, error) {
	if in.Actor == "" || len(in.Actor) > maxNameLen || len(in.Scope) > maxNameLen {
		return nil, fmt.Errorf("%w: actor is required and actor and intent scope must be at most %d bytes", ErrInvalidRequest, maxNameLen)
	}
	if err := actorname.Check(in.Actor); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	cat := e.catalog.Load()
	tool, ok := cat.cat.Tools[in.Tool]
	if !ok {
		return nil, refuse(ErrUnknownTool, "%q is not in the catalog (see latch_executions or the catalog for tool names)", in.Tool)
	}
	target := cat.cat.Targets[tool.Target]
	args, err := tool.PrepareArguments(in.Arguments)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	ch := e.cfg.Channels[target.Channel]
	if ch == nil {
		return nil, refuse(ErrUnknownTool, "tool %q acts on target %q over channel %q, which this control plane does not serve", in.Tool, tool.Target, target.Channel)
	}
	repeatOf, plain := tool.SplitRepeatOf(args)
	scope := in.Scope
	if scope == "" {
		scope = "actor:" + in.Actor
	} else {
		scope = "run:" + scope
	}
	intent := intentOf(in.Actor, scope, tool, target, ch.Identity(tool, target), plain, repeatOf)
	record, err := e.cfg.Fingerprinter.Record(intent, tool.Fingerprint.Ignore, tool.Fingerprint.Secret)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	fp := e.cfg.Fingerprinter.Sum(record)
	stored, err := storedArguments(plain, tool.Fingerprint.Secret)
	if err != nil {
		return nil, err
	}

	// The decision is taken before the atomic step (an Authorizer may do
	// I/O) and recorded in it, so accepted and its verdict share one commit.
	sessionID, sessionKey := e.sessionFor(in.Actor, in.Scope, in.Evidence)
	decided, code, reason, transient := e.decide(ctx, &recordv1.Execution{Actor: in.Actor, IntentScope: scope, Tool: tool.Name, Evidence: in.Evidence, SessionId: sessionID}, tool)
	var observed *recordv1.Observation // observe mode: the verdicts recorded, not applied (observemode.go)
	if tool.Observed() {
		decided, code, reason, observed = observation(tool, decided, code, reason)
	}
	now := e.cfg.Clock()
	var res *SubmitResult
	var fresh *recordv1.Execution
	e.st.WarmLatest(fp) // the writer's lookup then hits the read cache
	err = e.st.Update(ctx, func(tx *store.Tx) error {
		res, fresh = nil, nil
		var obs *recordv1.Observation
		if observed != nil {
			obs = proto.Clone(observed).(*recordv1.Observation) // this attempt's own: a retried commit starts afresh
		}
		if err := e.touchSession(tx, sessionID, sessionKey, in.Actor, in.Evidence, now); err != nil {
			return err
		}
		if repeatOf != "" {
			cited, err := tx.Execution(repeatOf)
			if errors.Is(err, store.ErrNotFound) || (err == nil && (cited.GetActor() != in.Actor || cited.GetTool() != tool.Name)) {
				return refuse(ErrBadRepeatOf, "%s: %s is not an execution of tool %s by this actor", badRepeatOf, repeatOf, tool.Name)
			}
			if err != nil {
				return err
			}
			if err := tx.Check(cited); err != nil && !errors.Is(err, store.ErrResultIntegrity) {
				return err
			}
			if !lifecycle.Settled(cited.GetState()) {
				return refuse(ErrBadRepeatOf, "%s: %s is still %s; wait for its outcome (latch_execution_status) before repeating it", badRepeatOf, repeatOf, lifecycle.Name(cited.GetState()))
			}
		}
		if tool.SideEffecting() {
			prior, err := tx.Latest(fp)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			// The prior decides whether this call is sent: it must agree
			// with its journal records before it can (a forged state must
			// not turn a retry into a second effect). A result that fails
			// its hash still attaches, to an execution moved to
			// needs_review in this same commit; the result is withheld.
			if err == nil {
				if cerr := tx.Check(prior); cerr != nil {
					if !errors.Is(cerr, store.ErrResultIntegrity) {
						return cerr
					}
					if reason, review := e.integrityReview(prior, cerr); review {
						if err := e.stepCode(tx, prior, recordv1.State_STATE_NEEDS_REVIEW, now, recordv1.EntryKind_ENTRY_KIND_INTEGRITY, recordv1.ReasonCode_REASON_CODE_RESULT_INTEGRITY, reason, false); err != nil {
							return err
						}
					}
				}
			}
			if err == nil && matches(prior, in.Actor, scope, now) && obs != nil {
				observePrior(obs, prior)
			} else if err == nil && matches(prior, in.Actor, scope, now) {
				res = attachResult(prior)
				_, err := tx.Append(&recordv1.JournalEntry{
					Time: timestamppb.New(now), ExecutionId: prior.GetId(), EntryKind: recordv1.EntryKind_ENTRY_KIND_ATTACH,
					From: prior.GetState(), To: prior.GetState(), Actor: in.Actor,
					Reason: res.Note, Evidence: in.Evidence, Execution: prior,
				})
				return err
			}
		}
		x := &recordv1.Execution{
			Id: e.cfg.NewID(), Fingerprint: fp, Actor: in.Actor, IntentScope: scope,
			Tool: tool.Name, Target: tool.Target, Channel: string(target.Channel), Replay: string(tool.Replay),
			CanonicalIntent: record, RepeatOf: repeatOf, Arguments: stored,
			AttachWindowSeconds: int64(tool.AttachWindow / time.Second), UntilResolved: tool.UntilResolved,
			AcceptedAt: timestamppb.New(now), Evidence: in.Evidence, SessionId: sessionID,
			CatalogVersion: cat.version, Observation: obs,
		}
		tx.Fresh(x.GetId())
		if err := e.step(tx, x, recordv1.State_STATE_ACCEPTED, now, recordv1.EntryKind_ENTRY_KIND_TRANSITION, "request accepted", tool.SideEffecting() && !transient); err != nil {
			return err
		}
		if len(tool.Fingerprint.Secret) > 0 && decided != recordv1.State_STATE_REJECTED {
			if box := e.sealArguments(x.GetId(), args); box != nil {
				tx.PutSealedArguments(x.GetId(), box)
			}
		}
		why := reason
		if obs != nil && decided == recordv1.State_STATE_AUTHORIZED {
			why = observedReason(obs)
		}
		if err := e.stepCode(tx, x, decided, now, recordv1.EntryKind_ENTRY_KIND_TRANSITION, code, why, false); err != nil {
			return err
		}
		// Dispatched is recorded in the same commit (docs/design §11: the
		// critical path is two durable writes, before dispatch and after
		// observation); the first byte is sent only after it returns.
		if decided == recordv1.State_STATE_AUTHORIZED {
			if err := e.step(tx, x, recordv1.State_STATE_DISPATCHED, now, recordv1.EntryKind_ENTRY_KIND_TRANSITION, "dispatch attempt 1", false); err != nil {
				return err
			}
		}
		fresh = x
		res = &SubmitResult{Disposition: recordv1.Disposition_DISPOSITION_NEW, Execution: x, Note: "new execution " + x.GetId()}
		if decided == recordv1.State_STATE_REJECTED {
			res.Disposition = recordv1.Disposition_DISPOSITION_REJECTED
			res.Note = "rejected: " + reason
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrClosed) {
			return nil, ErrClosed
		}
		return nil, err
	}
	if fresh != nil {
		if len(tool.Fingerprint.Secret) > 0 && decided != recordv1.State_STATE_REJECTED {
			e.secretsMu.Lock()
			e.secrets[fresh.GetId()] = args
			e.secretsMu.Unlock()
		}
		if decided == recordv1.State_STATE_AUTHORIZED {
			e.startSend(fresh.GetId(), proto.Clone(fresh).(*recordv1.Execution))
		}
		if decided == recordv1.State_STATE_AWAITING_APPROVAL {
			e.logPending(fresh)
		}
		return res, nil
	}
	if res.Disposition == recordv1.Disposition_DISPOSITION_RECOVERED {
		e.hurry(res.Execution)
	}
	return res, nil
}

// matches is docs/design §5's rule; the fingerprint already covers actor and scope,
// which are compared again so a fingerprint collision can never cross actors.
func matches(prior *recordv1.Execution, actor, scope string, now time.Time) bool {
	if mutantNoAttach || prior.GetActor() != actor || prior.GetIntentScope() != scope || !lifecycle.Attachable(prior.GetState()) {
		return false
	}
	if prior.GetUntilResolved() {
		return true
	}
	window := time.Duration(prior.GetAttachWindowSeconds()) * time.Second
	return now.Sub(prior.GetAcceptedAt().AsTime()) <= window
}

func attachResult(prior *recordv1.Execution) *SubmitResult {
	r := &SubmitResult{Execution: prior, Disposition: recordv1.Disposition_DISPOSITION_ATTACHED}
	id := prior.GetId()
	switch prior.GetState() {
	case recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED:
		r.Note = "attached to " + id + ", not yet dispatched; it continues, nothing is sent twice"
	case recordv1.State_STATE_AWAITING_APPROVAL:
		r.Note = "attached to " + id + ", which awaits approval; no second approval request was made"
	case recordv1.State_STATE_DISPATCHED:
		r.Note = fmt.Sprintf("%s was dispatched at %s and is in flight; not re-sent: its result is returned when the target answers", id, stamp(prior.GetDispatchedAt()))
	case recordv1.State_STATE_OUTCOME_UNKNOWN:
		r.Disposition = recordv1.Disposition_DISPOSITION_RECOVERED
		r.Note = fmt.Sprintf("%s was dispatched at %s and its outcome is unknown; not re-sent: it is being established from the target", id, stamp(prior.GetDispatchedAt()))
	case recordv1.State_STATE_NEEDS_REVIEW:
		r.Note = id + " needs an operator's review (its outcome is unknown and the tool cannot be safely re-sent); not re-sent"
		if lifecycle.ReasonOf(prior) == recordv1.ReasonCode_REASON_CODE_RESULT_INTEGRITY {
			r.Note = id + " completed, but its stored result failed its integrity check (result_integrity) and is withheld; an operator's review decides; not re-sent"
		}
	case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED:
		r.Note = fmt.Sprintf("%s already completed at %s; returning its stored result, not re-sent (to repeat it on purpose, pass repeat_of=%s)", id, stamp(prior.GetCompletedAt()), id)
	case recordv1.State_STATE_REJECTED:
		r.Disposition = recordv1.Disposition_DISPOSITION_REJECTED
		r.Note = id + " was rejected: " + prior.GetReason()
	}
	return r
}

func stamp(t *timestamppb.Timestamp) string {
	if t == nil {
		return "(not recorded)"
	}
	return t.AsTime().UTC().Format(time.RFC3339Nano)
}

// intentOf builds the canonical intent record's fields (docs/design §3); id is
// the channel's part (Channel.Identity).
func intentOf(actor, scope string, tool *tools.Tool, target *tools.Target, id Identity, args map[string]any, repeatOf string) fingerprint.Intent {
	return fingerprint.Intent{
		Actor: actor, Tool: tool.Name, Channel: string(target.Channel), CredentialRef: target.Credential,
		Target: id.Target, Method: id.Method, Command: id.Command, Cwd: id.Cwd,
		Arguments: args, IntentScope: scope, RepeatOf: repeatOf,
	}
}

// storedArguments is what the execution record keeps of the arguments: secret
// arguments are left out (the fingerprint holds their keyed HMAC).
func storedArguments(args map[string]any, secret []string) ([]byte, error) {
	kept := make(map[string]any, len(args))
	for k, v := range args {
		kept[k] = v
	}
	for _, k := range secret {
		if _, ok := kept[k]; ok {
			kept[k] = "[secret]"
		}
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	return b, nil
}
