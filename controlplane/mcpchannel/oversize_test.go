package mcpchannel_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/mcpchannel"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestOversizedAnswerIsObservedOnce: a read_only upstream tool answers over
// the frame cap. The answer arrived: the execution is completed with the
// result stored truncated and the reason, the call reached the upstream
// exactly once, and the upstream's session (its process) lives on. Before,
// the oversized line ended the session, the call was outcome_unknown, and
// recovery sent it again and again.
func TestOversizedAnswerIsObservedOnce(t *testing.T) {
	up := newCounter(t)
	catalog := writeCatalog(t, fmt.Sprintf("upstreams:\n  counter:\n    transport: stdio\n    command: [%q, --state, %q]\n    timeout: 20s\n", countupBin, up.dir)+`
tools:
  counter.big:
    upstream: counter
    tool: big
    replay: read_only
`)
	data := t.TempDir()
	startLatch(t, data, catalog)
	c := client(t, data)
	pid := up.pid()
	size := mcpchannel.DefaultMaxFrame + 1<<20
	r := submit(t, c, "counter.big", fmt.Sprintf(`{"bytes":%d}`, size))
	got := waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NEEDS_REVIEW, recordv1.State_STATE_NOT_EXECUTED)
	x := got.GetExecution()
	if x.GetState() != recordv1.State_STATE_COMPLETED || x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("execution = %v %v (%s), want completed, succeeded", x.GetState(), x.GetOutcome(), x.GetReason())
	}
	if !strings.Contains(x.GetReason(), "over the") || !strings.Contains(x.GetReason(), "frame cap") {
		t.Errorf("reason = %q, want it to say the answer was over the frame cap", x.GetReason())
	}
	res := got.GetResult()
	if !res.GetBodyTruncated() || len(res.GetBody()) != mcpchannel.DefaultMaxResult || !strings.Contains(string(res.GetBody()), "xxxxxxxx") {
		t.Errorf("result: truncated %v, %d bytes, want truncated to %d bytes of the answer", res.GetBodyTruncated(), len(res.GetBody()), mcpchannel.DefaultMaxResult)
	}
	if !strings.Contains(res.GetSummary(), "frame cap") {
		t.Errorf("summary = %q, want the reason", res.GetSummary())
	}
	// Completed is final: nothing sends it again. A short wait would still
	// catch a recovery round already under way.
	time.Sleep(500 * time.Millisecond)
	b, _ := os.ReadFile(filepath.Join(up.dir, "calls.big"))
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Errorf("calls reaching the upstream = %d, want exactly 1", n)
	}
	if now := up.pid(); now != pid {
		t.Errorf("upstream pid %d -> %d: the oversized answer ended its session", pid, now)
	}
}
