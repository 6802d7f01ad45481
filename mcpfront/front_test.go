package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/receipt"
)

func TestCall(t *testing.T) {
	tests := []struct {
		name          string
		era           string
		wantTransport string
		wantSession   bool
	}{
		{"session era 2025-11-25", eraSession, "streamable-http/2025-11-25", true},
		{"stateless era 2026-07-28", eraStateless, "streamable-http/2026-07-28", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newTestStack(t, stackOptions{})
			cs := st.connect(t, "alice", clientOptions{Era: tt.era})
			res, cr := call(t, cs, "deploy_release", map[string]any{"service": "api", "version": "1.2.3"})
			if res.IsError {
				t.Fatalf("CallTool(deploy_release) IsError, note %q", cr.Note)
			}
			if !strings.HasPrefix(cr.ExecutionID, "act_") || cr.Disposition != "new" || cr.State != "completed" ||
				cr.Outcome != "succeeded" || cr.TargetStatus != 200 || cr.Note == "" {
				t.Errorf("structuredContent = %+v, want a new completed succeeded execution with status 200 and a note", cr)
			}
			if _, err := time.Parse(time.RFC3339, cr.DispatchedAt); err != nil {
				t.Errorf("dispatched_at = %q, want RFC 3339: %v", cr.DispatchedAt, err)
			}
			body, ok := cr.Result.Body.(map[string]any)
			if cr.Result == nil || cr.Result.Status != 200 || !ok || body["key"] != cr.ExecutionID {
				t.Errorf("result = %+v, want status 200 and the target's JSON body carrying the execution id as key", cr.Result)
			}
			if len(res.Content) != 2 {
				t.Fatalf("content = %v, want the answer's text and the receipt's line", res.Content)
			}
			if cr.Receipt == nil {
				t.Fatal("structuredContent has no receipt")
			}
			if line := res.Content[1].(*mcp.TextContent).Text; line != cr.Receipt.Line() || !strings.Contains(line, cr.ExecutionID+" completed") {
				t.Errorf("last text block = %q, want the receipt's line %q", line, cr.Receipt.Line())
			}
			if _, err := receipt.Verify(cr.Receipt, st.verifier); err != nil || cr.Receipt.ExecutionID != cr.ExecutionID || cr.Receipt.TargetStatus != 200 {
				t.Errorf("receipt.Verify(structuredContent.receipt) = %v (execution %s, status %d), want it verified for %s with status 200", err, cr.Receipt.ExecutionID, cr.Receipt.TargetStatus, cr.ExecutionID)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(text, cr.Note+"\n\nTarget answer (HTTP status 200):") || !strings.Contains(text, cr.ExecutionID) {
				t.Errorf("content text = %q, want the note %q then the target's answer (HTTP status 200, its body naming the execution)", text, cr.Note)
			}
			if n := st.effect.count("/v1/releases"); n != 1 {
				t.Errorf("effect count = %d, want 1", n)
			}
			st.waitState(t, cr.ExecutionID, recordv1.State_STATE_DELIVERED)

			ev := st.get(t, cr.ExecutionID).GetEvidence()
			if ev.GetJsonrpcId() == "" || !strings.HasPrefix(ev.GetPeerAddress(), "127.0.0.1:") || ev.GetTokenId() == "" ||
				ev.GetClientName() != "latch-test" || ev.GetTransport() != tt.wantTransport ||
				(ev.GetMcpSessionId() != "") != tt.wantSession {
				t.Errorf("evidence = %v, want jsonrpc id, loopback peer, token id, client latch-test, transport %s, session id present %v", ev, tt.wantTransport, tt.wantSession)
			}
		})
	}
}

func TestCallFailedAtTargetIsToolError(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	res, cr := call(t, cs, "failing_job", map[string]any{"job": "x"})
	if !res.IsError || cr.Outcome != "failed_at_target" || cr.TargetStatus != 409 || !strings.Contains(cr.Note, "repeat_of") {
		t.Errorf("failing call = IsError %v, %+v; want a tool error, failed_at_target 409, a note naming repeat_of", res.IsError, cr)
	}
}

