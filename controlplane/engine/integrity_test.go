package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/httpchannel"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const forgeryCatalog = `
targets:
  releases:
    channel: http
    base_url: %s
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/v1/releases/by-key/{execution_id}"}
tools:
  deploy_release:
    description: Deploy.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}, region: {type: string}}}
    defaults: {region: us-east-1}
    target: releases
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}", region: "{{region}}"}}
    replay: idempotency_key
    attach_window: 1h
`

// realEngine is the engine over a Badger dir with the real HTTP channel. It
// runs no start-up state check (server.New does): it stands for a large
// store whose background pass has not reached the forged execution yet, so
// the gates on attach and on result reads are what is tested.
type realEngine struct {
	e  *engine.Engine
	st *store.Store
}

func openEngine(t *testing.T, dir, url string) *realEngine {
	t.Helper()
	kv, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := tools.Parse("catalog.yaml", []byte(fmt.Sprintf(forgeryCatalog, url)))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := fingerprint.New(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	hd, err := httpdispatch.New(httpdispatch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := httpchannel.New(httpchannel.Config{Dispatcher: hd})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Logger: hclog.NewNullLogger(), Store: st, Catalog: cat, Fingerprinter: fp,
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: hc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := &realEngine{e: e, st: st}
	t.Cleanup(r.close)
	return r
}

func (r *realEngine) close() {
	if r.e != nil {
		r.e.Close()
		r.st.Close()
		r.e = nil
	}
}

func (r *realEngine) deploy(t *testing.T, version string) (*engine.SubmitResult, error) {
	t.Helper()
	return r.e.Submit(context.Background(), engine.SubmitInput{Actor: "alice", Tool: "deploy_release",
		Arguments: []byte(`{"service":"api","version":"` + version + `"}`)})
}

func (r *realEngine) waitCompleted(t *testing.T, id string) *recordv1.Execution {
	t.Helper()
	for range 400 {
		x, err := r.st.Execution(id)
		if err == nil && x.GetState() == recordv1.State_STATE_COMPLETED {
			return x
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("execution %s did not complete", id)
	return nil
}

// TestForgedStateNeverDispatchesAgain: for each forgery of a stopped store,
// the full state check names the forged execution and its journal record,
// and, with the store served anyway, an identical retry sends nothing to
// the target and no forged result reaches the caller.
func TestForgedStateNeverDispatchesAgain(t *testing.T) {
	for _, forgery := range storetest.All {
		t.Run(string(forgery), func(t *testing.T) {
			demo := demotarget.New(demotarget.Config{Logger: hclog.NewNullLogger()})
			ts := httptest.NewServer(demo)
			t.Cleanup(ts.Close)
			dir := t.TempDir()

			r := openEngine(t, dir, ts.URL)
			a, err := r.deploy(t, "1.0")
			if err != nil {
				t.Fatal(err)
			}
			b, err := r.deploy(t, "2.0")
			if err != nil {
				t.Fatal(err)
			}
			victim, other := a.Execution.GetId(), b.Execution.GetId()
			x := r.waitCompleted(t, victim)
			r.waitCompleted(t, other)
			if want := store.ResultRef(x.GetResultSha256()); x.GetResultRef() != want || len(x.GetResultSha256()) != 32 {
				t.Fatalf("result_ref = %q, result_sha256 %x; want %q naming a SHA-256", x.GetResultRef(), x.GetResultSha256(), want)
			}
			if _, res, err := r.e.Get(victim, ""); err != nil || res.GetStatus() != 201 {
				t.Fatalf("Get before forgery = %v, %v; want the 201 result", res, err)
			}
			rep, err := r.st.CheckState(context.Background(), store.CheckAll)
			if err != nil || !rep.OK() {
				t.Fatalf("CheckState before forgery = %v, %v; want ok", rep, err)
			}
			r.close()

			kv, err := badgerkv.Open(dir, badgerkv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := storetest.Forge(kv, forgery, victim, other); err != nil {
				t.Fatal(err)
			}
			if err := kv.Close(); err != nil {
				t.Fatal(err)
			}
			requests := demo.Requests()

			r = openEngine(t, dir, ts.URL)
			rep, err = r.st.CheckState(context.Background(), store.CheckAll)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || !strings.Contains(rep.String(), victim) || !strings.Contains(rep.String(), "journal record") {
				t.Errorf("CheckState after %s does not name %s and its journal record:\n%s", forgery, victim, rep)
			}

			if forgery == storetest.ResultBody {
				// Read first (latch_execution_status, a waiting call): the
				// read itself withholds the result and sends it to review.
				got, res, err := r.e.Get(victim, "alice")
				if err != nil || res != nil || got.GetState() != recordv1.State_STATE_NEEDS_REVIEW {
					t.Fatalf("Get of a forged result = %v, %v, %v; want needs_review and no result", got.GetState(), res, err)
				}
			}
			// The identical retry: attaches (result forgeries) or is refused
			// (the record or index disagrees); never a new execution.
			retry, err := r.deploy(t, "1.0")
			switch forgery {
			case storetest.ResultBody, storetest.ResultStatus:
				if err != nil || retry.Disposition != recordv1.Disposition_DISPOSITION_ATTACHED || retry.Execution.GetId() != victim ||
					retry.Execution.GetState() != recordv1.State_STATE_NEEDS_REVIEW || !strings.Contains(retry.Note, "review") {
					t.Fatalf("retry after %s = %+v, %v; want attached to %s, now in needs_review, saying so", forgery, retry, err, victim)
				}
				got, res, err := r.e.Get(victim, "")
				if err != nil || res != nil {
					t.Fatalf("Get after %s = result %v, error %v; want no result and no error", forgery, res, err)
				}
				if got.GetState() != recordv1.State_STATE_NEEDS_REVIEW || got.GetReasonCode() != recordv1.ReasonCode_REASON_CODE_RESULT_INTEGRITY || !strings.HasPrefix(got.GetReason(), "result_integrity") {
					t.Errorf("after %s the execution is %v (%v, %q), want needs_review with reason result_integrity", forgery, got.GetState(), got.GetReasonCode(), got.GetReason())
				}
				hist, err := r.st.History(victim)
				if err != nil {
					t.Fatal(err)
				}
				var reviews int
				for _, h := range hist {
					if lifecycle.EntryKindNameOf(h) == "integrity" && h.GetTo() == recordv1.State_STATE_NEEDS_REVIEW && h.GetReasonCode() == recordv1.ReasonCode_REASON_CODE_RESULT_INTEGRITY && strings.HasPrefix(h.GetReason(), "result_integrity") {
						reviews++
					}
				}
				if reviews != 1 {
					t.Errorf("journal holds %d result_integrity review record(s), want 1: %v", reviews, hist)
				}
				// Asked again: still withheld, still in review.
				if again, res, err := r.e.Get(victim, ""); err != nil || res != nil || again.GetState() != recordv1.State_STATE_NEEDS_REVIEW {
					t.Errorf("second Get = %v, %v, %v; want needs_review without a result", again.GetState(), res, err)
				}
			default:
				if !errors.Is(err, store.ErrStateMismatch) || !strings.Contains(err.Error(), store.VerifyCommand) {
					t.Fatalf("retry after %s = %+v, %v; want an error matching store.ErrStateMismatch naming %q", forgery, retry, err, store.VerifyCommand)
				}
			}
			if forgery == storetest.State {
				if _, _, err := r.e.Get(victim, ""); !errors.Is(err, store.ErrStateMismatch) {
					t.Errorf("Get of the forged record = %v, want store.ErrStateMismatch", err)
				}
			}
			if got := demo.Requests(); got != requests {
				t.Errorf("the target got %d request(s) after %s, want none", got-requests, forgery)
			}
			if got := demo.Effects(demotarget.KindRelease); got != 2 {
				t.Errorf("effects at the target = %d, want the 2 of before the forgery", got)
			}
		})
	}
}
