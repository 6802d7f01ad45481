package mcpfront

import (
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// A call without a task that waits for a person (an approval, a session
// authorization) answers within Config.PersonWait instead of WaitBound: a
// person may take minutes, and a client with a 20 s timeout would see only
// "Request timed out". The answer names the execution, what it waits for and
// the operator command; the agent's identical call later attaches to the same
// execution and gets its outcome. The control plane logs the pending
// approval or session at info with the same command (engine.logPending).

// personTimer fires PersonWait after the execution started waiting for a
// person, and is disarmed while it waits for anything else (an approved
// execution that is dispatched is waited for up to WaitBound as usual).
type personTimer struct {
	bound time.Duration
	t     *time.Timer
}

func (f *Front) newPersonTimer(exec *recordv1.Execution) *personTimer {
	p := &personTimer{bound: f.cfg.PersonWait}
	p.update(exec)
	return p
}

// update arms or disarms the timer for exec's state.
func (p *personTimer) update(exec *recordv1.Execution) {
	_, _, waits := personCommand(exec)
	switch {
	case waits && p.t == nil:
		p.t = time.NewTimer(p.bound)
	case !waits && p.t != nil:
		p.t.Stop()
		p.t = nil
	}
}

// C fires when the bound passed; nil (never) while disarmed.
func (p *personTimer) C() <-chan time.Time {
	if p.t == nil {
		return nil
	}
	return p.t.C
}

func (p *personTimer) stop() {
	if p.t != nil {
		p.t.Stop()
	}
}

// personNote makes sure the answer of a call that waits for a person names
// the operator command (the note's reason usually does already).
func personNote(res *mcp.CallToolResult, exec *recordv1.Execution, args string) *mcp.CallToolResult {
	what, cmd, ok := personWait(exec, args)
	if !ok || res == nil {
		return res
	}
	cr, isCR := res.StructuredContent.(CallResult)
	if !isCR || strings.Contains(cr.Note, cmd) {
		return res
	}
	cr.Note = strings.TrimSpace(cr.Note) + " It waits for " + what + "; the operator runs: " + cmd
	res.StructuredContent = cr
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			tc.Text = cr.Note
		}
	}
	return res
}