func TestHTTPAuthAndOrigin(t *testing.T) {
	st := newTestStack(t, stackOptions{AllowedOrigins: []string{"https://console.example.com"}})
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	tests := []struct {
		name       string
		auth       string
		origin     string
		wantStatus int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"wrong token", "Bearer latch_notAToken", "", http.StatusUnauthorized},
		{"not bearer", "Basic " + st.tokens["alice"], "", http.StatusUnauthorized},
		{"good token", "Bearer " + st.tokens["alice"], "", http.StatusOK},
		{"foreign origin", "Bearer " + st.tokens["alice"], "https://evil.example", http.StatusForbidden},
		{"foreign origin without token", "", "https://evil.example", http.StatusForbidden},
		{"loopback origin", "Bearer " + st.tokens["alice"], "http://localhost:5173", http.StatusOK},
		{"loopback ip origin", "Bearer " + st.tokens["alice"], "http://127.0.0.1:8080", http.StatusOK},
		{"allowed origin", "Bearer " + st.tokens["alice"], "https://console.example.com", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, st.URL, strings.NewReader(initBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("POST initialize (%s) status = %d, want %d", tt.name, resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("401 WWW-Authenticate = %q, want a Bearer challenge", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// Bad arguments are tool errors (isError) the model can correct, naming
// the argument once and without package prefixes; an unknown tool stays a
// JSON-RPC error.
func TestBadArgumentsAreToolErrors(t *testing.T) {
	tests := []struct {
		name     string
		tool     string
		args     map[string]any
		wantText string // "" means a JSON-RPC invalid params error
	}{
		{"schema-invalid arguments", "deploy_release", map[string]any{"service": 5, "version": "1"},
			"deploy_release was not called: argument service must be a string, not an integer. Nothing was sent; correct the arguments and call the tool again."},
		{"missing required argument", "deploy_release", map[string]any{"service": "api"},
			`deploy_release was not called: missing required argument "version" (string). Nothing was sent; correct the arguments and call the tool again.`},
		{"unknown argument", "deploy_release", map[string]any{"service": "api", "version": "1", "force": true},
			`deploy_release was not called: unknown argument "force"; deploy_release takes region, service, version, repeat_of. Nothing was sent; correct the arguments and call the tool again.`},
		{"built-in without execution_id", ToolExecutionStatus, map[string]any{},
			`latch_execution_status was not called: missing required argument "execution_id" (string: an execution_id, act_…, returned by an earlier call). Nothing was sent; correct the arguments and call the tool again.`},
		{"unknown tool", "no_such_tool", map[string]any{}, ""},
	}
	for _, era := range []string{eraSession, eraStateless} {
		st := newTestStack(t, stackOptions{})
		cs := st.connect(t, "alice", clientOptions{Era: era})
		for _, tt := range tests {
			t.Run(tt.name+" era "+era, func(t *testing.T) {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
				if tt.wantText == "" {
					var werr *jsonrpc.Error
					if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
						t.Fatalf("CallTool(%s, %v) = %v, %v; want a JSON-RPC invalid params error (-32602)", tt.tool, tt.args, res, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("CallTool(%s, %v) error = %v, want a tool error result", tt.tool, tt.args, err)
				}
				if !res.IsError || len(res.Content) != 1 {
					t.Fatalf("CallTool(%s, %v) = IsError %v, %d contents; want one text and isError", tt.tool, tt.args, res.IsError, len(res.Content))
				}
				if got := res.Content[0].(*mcp.TextContent).Text; got != tt.wantText {
					t.Errorf("CallTool(%s, %v) text:\n got %q\nwant %q", tt.tool, tt.args, got, tt.wantText)
				}
			})
		}
		if n := len(st.executions(t, "alice")); n != 0 {
			t.Errorf("executions after invalid calls = %d, want 0", n)
		}
		if n := st.effect.count("/v1/releases"); n != 0 {
			t.Errorf("effect count after invalid calls = %d, want 0", n)
		}
	}
}

// Catalog tools declare an outputSchema and their structuredContent fits it.
func TestCatalogToolsDeclareOutputSchema(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var found *mcp.Tool
	for _, tl := range lt.Tools {
		if tl.Name == "deploy_release" {
			found = tl
		}
	}
	if found == nil || found.OutputSchema == nil {
		t.Fatalf("deploy_release = %+v, want an outputSchema", found)
	}
	raw, _ := json.Marshal(found.OutputSchema)
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("outputSchema does not resolve: %v", err)
	}
	res, _ := call(t, cs, "deploy_release", map[string]any{"service": "api", "version": "9"})
	var sc map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(sc); err != nil {
		t.Errorf("structuredContent %s does not fit the outputSchema: %v", b, err)
	}
}

// progressWaiter collects progress notifications of one client.
type progressWaiter struct {
	mu   sync.Mutex
	msgs []string
	ch   chan string
}

func newProgressWaiter() *progressWaiter { return &progressWaiter{ch: make(chan string, 1000)} }

func (p *progressWaiter) handle(n *mcp.ProgressNotificationParams) {
	p.mu.Lock()
	p.msgs = append(p.msgs, n.Message)
	p.mu.Unlock()
	p.ch <- n.Message
}

func (p *progressWaiter) wait(t testing.TB, contains string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-p.ch:
			if strings.Contains(m, contains) {
				return
			}
		case <-timeout:
			t.Fatalf("no progress notification containing %q within 30s", contains)
		}
	}
}

func callWithProgress(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	p.SetProgressToken("p-" + tool)
	return cs.CallTool(ctx, p)
}

// Two sessions of one actor (and an explicit run id) calling the same tool
// 2 ms apart make one execution: the front passes the same actor and scope,
// never the session, as the intent scope.
func TestSameIntentTwoSessionsOneExecution(t *testing.T) {
	tests := []struct {
		name string
		run  string
		eras [2]string
	}{
		{"two stateful sessions", "", [2]string{eraSession, eraSession}},
		{"stateful and stateless", "", [2]string{eraSession, eraStateless}},
		{"explicit run id", "run-42", [2]string{eraStateless, eraSession}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newTestStack(t, stackOptions{ProgressInterval: 10 * time.Second})
			var answers [2]*mcp.CallToolResult
			var wg sync.WaitGroup
			pws := [2]*progressWaiter{newProgressWaiter(), newProgressWaiter()}
			for i := range 2 {
				cs := st.connect(t, "alice", clientOptions{Era: tt.eras[i], Progress: pws[i].handle})
				if i == 1 {
					time.Sleep(2 * time.Millisecond)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := &mcp.CallToolParams{Name: "slow_job", Arguments: map[string]any{"job": "reindex"}}
					p.SetProgressToken("p")
					if tt.run != "" {
						p.Meta["latch/run"] = tt.run
					}
					res, err := cs.CallTool(context.Background(), p)
					if err != nil {
						t.Errorf("CallTool(slow_job) session %d: %v", i, err)
						return
					}
					answers[i] = res // decoded below: decodeResult may t.Fatal, which only the test goroutine may
				}()
			}
			// Both calls were submitted (each got its first progress) before
			// the target answers.
			pws[0].wait(t, "act_")
			pws[1].wait(t, "act_")
			st.effect.release()
			wg.Wait()
			if answers[0] == nil || answers[1] == nil {
				t.FailNow() // the call's error is reported above
			}
			results := [2]CallResult{decodeResult(t, answers[0]), decodeResult(t, answers[1])}
			if results[0].ExecutionID == "" || results[0].ExecutionID != results[1].ExecutionID {
				t.Fatalf("execution ids = %q, %q; want one execution", results[0].ExecutionID, results[1].ExecutionID)
			}
			disp := results[0].Disposition + "," + results[1].Disposition
			if disp != "new,attached" && disp != "attached,new" {
				t.Errorf("dispositions = %s, want one new and one attached", disp)
			}
			if n := st.effect.count("/slow"); n != 1 {
				t.Errorf("effect count = %d, want 1", n)
			}
			if n := len(st.executions(t, "alice")); n != 1 {
				t.Errorf("executions = %d, want 1", n)
			}
		})
	}
}

func TestTwoActorsTwoExecutionsAndBuiltins(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	alice := st.connect(t, "alice", clientOptions{Era: eraSession})
	bob := st.connect(t, "bob", clientOptions{Era: eraStateless})
	args := map[string]any{"service": "api", "version": "2.0.0"}
	_, a := call(t, alice, "deploy_release", args)
	_, b := call(t, bob, "deploy_release", args)
	if a.ExecutionID == b.ExecutionID || a.Disposition != "new" || b.Disposition != "new" {
		t.Fatalf("alice %s (%s), bob %s (%s): want two new executions", a.ExecutionID, a.Disposition, b.ExecutionID, b.Disposition)
	}
	if n := st.effect.count("/v1/releases"); n != 2 {
		t.Errorf("effect count = %d, want 2", n)
	}

	// latch_executions: only the caller's own.
	res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolExecutions, Arguments: map[string]any{"limit": 10}})
	if err != nil || res.IsError {
		t.Fatalf("latch_executions = %v, %v", res, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, a.ExecutionID) || strings.Contains(text, b.ExecutionID) {
		t.Errorf("alice's latch_executions = %s; want %s and not bob's %s", text, a.ExecutionID, b.ExecutionID)
	}

	// latch_execution_status: own → the record; foreign → not found.
	tests := []struct {
		name    string
		id      string
		wantErr bool
	}{
		{"own", a.ExecutionID, false},
		{"foreign", b.ExecutionID, true},
		{"unknown", "act_01J99999999999999999999999", true},
	}
	for _, tt := range tests {
		t.Run("status "+tt.name, func(t *testing.T) {
			res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolExecutionStatus, Arguments: map[string]any{"execution_id": tt.id}})
			if err != nil {
				t.Fatal(err)
			}
			cr := decodeResult(t, res)
			if res.IsError != tt.wantErr || (!tt.wantErr && (cr.ExecutionID != tt.id || cr.State == "")) || strings.Contains(cr.Note, "bob") {
				t.Errorf("latch_execution_status(%s) = IsError %v %+v, want IsError %v", tt.name, res.IsError, cr, tt.wantErr)
			}
		})
	}
	// latch_cancel_execution on bob's execution from alice: refused, untouched.
	res, err = alice.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCancelExecution, Arguments: map[string]any{"execution_id": b.ExecutionID}})
	if err != nil || !res.IsError {
		t.Errorf("alice cancelling bob's execution = %v, %v; want a tool error", res, err)
	}
}

