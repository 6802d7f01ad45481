package mcpfront

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The registry's bounds: per session, in total; an execution followed
// once per session; a session's end forgets its follows and frees their
// slots; a closed registry takes none.
func TestLateRegistryBounds(t *testing.T) {
	g := newLateRegistry(2, 3)
	a, b := new(mcp.ServerSession), new(mcp.ServerSession)
	started := 0
	start := func() { started++ }
	la, made := g.open(context.Background(), a, nil)
	if !made || la == nil {
		t.Fatalf("open(a) = %v, %v; want a new record", la, made)
	}
	if again, made := g.open(context.Background(), a, nil); again != la || made {
		t.Errorf("open(a) again = %p, %v; want the same record %p, not new", again, made, la)
	}
	g.open(context.Background(), b, nil)

	add := func(ss *mcp.ServerSession, id string, wantWatching, wantStart bool, wantFull string) {
		t.Helper()
		w, s, full := g.add(ss, id, lateCall, start)
		if w != wantWatching || s != wantStart || full != wantFull {
			t.Errorf("add(%s) = %v, %v, %q; want %v, %v, %q", id, w, s, full, wantWatching, wantStart, wantFull)
		}
	}
	add(a, "act_1", true, true, "")
	add(a, "act_1", true, false, "") // already followed: one follow
	add(a, "act_2", true, true, "")
	add(a, "act_3", false, false, lateSessionFull)
	add(b, "act_4", true, true, "")
	add(b, "act_5", false, false, lateFrontFull)
	if started != 3 {
		t.Errorf("follows started = %d, want 3", started)
	}
	if w, s := g.counts(); w != 3 || s != 2 {
		t.Errorf("counts = %d follows, %d sessions; want 3, 2", w, s)
	}

	g.remove(a, "act_1")
	g.remove(a, "act_1") // a follow ends once
	add(b, "act_5", true, true, "")
	if w, _ := g.counts(); w != 3 {
		t.Errorf("follows after one ended and one started = %d, want 3", w)
	}

	g.end(a)
	if la.ctx.Err() == nil {
		t.Error("end(a) left its follows' context running")
	}
	g.remove(a, "act_2") // its follow ends after the session did: no double count
	if w, s := g.counts(); w != 2 || s != 1 {
		t.Errorf("counts after a's end = %d follows, %d sessions; want 2, 1", w, s)
	}
	add(a, "act_6", false, false, "") // a is gone: nothing to push to

	g.close()
	c := new(mcp.ServerSession)
	if lc, made := g.open(context.Background(), c, nil); lc != nil || made {
		t.Errorf("open on a closed registry = %v, %v; want none", lc, made)
	}
	g.remove(b, "act_4")
	add(b, "act_7", false, false, "")
	if started != 4 {
		t.Errorf("follows started = %d, want 4", started)
	}
}

// A session's follows are bounded however many executions it asks about.
func TestLateRegistryManyExecutions(t *testing.T) {
	g := newLateRegistry(maxLatePerSession, maxLateWatches)
	ss := new(mcp.ServerSession)
	g.open(context.Background(), ss, nil)
	watched := 0
	for i := range maxLatePerSession * 3 {
		if w, _, _ := g.add(ss, fmt.Sprintf("act_%d", i), lateCall, nil); w {
			watched++
		}
	}
	if watched != maxLatePerSession {
		t.Errorf("followed %d executions of one session, want %d", watched, maxLatePerSession)
	}
}

func TestLateLevels(t *testing.T) {
	g := newLateRegistry(1, 1)
	ss := new(mcp.ServerSession)
	g.open(context.Background(), ss, nil)
	if got := g.levelOf(ss); got != "" {
		t.Errorf("levelOf before setLevel = %q, want none", got)
	}
	g.setLevel(ss, "warning")
	if got := g.levelOf(ss); got != "warning" {
		t.Errorf("levelOf = %q, want warning", got)
	}
	for _, tt := range []struct {
		level, min string
		below      bool
	}{
		{"notice", "", false},
		{"notice", "info", false},
		{"notice", "notice", false},
		{"notice", "warning", true},
		{"warning", "error", true},
		{"warning", "debug", false},
		{"notice", "verbose", false}, // a level MCP does not know filters nothing
	} {
		if got := belowLevel(tt.level, tt.min); got != tt.below {
			t.Errorf("belowLevel(%q, %q) = %v, want %v", tt.level, tt.min, got, tt.below)
		}
	}
}

func TestStandaloneGET(t *testing.T) {
	for _, tt := range []struct {
		method, sid, last string
		ok                bool
	}{
		{"GET", "S1", "", true},
		{"GET", "S1", "_4", true},   // resumes the standalone stream
		{"GET", "S1", "0_4", false}, // resumes a POST's stream
		{"GET", "", "", false},
		{"POST", "S1", "", false},
	} {
		r := httptest.NewRequest(tt.method, "/mcp", nil)
		if tt.sid != "" {
			r.Header.Set("Mcp-Session-Id", tt.sid)
		}
		if tt.last != "" {
			r.Header.Set("Last-Event-ID", tt.last)
		}
		sid, ok := standaloneGET(r)
		if ok != tt.ok || (ok && sid != tt.sid) {
			t.Errorf("standaloneGET(%s, session %q, Last-Event-ID %q) = %q, %v; want %v", tt.method, tt.sid, tt.last, sid, ok, tt.ok)
		}
	}
}
