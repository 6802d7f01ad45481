// Package observation builds the observe report: per tool in observe mode,
// what enforcement would have done with its calls, read from the
// Observation each observed execution carries (controlplane/engine's
// observemode.go records it with the decision order's and the matching
// rule's verdicts). It decides nothing and writes nothing.
//
// Imported by controlplane/admin (the ObserveReport RPC) and
// controlplane/console (its observe page).
package observation

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Source is what the report reads; implemented by *store.Store.
type Source interface {
	List(f store.Filter) ([]*recordv1.Execution, error)
	Execution(id string) (*recordv1.Execution, error)
}

// Defaults and bounds of a report.
const (
	// DefaultMaxPairs bounds the pairs listed when Options.MaxPairs is 0.
	DefaultMaxPairs = 200
	// MaxPairs is the most pairs a report lists.
	MaxPairs = 5000
	// DefaultMaxScan bounds the executions read when Options.MaxScan is 0.
	DefaultMaxScan = 200000
	page           = 500
)

// Options say what a report covers.
type Options struct {
	// Since: only executions accepted at or after it (zero: all).
	Since time.Time
	// MaxPairs bounds the pairs listed (0: DefaultMaxPairs; at most
	// MaxPairs).
	MaxPairs int
	// MaxScan bounds the executions read (0: DefaultMaxScan).
	MaxScan int
	// Now stamps the report.
	Now time.Time
}

// ErrBadOptions is matched by a report refused for its options.
var ErrBadOptions = errors.New("observation: bad options")

type row struct {
	*controlplanev1.ObservedTool
	gaps []float64
}

// Build reads the executions newest first, back to Since, and counts, per
// tool, its observed calls and what enforcement would have done with them;
// cat (the catalog in force) says each tool's mode and whether its
// contract is complete enough to enforce.
func Build(src Source, cat *tools.Catalog, opt Options) (*controlplanev1.ObserveReportResponse, error) {
	if opt.MaxPairs < 0 || opt.MaxPairs > MaxPairs || opt.MaxScan < 0 {
		return nil, fmt.Errorf("%w: max pairs must be between 0 and %d and max scan not negative", ErrBadOptions, MaxPairs)
	}
	if opt.MaxPairs == 0 {
		opt.MaxPairs = DefaultMaxPairs
	}
	if opt.MaxScan == 0 {
		opt.MaxScan = DefaultMaxScan
	}
	resp := &controlplanev1.ObserveReportResponse{GeneratedAt: timestamppb.New(opt.Now)}
	if !opt.Since.IsZero() {
		resp.Since = timestamppb.New(opt.Since)
	}
	rows := map[string]*row{}
	rowOf := func(name string) *row {
		r := rows[name]
		if r == nil {
			r = &row{ObservedTool: &controlplanev1.ObservedTool{Tool: name}}
			rows[name] = r
		}
		return r
	}
	if cat != nil {
		for name, t := range cat.Tools {
			if t.Observed() {
				rowOf(name)
			}
		}
	}
	f := store.Filter{Limit: page}
	for {
		xs, err := src.List(f)
		if err != nil {
			return nil, fmt.Errorf("observation: list executions: %w", err)
		}
		older := 0
		for _, x := range xs {
			if resp.Scanned >= int64(opt.MaxScan) {
				resp.Truncated = true
				break
			}
			resp.Scanned++
			if !opt.Since.IsZero() && x.GetAcceptedAt().AsTime().Before(opt.Since) {
				older++
				continue
			}
			o := x.GetObservation()
			if o == nil {
				continue
			}
			r := rowOf(x.GetTool())
			count(r, o)
			if o.GetPriorExecutionId() == "" {
				continue
			}
			p, err := pairOf(src, x, o)
			if err != nil {
				return nil, err
			}
			r.WouldAttach++
			if p.GetReachedTwice() {
				r.ReachedTwice++
			}
			if p.GetNewRequestId() {
				r.NewRequestId++
			}
			if p.GetNewSession() {
				r.NewSession++
			}
			if p.GetConcurrent() {
				r.Concurrent++
			}
			r.gaps = append(r.gaps, p.GetGapSeconds())
			if len(resp.Pairs) < opt.MaxPairs {
				resp.Pairs = append(resp.Pairs, p)
			}
		}
		// Newest first: a page wholly older than since ends the walk (IDs
		// are time-ordered; a page, not one record, absorbs clock skew).
		if resp.Truncated || len(xs) < page || (len(xs) > 0 && older == len(xs)) {
			break
		}
		f.After = xs[len(xs)-1].GetId()
	}
	names := make([]string, 0, len(rows))
	for name := range rows {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := rows[name]
		describe(r, cat)
		resp.Tools = append(resp.Tools, r.ObservedTool)
	}
	return resp, nil
}