func TestCancelExecutionBuiltin(t *testing.T) {
	st := newTestStack(t, stackOptions{WaitBound: 100 * time.Millisecond})
	cs := st.connect(t, "alice", clientOptions{Era: eraStateless})
	res, cr := call(t, cs, "approved_job", map[string]any{"job": "drop-cache"})
	if res.IsError || cr.State != "awaiting_approval" || !strings.HasPrefix(cr.Note, "awaiting approval, execution "+cr.ExecutionID) || !strings.Contains(cr.Note, "latch_execution_status") {
		t.Fatalf("approved_job after the wait bound = IsError %v %+v; want a plain awaiting_approval answer", res.IsError, cr)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCancelExecution, Arguments: map[string]any{"execution_id": cr.ExecutionID}})
	if err != nil || res.IsError || decodeResult(t, res).State != "cancelled" {
		t.Fatalf("latch_cancel_execution = %v, %v; want the cancelled execution", res, err)
	}
	if n := st.effect.count("/approved"); n != 0 {
		t.Errorf("effect count = %d, want 0", n)
	}
}

func TestRepeatOf(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	args := map[string]any{"service": "api", "version": "3.0.0"}
	_, first := call(t, cs, "deploy_release", args)
	st.waitState(t, first.ExecutionID, recordv1.State_STATE_DELIVERED)

	_, again := call(t, cs, "deploy_release", map[string]any{"service": "api", "version": "3.0.0", "repeat_of": first.ExecutionID})
	if again.ExecutionID == first.ExecutionID || again.Disposition != "new" {
		t.Fatalf("repeat_of call = %+v, want a new execution other than %s", again, first.ExecutionID)
	}
	if got := st.get(t, again.ExecutionID).GetRepeatOf(); got != first.ExecutionID {
		t.Errorf("repeat_of recorded = %q, want %q", got, first.ExecutionID)
	}
	if n := st.effect.count("/v1/releases"); n != 2 {
		t.Errorf("effect count = %d, want 2", n)
	}
	// Citing an execution that is not yours is refused.
	bob := st.connect(t, "bob", clientOptions{Era: eraSession})
	res, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": "3.0.0", "repeat_of": first.ExecutionID}})
	if err == nil && !res.IsError {
		t.Errorf("bob repeating alice's execution = %v; want a refusal", res)
	}
	if n := st.effect.count("/v1/releases"); n != 2 {
		t.Errorf("effect count after refused repeat = %d, want 2", n)
	}
}

