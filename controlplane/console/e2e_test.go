package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// latchBin is the real latch binary, built once for the process tests.
var latchBin string

func TestMain(m *testing.M) {
	testbin.Main(m, []string{"github.com/latchhq/latch/controlplane/cmd/latch"}, []*string{&latchBin})
}

const e2eCatalog = `
targets:
  notes:
    channel: http
    base_url: %[1]s
    allow_private: true
    idempotency_header: Idempotency-Key
  keys:
    channel: http
    base_url: %[1]s
    allow_private: true
    idempotency_header: Idempotency-Key
    timeout: 1s
upstreams:
  gone:
    transport: stdio
    command: [/bin/false]
tools:
  write_note:
    description: Write a note.
    input_schema: {type: object, required: [text], properties: {text: {type: string}}}
    target: notes
    request: {method: POST, path: /v1/notes, body: {text: "{{text}}"}}
    replay: idempotency_key
    attach_window: 1h
  rotate_key:
    description: Rotate a key; every call needs an operator's approval.
    input_schema: {type: object, required: [service], properties: {service: {type: string}}}
    target: keys
    request: {method: POST, path: /v1/rotate, body: {service: "{{service}}"}}
    replay: review
    approval: every_call
  purge_cache:
    description: Purge a zone (the test target acts, then never answers).
    input_schema: {type: object, required: [zone], properties: {zone: {type: string}}}
    target: keys
    request: {method: POST, path: /v1/purge, body: {zone: "{{zone}}"}}
    replay: review
  gone.lookup:
    upstream: gone
    tool: lookup
    replay: review
`

