package main

import (
	"context"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/hostagenttest"
	"github.com/latchhq/latch/internal/testing/testbin"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// binPath is the latch-hostagent binary built once for all tests.
var binPath string

func TestMain(m *testing.M) {
	testbin.Main(m, []string{"github.com/latchhq/latch/hostagent/cmd/latch-hostagent"}, []*string{&binPath})
}

// agentProc is a real latch-hostagent serve process.
// agentProc is a real `latch-hostagent serve` process with a client.
type agentProc struct{ *hostagenttest.Process }

type agentOpts struct {
	data  string
	env   []string
	flags []string
}

func startAgent(tb testing.TB, o agentOpts) *agentProc {
	tb.Helper()
	return &agentProc{hostagenttest.Start(tb, hostagenttest.Options{Bin: binPath, Data: o.data, Env: o.env, Flags: o.flags})}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func (a *agentProc) run(req *hostagentv1.RunRequest) *hostagentv1.RunResponse {
	a.TB.Helper()
	resp, err := a.Client.Run(ctxT(a.TB), req)
	if err != nil {
		a.TB.Fatalf("Run(%s) = %v", req.GetExecutionId(), err)
	}
	return resp
}

// wait blocks until the marker is settled (bounded by 60s).
func (a *agentProc) wait(id string) *hostagentv1.Marker {
	a.TB.Helper()
	ctx := ctxT(a.TB)
	for range 10 {
		resp, err := a.Client.Wait(ctx, &hostagentv1.WaitRequest{ExecutionId: id, TimeoutMs: 10_000})
		if err != nil {
			a.TB.Fatalf("Wait(%s) = %v", id, err)
		}
		if waitingState(resp.GetMarker().GetState()) {
			continue
		}
		return resp.GetMarker()
	}
	a.TB.Fatalf("Wait(%s): marker never settled", id)
	return nil
}

func waitingState(s hostagentv1.MarkerState) bool {
	return s == hostagentv1.MarkerState_MARKER_STATE_STARTING || s == hostagentv1.MarkerState_MARKER_STATE_RUNNING ||
		s == hostagentv1.MarkerState_MARKER_STATE_BEGUN
}

func appendCmd(file, line string) []string {
	return []string{"/bin/sh", "-c", `echo "` + line + `" >> "` + file + `"`}
}