// A stream cut mid-call (2025-11-25) resumes with GET + Last-Event-ID and
// delivers the result of the one execution, which finished while the client
// was away.
func TestStreamCutResumes(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	c := newCutter("") // right after the priming event
	cs := st.connect(t, "alice", clientOptions{Era: eraSession, RoundTrip: c})
	type out struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow_job", Arguments: map[string]any{"job": "resume-me"}})
		done <- out{res, err}
	}()
	key := st.waitArrived(t)
	<-c.cut
	st.effect.release() // the execution finishes while the client is away
	o := <-done
	if o.err != nil {
		t.Fatalf("CallTool after a cut: %v", o.err)
	}
	cr := decodeResult(t, o.res)
	if cr.ExecutionID != key || cr.State != "completed" {
		t.Errorf("resumed result = %+v, want completed execution %s", cr, key)
	}
	if c.resumes.Load() == 0 {
		t.Errorf("no GET with Last-Event-ID was made; the result did not come through a resume")
	}
	if n := st.effect.count("/slow"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
	st.waitState(t, key, recordv1.State_STATE_DELIVERED)
}

// A client that goes away (stream cut after its first event, no resume)
// stops the wait only: the execution is neither cancelled nor re-run, in both
// eras. In 2026-07-28 the dropped POST ends the handler (its ephemeral
// session closes), so the wait bound is long there: the handler returns
// because of the disconnect. In 2025-11-25 the handler keeps waiting for a
// resume, so it returns at the (short) wait bound.
func TestDisconnectDoesNotCancel(t *testing.T) {
	tests := []struct {
		era       string
		waitBound time.Duration
	}{
		{eraSession, 500 * time.Millisecond},
		{eraStateless, time.Minute},
	}
	for _, tt := range tests {
		t.Run("era "+tt.era, func(t *testing.T) {
			st := newTestStack(t, stackOptions{WaitBound: tt.waitBound})
			// Cut once the call was submitted (its first progress).
			c := newCutter("notifications/progress")
			cs := st.connect(t, "alice", clientOptions{Era: tt.era, RoundTrip: c, MaxRetries: -1})
			errc := make(chan error, 1)
			go func() {
				_, err := callWithProgress(context.Background(), cs, "approved_job", map[string]any{"job": "disconnect"})
				errc <- err
			}()
			<-c.cut
			if err := <-errc; err == nil {
				t.Fatalf("CallTool after a cut without retries = nil error, want an error")
			}
			st.waitCallDone(t)
			execs := st.executions(t, "alice")
			if len(execs) != 1 || execs[0].GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
				t.Fatalf("executions after disconnect = %v, want one still awaiting approval", execs)
			}
		})
	}
}