// target is the test's HTTP target: it counts effects per path, echoes
// notes, and acts on a purge but never answers it (an unknown outcome).
type target struct {
	mu      sync.Mutex
	effects map[string]int
	hang    chan struct{}
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	tg.mu.Lock()
	tg.effects[r.URL.Path]++
	tg.mu.Unlock()
	switch r.URL.Path {
	case "/v1/purge":
		select { // acted; the answer never comes in time
		case <-tg.hang:
		case <-r.Context().Done():
		}
		return
	case "/v1/notes":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(body)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"rotated"}`)
	}
}

func (tg *target) count(path string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.effects[path]
}

// dev is a running `latch dev` process.
type dev struct {
	data, mcpURL, signIn, operator, base string
	cp                                   controlplanev1.ControlPlaneClient
}

var bannerSignIn = regexp.MustCompile(`sign in once as (\S+): (http://\S+)`)
var bannerMCP = regexp.MustCompile(`MCP endpoint\s+(\S+)`)

const devToken = "latch_dev_console_test_token"

// startDev runs `latch dev` on ephemeral ports with the test catalog and
// waits for its banner.
func startDev(t *testing.T, targetURL string) *dev {
	t.Helper()
	dir := t.TempDir()
	cat := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(cat, fmt.Appendf(nil, e2eCatalog, targetURL), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &dev{data: filepath.Join(dir, "data")}
	cmd := exec.Command(latchBin, "dev", "--data", d.data, "--catalog", cat, "--listen", "127.0.0.1:0", "--demo-listen", "127.0.0.1:0",
		"--http-listen", "127.0.0.1:0", "--checkpoint-interval", "200ms")
	cmd.Env = append(os.Environ(), "LATCH_DEV_TOKEN="+devToken, "USER=ops-alice")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &testbin.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	banner := &testbin.Buffer{}
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			banner.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), "Ctrl-C stops cleanly") {
				once.Do(func() { close(found) })
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("latch dev banner:\n%s\nlatch dev log:\n%s", banner.String(), logs.String())
		}
	})
	select {
	case <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("latch dev printed no banner in 30s:\n%s\n%s", banner.String(), logs.String())
	}
	m := bannerSignIn.FindStringSubmatch(banner.String())
	mm := bannerMCP.FindStringSubmatch(banner.String())
	if m == nil || mm == nil {
		t.Fatalf("the banner has no console sign-in link or MCP endpoint:\n%s", banner.String())
	}
	d.operator, d.signIn, d.mcpURL = m[1], m[2], mm[1]
	u, _ := url.Parse(d.signIn)
	d.base = u.Scheme + "://" + u.Host
	conn, err := grpc.NewClient("passthrough:///latch", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", datadir.Socket(d.data))
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	d.cp = controlplanev1.NewControlPlaneClient(conn)
	return d
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// agent is an MCP client of the dev front (the go-sdk client).
func (d *dev) agent(t *testing.T) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "console-e2e", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.mcpURL, HTTPClient: &http.Client{Transport: bearerRT{devToken}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// executionID reads the execution ID from a tool result.
func executionID(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var sc struct {
		ExecutionID string `json:"execution_id"`
	}
	if json.Unmarshal(b, &sc) != nil || sc.ExecutionID == "" {
		t.Fatalf("tool result without execution_id: %s", b)
	}
	return sc.ExecutionID
}

func (d *dev) get(t *testing.T, id string) *recordv1.Execution {
	t.Helper()
	r, err := d.cp.Get(t.Context(), &controlplanev1.GetRequest{ExecutionId: id})
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return r.GetExecution()
}

func (d *dev) waitState(t *testing.T, id string, want ...recordv1.State) *recordv1.Execution {
	t.Helper()
	var x *recordv1.Execution
	testbin.Eventually(t, fmt.Sprintf("%s to be %v", id, want), func() bool {
		x = d.get(t, id)
		for _, w := range want {
			if x.GetState() == w {
				return true
			}
		}
		return false
	})
	return x
}

// execShow runs `latch exec show ID` and returns its field lines.
func (d *dev) execShow(t *testing.T, id string) map[string]string {
	t.Helper()
	out, err := exec.Command(latchBin, "exec", "show", id, "--data", d.data).CombinedOutput()
	if err != nil {
		t.Fatalf("latch exec show: %v\n%s", err, out)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "journal:" {
			break
		}
		if k, v, ok := strings.Cut(line, " "); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}

// TestConsoleInABrowser drives the console in Debian's chromium against a
// real `latch dev`: sign in with the banner's one-time link; an MCP call
// appears in the list live; its page shows the timeline `latch exec show`
// prints, an XSS payload in its argument inert, and every journal record
// proven in the browser, in under 200 KB; a pending approval is approved in
// the browser and the waiting agent's call completes with one effect;
// forged CSRF tokens and missing cookies are refused; an open execution
// page follows a CLI approval live; an outcome_unknown is resolved with a
// reason that the journal records under the operator's name; the audit
// page checks the signature in the browser; a CLI-made operator token signs
// in; every page fits a phone's width and the first Tab reaches the skip
// link. Screenshots of the list and the last detail page are written as
// test artifacts on failure.
func TestConsoleInABrowser(t *testing.T) {
	tg := &target{effects: map[string]int{}, hang: make(chan struct{})}
	ts := httptest.NewServer(tg)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(tg.hang) })
	d := startDev(t, ts.URL)
	ctx := browser(t)
	lastDetail := ""
	t.Cleanup(func() {
		// On failure; always when LATCH_TEST_ARTIFACTS names a directory.
		if !t.Failed() && os.Getenv("LATCH_TEST_ARTIFACTS") == "" {
			return
		}
		for name, u := range map[string]string{"list": d.base + "/ui/", "detail": lastDetail} {
			if u == "" {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			png, err := chromedp.Run(sctx, func(ctx context.Context, tgt *chromedp.Target) ([]byte, error) {
				if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
					return nil, err
				}
				return chromedp.FullScreenshot(100)(ctx, tgt)
			})
			cancel()
			if err != nil {
				t.Logf("no screenshot of %s: %v", name, err)
				continue
			}
			for _, dir := range []string{t.ArtifactDir(), os.Getenv("LATCH_TEST_ARTIFACTS")} {
				if dir != "" {
					p := filepath.Join(dir, "console-"+name+".png")
					if os.WriteFile(p, png, 0o644) == nil {
						t.Logf("screenshot of the %s page: %s", name, p)
					}
				}
			}
		}
	})

	// Sign in with the banner's one-time link.
	if d.operator != "ops-alice" {
		t.Fatalf("the banner signs in as %q, want the USER of latch dev (ops-alice)", d.operator)
	}
	run(t, ctx, "open the one-time link", chromedp.Navigate(d.signIn), chromedp.WaitVisible("#signin"))
	run(t, ctx, "sign in with the one-time link", chromedp.Click("#signin"))
	run(t, ctx, "see the list", chromedp.WaitVisible("#executions"))
	// The upstream exits at once: its tool is held, and the overview says
	// which and why.
	if got := eval[string](t, ctx, `(document.querySelector('#held tr[data-tool="gone.lookup"]') || {}).textContent || ''`); !strings.Contains(got, "upstream gone was not reached") {
		t.Errorf("the list's held tools row for gone.lookup = %q, want it held because upstream gone was not reached", got)
	}
	if got := eval[string](t, ctx, `document.getElementById('operator').textContent`); got != "ops-alice" {
		t.Errorf("signed in as %q, want ops-alice", got)
	}
	if c := eval[string](t, ctx, `document.cookie`); strings.Contains(c, cookieName) {
		t.Errorf("document.cookie = %q: the session cookie is readable by scripts, want HttpOnly", c)
	}
	// The link was one-time.
	run(t, ctx, "open the used link", chromedp.Navigate(d.signIn), chromedp.WaitVisible(".error"))

	// An MCP call appears in the list live, with an XSS payload.
	run(t, ctx, "open the list", chromedp.Navigate(d.base+"/ui/"), chromedp.Poll[chromedp.Void](`document.querySelector('#live-status.ok')`, chromedp.WithPollingTimeout(pollBound)))
	eval[bool](t, ctx, `window.__sameDocument = true`)
	agent := d.agent(t)
	payload := `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`
	res, err := agent.CallTool(t.Context(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"text": payload}})
	if err != nil || res.IsError {
		t.Fatalf("write_note: %v %+v", err, res)
	}
	noteID := executionID(t, res)
	run(t, ctx, "the call appears in the list", chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('#executions tr[data-id=%q]')`, noteID), chromedp.WithPollingTimeout(pollBound)))
	if !eval[bool](t, ctx, `window.__sameDocument === true`) {
		t.Error("the row appeared only after a reload, want it pushed to the open page")
	}

	// Its page: the timeline `latch exec show` prints, the payload inert,
	// every record proven in the browser, under 200 KB.
	d.waitState(t, noteID, recordv1.State_STATE_DELIVERED)
	// The agent retries it: the retry attaches, nothing is re-sent, and
	// the page says so at the top.
	res, err = agent.CallTool(t.Context(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"text": payload}})
	if err != nil || res.IsError {
		t.Fatalf("write_note again: %v %+v", err, res)
	}
	if again := executionID(t, res); again != noteID {
		t.Fatalf("the retry of write_note is %s, want it attached to %s", again, noteID)
	}
	if n := tg.count("/v1/notes"); n != 1 {
		t.Errorf("the target saw %d notes, want 1 (the retry attached)", n)
	}
	lastDetail = d.base + "/ui/executions/" + noteID
	var proven bool
	for range 50 { // until a checkpoint (every 200ms) covers every record
		run(t, ctx, "open the detail page", chromedp.Navigate(lastDetail), chromedp.WaitVisible("#timeline"),
			chromedp.Poll[chromedp.Void](`document.body.dataset.proofs === 'done'`, chromedp.WithPollingTimeout(pollBound)))
		if eval[bool](t, ctx, `[...document.querySelectorAll('[data-proof-index]')].every(e => e.classList.contains('ok'))`) {
			proven = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !proven {
		t.Errorf("journal records not all verified in the browser: %v", eval[[]string](t, ctx, `[...document.querySelectorAll('[data-proof-index]')].map(e => e.textContent)`))
	}
	if sig := eval[string](t, ctx, `document.getElementById('sig-browser').className + ': ' + document.getElementById('sig-browser').textContent`); !strings.HasPrefix(sig, "ok") {
		t.Errorf("checkpoint signature in the browser: %s, want verified", sig)
	}
	page := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#timeline [data-field]')].map(e => [e.dataset.field, e.textContent]))`)
	show := d.execShow(t, noteID)
	for _, f := range []string{"accepted_at", "authorized_at", "dispatched_at", "last_sent_at", "completed_at", "delivered_at", "next_recovery_at"} {
		if show[f] != page[f] {
			t.Errorf("timeline %s: page %q, latch exec show %q", f, page[f], show[f])
		}
	}
	if page["accepted_at"] == "" || page["delivered_at"] == "" {
		t.Errorf("timeline lacks accepted_at or delivered_at: %v", page)
	}
	if r := eval[string](t, ctx, `(document.getElementById('retries') || {}).textContent || ''`); !strings.Contains(r, "1 retry of the agent attached") || !strings.Contains(r, "nothing was re-sent") {
		t.Errorf("the page's top says %q about retries, want that 1 retry attached and nothing was re-sent", r)
	}
	if above := eval[bool](t, ctx, `!!document.getElementById('retries') && !!(document.getElementById('retries').compareDocumentPosition(document.getElementById('timeline')) & Node.DOCUMENT_POSITION_FOLLOWING)`); !above {
		t.Error("the retries note is not above the timeline")
	}
	// The picture: one time axis, drawn on the server (no script draws
	// it), with both calls, the states, the one send and its answer, and
	// the delivery.
	marks := eval[map[string]int](t, ctx, `(() => { const m = {}; for (const e of document.querySelectorAll('svg#picture [data-kind]')) m[e.dataset.kind] = (m[e.dataset.kind] || 0) + 1; return m; })()`)
	if marks["call"] != 2 || marks["send"] != 1 || marks["answer"] != 1 || marks["delivery"] != 1 || marks["state"] < 4 {
		t.Errorf("the picture's marks by kind = %v, want 2 calls, 1 send with its answer, 1 delivery and the states", marks)
	}
	if title := eval[string](t, ctx, `document.querySelector('svg#picture [data-kind=call] title').textContent`); !strings.Contains(title, "client ") || !strings.Contains(title, "id ") {
		t.Errorf("the picture's first call says %q, want its client and JSON-RPC id", title)
	}
	pictureShots(t, ctx, lastDetail)
	if x := eval[string](t, ctx, `String(window.__xss)`); x != "undefined" {
		t.Errorf("window.__xss = %s: the argument's payload ran", x)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#arguments *, #result-body *').length`); n != 0 {
		t.Errorf("the argument's payload made %d elements, want none (shown as text)", n)
	}
	if txt := eval[string](t, ctx, `document.getElementById('arguments').textContent`); !strings.Contains(txt, "<script>window.__xss=2</script>") {
		t.Errorf("the arguments do not show the payload as text: %q", txt)
	}
	weight := eval[int](t, ctx, `(() => { const es = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
		return es.reduce((n, e) => n + (e.decodedBodySize || 0), 0); })()`)
	t.Logf("detail page weight: %d bytes (HTML, CSS, script, proofs)", weight)
	if weight <= 0 || weight >= 200*1024 {
		t.Errorf("detail page weight %d bytes, want under 200 KB", weight)
	}

	// A pending approval: forged CSRF and missing cookies are refused, then
	// it is approved in the browser and the waiting call completes.
	type callResult struct {
		res *mcp.CallToolResult
		err error
	}
	waiting := make(chan callResult, 1)
	billing := d.agent(t) // connected here: agent may t.Fatal, which only the test goroutine may
	go func() {
		r, err := billing.CallTool(context.Background(), &mcp.CallToolParams{Name: "rotate_key", Arguments: map[string]any{"service": "billing"}})
		waiting <- callResult{r, err}
	}()
	var pending string
	testbin.Eventually(t, "a rotate_key execution awaiting approval", func() bool {
		l, err := d.cp.List(t.Context(), &controlplanev1.ListRequest{State: recordv1.State_STATE_AWAITING_APPROVAL, Limit: 10})
		if err == nil && len(l.GetExecutions()) == 1 {
			pending = l.GetExecutions()[0].GetId()
		}
		return pending != ""
	})
	lastDetail = d.base + "/ui/executions/" + pending
	run(t, ctx, "the list pins the approval under Needs a decision", chromedp.Navigate(d.base+"/ui/"), chromedp.WaitVisible(fmt.Sprintf(`#pinned tr[data-id=%q]`, pending)))
	run(t, ctx, "open the pending approval", chromedp.Navigate(lastDetail), chromedp.WaitVisible("#approve"))
	pageShot(t, ctx, "console-awaiting-approval")
	forged := eval[int](t, ctx, fmt.Sprintf(`fetch('/ui/executions/%s/approve', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'csrf=forged&confirm=yes&reason=x'}).then(r => r.status)`, pending))
	if forged != http.StatusForbidden {
		t.Errorf("approve with a forged CSRF token = %d, want 403", forged)
	}
	csrf := eval[string](t, ctx, `document.querySelector('input[name=csrf]').value`)
	resp, err := http.PostForm(d.base+"/ui/executions/"+pending+"/approve", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("approve without the session cookie = %d, want 401", resp.StatusCode)
	}
	if st := d.get(t, pending).GetState(); st != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("after the refused requests %s is %s, want still awaiting_approval", pending, lifecycle.Name(st))
	}
	run(t, ctx, "approve in the browser",
		chromedp.SetValue("#approve-reason", "rotation ticket OPS-12"),
		chromedp.Click("#approve"), chromedp.WaitVisible("#confirm"),
		chromedp.Click("#confirm"), chromedp.WaitVisible("#done"))
	select {
	case cr := <-waiting:
		if cr.err != nil || cr.res.IsError {
			t.Errorf("the waiting rotate_key call = %v %+v, want its result", cr.err, cr.res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting rotate_key call did not complete within 30s of the approval")
	}
	if n := tg.count("/v1/rotate"); n != 1 {
		t.Errorf("the target saw %d rotations, want exactly 1", n)
	}
	if !d.journalHas(t, pending, "approval", "approved by ops-alice: rotation ticket OPS-12") {
		t.Error("the journal has no approval record under ops-alice's name")
	}

	// The open page of an execution follows it live: approved with the CLI
	// meanwhile, it shows the new state without a reload.
	search := d.agent(t)
	go func() {
		r, err := search.CallTool(context.Background(), &mcp.CallToolParams{Name: "rotate_key", Arguments: map[string]any{"service": "search"}})
		waiting <- callResult{r, err}
	}()
	var second string
	testbin.Eventually(t, "a second rotate_key awaiting approval", func() bool {
		l, err := d.cp.List(t.Context(), &controlplanev1.ListRequest{State: recordv1.State_STATE_AWAITING_APPROVAL, Limit: 10})
		if err == nil && len(l.GetExecutions()) == 1 {
			second = l.GetExecutions()[0].GetId()
		}
		return second != ""
	})
	lastDetail = d.base + "/ui/executions/" + second
	run(t, ctx, "open the second approval", chromedp.Navigate(lastDetail), chromedp.WaitVisible("#approve"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#live-status.ok')`, chromedp.WithPollingTimeout(pollBound)))
	eval[bool](t, ctx, `window.__sameDocument = true`)
	if out, err := exec.Command(latchBin, "approvals", "approve", second, "--data", d.data, "--operator", "cli-op").CombinedOutput(); err != nil {
		t.Fatalf("latch approvals approve: %v\n%s", err, out)
	}
	run(t, ctx, "the page follows the approval", chromedp.Poll[chromedp.Void](`['completed', 'delivered'].includes(document.getElementById('state').textContent)`, chromedp.WithPollingTimeout(pollBound)))
	if !eval[bool](t, ctx, `window.__sameDocument === true`) {
		t.Error("the detail page reloaded, want the new state pushed to it")
	}
	select {
	case cr := <-waiting:
		if cr.err != nil || cr.res.IsError {
			t.Errorf("the second rotate_key call = %v %+v", cr.err, cr.res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second rotate_key call did not complete within 30s of the approval")
	}

	// An unknown outcome, resolved in the browser with a reason.
	res, err = agent.CallTool(t.Context(), &mcp.CallToolParams{Name: "purge_cache", Arguments: map[string]any{"zone": "eu"}})
	if err != nil {
		t.Fatalf("purge_cache: %v", err)
	}
	unknown := executionID(t, res)
	d.waitState(t, unknown, recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW)
	run(t, ctx, "the list pins it", chromedp.Navigate(d.base+"/ui/"), chromedp.WaitVisible(fmt.Sprintf(`#pinned tr[data-id=%q]`, unknown)))
	lastDetail = d.base + "/ui/executions/" + unknown
	// Each source its own sentence: the target's answer is not run on
	// into the last recovery query's.
	run(t, ctx, "open the unknown outcome", chromedp.Navigate(lastDetail), chromedp.WaitVisible("#decision-evidence"))
	if a := eval[string](t, ctx, `(document.querySelector('#decision-evidence .answered') || {}).textContent || ''`); strings.Contains(a, "recovery query") {
		t.Errorf("the target's answer runs on into the recovery query: %q", a)
	}
	reason := "CDN purge log shows zone eu purged at the dispatch time"
	run(t, ctx, "resolve in the browser", chromedp.Navigate(lastDetail), chromedp.WaitVisible("#resolve"),
		chromedp.Click("#as-completed"), chromedp.SetValue("#resolve-reason", reason),
		chromedp.Click("#resolve"), chromedp.WaitVisible("#confirm"), chromedp.Click("#confirm"), chromedp.WaitVisible("#done"))
	x := d.get(t, unknown)
	if x.GetState() != recordv1.State_STATE_COMPLETED || x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
		t.Errorf("after resolving, %s is %s/%s, want completed/succeeded", unknown, lifecycle.Name(x.GetState()), x.GetOutcome())
	}
	if !d.journalHas(t, unknown, "resolve", "resolved by ops-alice: "+reason) {
		t.Error("the journal has no resolve record under ops-alice's name with the reason")
	}
	if n := tg.count("/v1/purge"); n != 1 {
		t.Errorf("the target saw %d purges, want 1 (resolving sends nothing)", n)
	}

	// The audit page checks the newest checkpoint's signature in the
	// browser too.
	run(t, ctx, "open the audit page", chromedp.Navigate(d.base+"/ui/audit"), chromedp.WaitVisible("#checkpoints"),
		chromedp.Poll[chromedp.Void](`document.getElementById('sig-browser').classList.contains('ok')`, chromedp.WithPollingTimeout(pollBound)))
	if cmd := eval[string](t, ctx, `document.getElementById('verify-command').textContent`); cmd != "latch audit verify "+d.data {
		t.Errorf("the audit page's verify command = %q, want latch audit verify %s", cmd, d.data)
	}

	// An operator token made with the CLI signs in through the form; the
	// decisions are then journaled under its name.
	out, err := exec.Command(latchBin, "operator", "token", "create", "ops-bob", "--data", d.data).Output()
	if err != nil {
		t.Fatalf("latch operator token create: %v", err)
	}
	token := strings.TrimSpace(string(out))
	run(t, ctx, "sign out, then in with the token", chromedp.Navigate(d.base+"/ui/"), chromedp.Click(".signout button"), chromedp.WaitVisible("#token"),
		chromedp.SetValue("#token", token), chromedp.Submit("#token"), chromedp.WaitVisible("#executions"))
	if got := eval[string](t, ctx, `document.getElementById('operator').textContent`); got != "ops-bob" {
		t.Errorf("signed in with the CLI's token as %q, want ops-bob", got)
	}

	// Readable on a phone: nothing wider than the screen but the tables'
	// own scrolling boxes; and keyboard-usable: the first Tab reaches the
	// skip link.
	for _, u := range []string{d.base + "/ui/", lastDetail, d.base + "/ui/audit", d.base + "/ui/sessions"} {
		run(t, ctx, "open "+u+" at 390px", chromedp.EmulateViewport(390, 844), chromedp.Navigate(u), chromedp.WaitVisible("main"))
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s at 390px is %dpx wide: the page scrolls sideways on a phone", u, w)
		}
	}
	run(t, ctx, "back to 1280px", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(d.base+"/ui/"), chromedp.WaitVisible("main"),
		chromedp.KeyEvent("\t"))
	if f := eval[string](t, ctx, `document.activeElement.className + ' ' + document.activeElement.textContent`); f != "skip Skip to content" {
		t.Errorf("the first Tab focuses %q, want the skip link", f)
	}
}

// pictureShots writes screenshots of the detail page at u, with its
// picture, at 390 px and 1280 px wide as test artifacts (t.ArtifactDir,
// kept with go test -artifacts, and LATCH_TEST_ARTIFACTS); at 390 px the
// page itself stays within the screen (the picture scrolls in its box).
func pictureShots(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	for _, w := range []int{390, 1280} {
		run(t, ctx, fmt.Sprintf("the picture at %dpx", w), chromedp.EmulateViewport(int64(w), 900), chromedp.Navigate(u), chromedp.WaitVisible("svg#picture"))
		if w == 390 {
			if sw := eval[int](t, ctx, `document.documentElement.scrollWidth`); sw > 390 {
				wide := eval[[]string](t, ctx, `(() => { const out = [], w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); const r = document.createRange();
					for (let n; (n = w.nextNode()) && out.length < 8;) { if (n.parentElement.closest('.scroll')) continue; r.selectNodeContents(n); if (r.getBoundingClientRect().right > 391) out.push(n.parentElement.tagName + ': ' + n.textContent.slice(0, 60)); }
					return out; })()`)
				t.Errorf("the detail page with its picture is %dpx wide at 390px; wider than the screen: %q", sw, wide)
			}
		}
		pageShot(t, ctx, fmt.Sprintf("console-picture-%d", w))
	}
	run(t, ctx, "back to 1280px", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(u), chromedp.WaitVisible("svg#picture"))
}

// pageShot writes a full-page screenshot of the tab as NAME.png into the
// test's artifact directories (t.ArtifactDir, kept with go test
// -artifacts, and LATCH_TEST_ARTIFACTS).
func pageShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	cancel()
	if err != nil {
		t.Errorf("no screenshot %s: %v", name, err)
		return
	}
	for _, dir := range []string{t.ArtifactDir(), os.Getenv("LATCH_TEST_ARTIFACTS")} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Errorf("screenshot %s: %v", p, err)
			continue
		}
		t.Logf("screenshot %s: %s", name, p)
	}
}

func (d *dev) journalHas(t *testing.T, id, kind, reason string) bool {
	t.Helper()
	h, err := d.cp.History(t.Context(), &controlplanev1.HistoryRequest{ExecutionId: id})
	if err != nil {
		t.Fatalf("History %s: %v", id, err)
	}
	for _, e := range h.GetEntries() {
		if lifecycle.EntryKindNameOf(e) == kind && e.GetReason() == reason {
			return true
		}
	}
	var got []string
	for _, e := range h.GetEntries() {
		got = append(got, lifecycle.EntryKindNameOf(e)+": "+e.GetReason())
	}
	t.Logf("journal of %s:\n%s", id, strings.Join(got, "\n"))
	return false
}
