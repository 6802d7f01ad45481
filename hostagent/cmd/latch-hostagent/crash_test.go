package main

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/hostagent/markers"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

const (
	stateBegun     = hostagentv1.MarkerState_MARKER_STATE_BEGUN
	stateCompleted = hostagentv1.MarkerState_MARKER_STATE_COMPLETED
	stateFailed    = hostagentv1.MarkerState_MARKER_STATE_FAILED
)

// TestScriptMarkersSurviveKill SIGKILLs a real agent while 8 scripts begin
// and finish markers as fast as they can (so the kill lands inside group
// commits: between a mirror frame and its Badger commit, or the other way
// round), three times, then once more and has it rebuild its store from
// the mirror log alone. After every start, every state the agent reported
// must be there (a reported begin is begun or later, a reported complete
// or fail is exactly that), what it never reported may be there or not but
// only in a state the marker table allows, and the mirror log must say
// exactly what the store says.
func TestScriptMarkersSurviveKill(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	var (
		mu        sync.Mutex
		reported  = map[string]hostagentv1.MarkerState{} // the last state the agent answered with
		attempted = map[string]bool{}
	)
	check := func(a *agentProc, when string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for id := range attempted {
			resp, err := a.Client.Status(ctxT(t), &hostagentv1.StatusRequest{ExecutionId: id})
			got := hostagentv1.MarkerState_MARKER_STATE_UNSPECIFIED
			switch {
			case status.Code(err) == codes.NotFound:
			case err != nil:
				t.Fatalf("%s: Status(%s): %v", when, id, err)
			default:
				got = resp.GetMarker().GetState()
			}
			want, ok := reported[id]
			switch {
			case ok && want == stateBegun && (got == stateBegun || got == stateCompleted || got == stateFailed):
			case ok && want != stateBegun && got == want:
			case !ok && (got == hostagentv1.MarkerState_MARKER_STATE_UNSPECIFIED || got == stateBegun || got == stateCompleted || got == stateFailed):
			default:
				t.Errorf("%s: %s is %s; the agent had answered %s (reported: %v)", when, id, hostagent.MarkerName(got), hostagent.MarkerName(want), ok)
			}
		}
		list, err := a.Client.ListMarkers(ctxT(t), &hostagentv1.ListMarkersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		logged, err := markers.ReadMirror(execdir.MirrorLog(data))
		if err != nil {
			t.Fatalf("%s: ReadMirror: %v", when, err)
		}
		inLog := map[string]hostagentv1.MarkerState{}
		for _, m := range logged {
			inLog[m.GetExecutionId()] = m.GetState()
		}
		n := 0
		for _, m := range list.GetMarkers() {
			if st := m.GetState(); st == stateBegun || st == stateCompleted || st == stateFailed {
				n++
				if inLog[m.GetExecutionId()] != st {
					t.Errorf("%s: %s is %s in the store, %s in the mirror log", when, m.GetExecutionId(), hostagent.MarkerName(st), hostagent.MarkerName(inLog[m.GetExecutionId()]))
				}
			}
		}
		if n != len(inLog) {
			t.Errorf("%s: the store holds %d script markers, the mirror log %d", when, n, len(inLog))
		}
	}
	load := func(a *agentProc, round int) {
		t.Helper()
		var (
			ok   atomic.Int64
			wg   sync.WaitGroup
			stop atomic.Bool
		)
		ctx := ctxT(t)
		for w := range 8 {
			wg.Go(func() {
				for i := 0; i < 2000 && !stop.Load(); i++ {
					id := "k" + strconv.Itoa(round) + "_" + strconv.Itoa(w) + "_" + strconv.Itoa(i)
					mu.Lock()
					attempted[id] = true
					mu.Unlock()
					if _, err := a.Client.MarkerBegin(ctx, &hostagentv1.MarkerBeginRequest{ExecutionId: id}); err != nil {
						return
					}
					mu.Lock()
					reported[id] = stateBegun
					mu.Unlock()
					ok.Add(1)
					var (
						err error
						to  = stateCompleted
					)
					if i%3 == 2 {
						to = stateFailed
						_, err = a.Client.MarkerFail(ctx, &hostagentv1.MarkerFailRequest{ExecutionId: id, Reason: "step failed"})
					} else {
						_, err = a.Client.MarkerComplete(ctx, &hostagentv1.MarkerCompleteRequest{ExecutionId: id, ResultJson: `{"rows":` + strconv.Itoa(i) + `}`})
					}
					if err != nil {
						return
					}
					mu.Lock()
					reported[id] = to
					mu.Unlock()
					ok.Add(1)
				}
			})
		}
		deadline := time.Now().Add(20 * time.Second)
		for ok.Load() < 300 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		a.Kill()
		if ok.Load() < 300 {
			t.Fatalf("round %d: only %d marker calls answered in 20s", round, ok.Load())
		}
	}
	for round := range 3 {
		a := startAgent(t, agentOpts{data: data})
		check(a, "start "+strconv.Itoa(round))
		load(a, round)
	}
	a := startAgent(t, agentOpts{data: data})
	check(a, "after the last kill")
	load(a, 3)
	if err := os.WriteFile(filepath.Join(data, "markers", "MANIFEST"), []byte("garbage, not a badger manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startAgent(t, agentOpts{data: data})
	if aside, _ := filepath.Glob(filepath.Join(data, "markers.corrupt-*")); len(aside) != 1 {
		t.Fatalf("moved-aside stores = %q, want one (the store must have been rebuilt)", aside)
	}
	check(b, "after the rebuild from the mirror log")
	if _, err := os.Stat(execdir.MirrorLog(data) + ".rebuilding"); err == nil {
		t.Errorf("the rebuild finished but left %s.rebuilding", execdir.MirrorLog(data))
	}
}