// notifications/cancelled for a call whose execution is not yet dispatched
// cancels the execution.
func TestNotificationsCancelledCancels(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	pw := newProgressWaiter()
	cs := st.connect(t, "alice", clientOptions{Era: eraSession, Progress: pw.handle})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := callWithProgress(ctx, cs, "approved_job", map[string]any{"job": "cancel-me"})
		errc <- err
	}()
	pw.wait(t, "awaiting_approval")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled CallTool error = %v, want context.Canceled", err)
	}
	st.waitCallDone(t)
	execs := st.executions(t, "alice")
	if len(execs) != 1 || execs[0].GetState() != recordv1.State_STATE_CANCELLED {
		t.Fatalf("executions after notifications/cancelled = %v, want one cancelled", execs)
	}
	if n := st.effect.count("/approved"); n != 0 {
		t.Errorf("effect count = %d, want 0", n)
	}
}

func TestProgressForSlowCall(t *testing.T) {
	for _, era := range []string{eraSession, eraStateless} {
		t.Run("era "+era, func(t *testing.T) {
			st := newTestStack(t, stackOptions{ProgressInterval: 20 * time.Millisecond})
			pw := newProgressWaiter()
			cs := st.connect(t, "alice", clientOptions{Era: era, Progress: pw.handle})
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := callWithProgress(context.Background(), cs, "slow_job", map[string]any{"job": "progress"})
				if err != nil {
					t.Errorf("CallTool(slow_job): %v", err)
				}
				done <- res // nil on error; decoded in the test goroutine (decodeResult may t.Fatal)
			}()
			st.waitArrived(t)
			// Transitions up to dispatched, then the keep-alive ticks.
			pw.wait(t, "dispatched")
			pw.wait(t, "dispatched")
			pw.wait(t, "dispatched")
			st.effect.release()
			res := <-done
			if res == nil {
				t.FailNow()
			}
			if cr := decodeResult(t, res); cr.State != "completed" {
				t.Errorf("slow call result = %+v, want completed", cr)
			}
		})
	}
}