// count adds x's own verdicts to its tool's row.
func count(r *row, o *recordv1.Observation) {
	r.Calls++
	if o.GetWouldHoldUncertain() {
		r.WouldHoldUncertain++
	}
	if o.GetWouldNeedApproval() {
		r.WouldNeedApproval++
	}
	if r.Replay == "" {
		r.Replay = o.GetReplay() // newest first: the latest call's
	}
}

// pairOf describes x and the prior execution enforcement would have
// attached it to.
func pairOf(src Source, x *recordv1.Execution, o *recordv1.Observation) (*controlplanev1.ObservedPair, error) {
	p := &controlplanev1.ObservedPair{
		Tool: x.GetTool(), ExecutionId: x.GetId(), PriorExecutionId: o.GetPriorExecutionId(),
		AcceptedAt: x.GetAcceptedAt(), PriorState: o.GetPriorState(),
		Concurrent: lifecycle.Moving(o.GetPriorState()),
	}
	if at := o.GetPriorAcceptedAt(); at != nil {
		p.GapSeconds = max(0, x.GetAcceptedAt().AsTime().Sub(at.AsTime()).Seconds())
	}
	prior, err := src.Execution(o.GetPriorExecutionId())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return p, nil // pruned: the counts that need it are left out
	case err != nil:
		return nil, fmt.Errorf("observation: read %s: %w", o.GetPriorExecutionId(), err)
	}
	p.ReachedTwice = reached(x) && reached(prior)
	a, b := prior.GetEvidence(), x.GetEvidence()
	switch {
	case a.GetMcpSessionId() != b.GetMcpSessionId():
		p.NewSession = true
	case a.GetJsonrpcId() != b.GetJsonrpcId():
		p.NewRequestId = true
	}
	return p, nil
}

// reached reports whether the execution's request may have reached its
// target: it was dispatched and did not end proved unsent.
func reached(x *recordv1.Execution) bool {
	if x.GetDispatchedAt() == nil {
		return false
	}
	switch x.GetState() {
	case recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_AUTHORIZED:
		return false
	}
	return true
}

// describe fills the row's mode, contract and next step from the catalog
// in force, and its gap statistics.
func describe(r *row, cat *tools.Catalog) {
	var t *tools.Tool
	if cat != nil {
		t = cat.Tools[r.Tool]
	}
	switch {
	case t == nil:
		r.NextStep = "no longer in the catalog"
	case !t.Observed():
		r.Mode, r.Replay, r.ContractComplete = string(t.Mode), string(t.Replay), t.ContractComplete()
		r.NextStep = "enforced"
	default:
		r.Mode, r.Replay, r.ContractComplete = string(t.Mode), string(t.Replay), t.ContractComplete()
		r.NextStep = "ready: set mode: enforce"
		if !t.ContractComplete() {
			r.NextStep = "needs a contract decision: replay (" + replayChoices + ")"
		}
	}
	if len(r.gaps) > 0 {
		slices.Sort(r.gaps)
		r.GapMinSeconds, r.GapMaxSeconds = r.gaps[0], r.gaps[len(r.gaps)-1]
		r.GapMedianSeconds = r.gaps[len(r.gaps)/2]
	}
}

const replayChoices = "read_only, idempotency_key, status_query or review"