// WaitBound reached: a plain "still running" answer, no error, no hang.
func TestWaitBoundAnswersStillRunning(t *testing.T) {
	st := newTestStack(t, stackOptions{WaitBound: 100 * time.Millisecond})
	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	res, cr := call(t, cs, "slow_job", map[string]any{"job": "long"})
	if res.IsError || cr.State != "dispatched" || !strings.Contains(cr.Note, "do not retry") || !strings.Contains(cr.Note, ToolExecutionStatus) {
		t.Errorf("call past the wait bound = IsError %v %+v; want dispatched with a do-not-retry note", res.IsError, cr)
	}
	// Calling again attaches: still one effect.
	st.effect.release()
	_, again := call(t, cs, "slow_job", map[string]any{"job": "long"})
	if again.ExecutionID != cr.ExecutionID || again.Disposition != "attached" {
		t.Errorf("second call = %+v, want attached to %s", again, cr.ExecutionID)
	}
	if n := st.effect.count("/slow"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
}

func TestToolList(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range lt.Tools {
		byName[tl.Name] = tl
	}
	tests := []struct {
		name                 string
		readOnly, idempotent bool
		destructive          bool
		repeatOf             bool
	}{
		{"read_status", true, true, false, false},
		{"deploy_release", false, true, false, true},
		{"slow_job", false, false, true, true},
		{"failing_job", false, false, false, true},
		{ToolExecutionStatus, true, true, false, false},
	}
	for _, tt := range tests {
		tl := byName[tt.name]
		if tl == nil {
			t.Errorf("tool %s not listed", tt.name)
			continue
		}
		a := tl.Annotations
		destructive := a.DestructiveHint != nil && *a.DestructiveHint
		if a.ReadOnlyHint != tt.readOnly || a.IdempotentHint != tt.idempotent || destructive != tt.destructive {
			t.Errorf("%s annotations = %+v, want readOnly %v idempotent %v destructive %v", tt.name, a, tt.readOnly, tt.idempotent, tt.destructive)
		}
		schema, _ := tl.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		if _, ok := props["repeat_of"]; ok != tt.repeatOf {
			t.Errorf("%s has repeat_of = %v, want %v", tt.name, ok, tt.repeatOf)
		}
	}
}

func TestStdioTransportDelivers(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	ct, svt := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- st.Front.serveTransport(ctx, "carol", svt) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, cr := call(t, cs, "deploy_release", map[string]any{"service": "api", "version": "9"})
	if cr.State != "completed" {
		t.Fatalf("stdio call = %+v, want completed", cr)
	}
	e := st.get(t, cr.ExecutionID)
	if e.GetActor() != "carol" || e.GetEvidence().GetTransport() != "stdio" {
		t.Errorf("stdio execution actor %q transport %q, want carol, stdio", e.GetActor(), e.GetEvidence().GetTransport())
	}
	st.waitState(t, cr.ExecutionID, recordv1.State_STATE_DELIVERED)
	cs.Close()
	cancel()
	<-served
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no control plane", Config{}},
		{"progress interval above 15s", Config{ProgressInterval: 20 * time.Second}},
	}
	st := newTestStack(t, stackOptions{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "no control plane" {
				tt.cfg.ControlPlane = st.CP
			}
			if _, err := New(tt.cfg); !errors.Is(err, ErrBadConfig) {
				t.Errorf("New(%s) error = %v, want ErrBadConfig", tt.name, err)
			}
		})
	}
}

// Closing an MCP session is journaled as the agent session's end; a session
// that leaves an execution it never received is journaled as orphaned.
func TestSessionEndAndOrphan(t *testing.T) {
	st := newTestStack(t, stackOptions{WaitBound: 100 * time.Millisecond})
	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	_, cr := call(t, cs, "approved_job", map[string]any{"job": "left-behind"})
	if cr.State != "awaiting_approval" {
		t.Fatalf("state %s, want awaiting_approval", cr.State)
	}
	mcpID := cs.ID()
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	var got *recordv1.Session
	testbin.Eventually(t, "session mcp:"+mcpID+" to be recorded as ended", func() bool {
		l, err := st.CP.ListSessions(context.Background(), &controlplanev1.ListSessionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range l.GetSessions() {
			if s.GetKey() == "mcp:"+mcpID && s.GetEndedAt() != nil {
				got = s
			}
		}
		return got != nil
	})
	if !strings.Contains(got.GetReason(), cr.ExecutionID) {
		t.Errorf("ended session reason %q does not name the orphaned execution %s", got.GetReason(), cr.ExecutionID)
	}
	if x := st.get(t, cr.ExecutionID); x.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Errorf("the orphaned execution is %v, want still awaiting approval", x.GetState())
	}
}

// The intent scope comes from _meta latch/run or the Latch-Run header, the
// same for both: equal runs attach, another run is another execution.
func TestRunScopeFromHeaderOrMeta(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	viaHeader := st.connect(t, "alice", clientOptions{Era: eraSession, Header: http.Header{HeaderRun: {"run-7"}}})
	_, first := call(t, viaHeader, "deploy_release", map[string]any{"service": "api", "version": "9"})
	viaMeta := st.connect(t, "alice", clientOptions{Era: eraStateless})
	p := &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": "9"}, Meta: mcp.Meta{MetaRun: "run-7"}}
	res, err := viaMeta.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if second := decodeResult(t, res); second.ExecutionID != first.ExecutionID || second.Disposition != "attached" {
		t.Errorf("same run via _meta: %s %s, want attached to %s", second.Disposition, second.ExecutionID, first.ExecutionID)
	}
	other := st.connect(t, "alice", clientOptions{Era: eraSession, Header: http.Header{HeaderRun: {"run-8"}}})
	if _, third := call(t, other, "deploy_release", map[string]any{"service": "api", "version": "9"}); third.ExecutionID == first.ExecutionID {
		t.Errorf("another run id attached to the first run's execution")
	}
	if x := st.get(t, first.ExecutionID); x.GetIntentScope() != "run:run-7" {
		t.Errorf("intent scope = %q, want run:run-7", x.GetIntentScope())
	}
}
