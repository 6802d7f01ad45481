package countingtarget

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/tools"
)

// The suites' verdicts are only as good as the target's truth: these tests
// pin the counting target's behaviour and run in every plain `go test`.

func post(t *testing.T, url, class, intent, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/"+class+"/effect", strings.NewReader(`{"intent":"`+intent+`"}`))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func statusCode(t *testing.T, url, key string) int {
	t.Helper()
	resp, err := http.Get(url + "/status/by-key/" + key)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestCountsEffectsPerIntent(t *testing.T) {
	tests := []struct {
		name        string
		class       string
		keys        []string
		wantStatus  []int
		wantEffects int
	}{
		{name: "idempotency_key: the same key is one effect", class: ClassIdem, keys: []string{"k1", "k1"}, wantStatus: []int{200, 200}, wantEffects: 1},
		{name: "idempotency_key: two keys are two effects", class: ClassIdem, keys: []string{"k1", "k2"}, wantStatus: []int{200, 200}, wantEffects: 2},
		{name: "status_query: a re-send with the same key is a second effect", class: ClassStatus, keys: []string{"k1", "k1"}, wantStatus: []int{200, 200}, wantEffects: 2},
		{name: "review: a re-send with the same key is a second effect", class: ClassReview, keys: []string{"k1", "k1"}, wantStatus: []int{200, 200}, wantEffects: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := Start(Config{MaxHold: time.Second})
			defer tg.Close()
			var got []int
			for _, k := range tt.keys {
				code, _ := post(t, tg.URL(), tt.class, "i", k)
				got = append(got, code)
			}
			if diff := cmp.Diff(tt.wantStatus, got); diff != "" {
				t.Errorf("answers mismatch (-want +got):\n%s", diff)
			}
			if _, n := tg.Truth("i"); n != tt.wantEffects {
				t.Errorf("Truth(i) effects = %d, want %d", n, tt.wantEffects)
			}
			if diff := cmp.Diff(map[string]int{"i": tt.wantEffects}, tg.Effects()); diff != "" {
				t.Errorf("Effects() mismatch (-want +got):\n%s", diff)
			}
			if got := len(tg.Arrivals()); got != len(tt.keys) {
				t.Errorf("len(Arrivals()) = %d, want %d (every request is an arrival)", got, len(tt.keys))
			}
		})
	}
}

func TestRefusesMalformedRequests(t *testing.T) {
	tg := Start(Config{MaxHold: time.Second})
	defer tg.Close()
	tests := []struct {
		name, method, path, body, key string
		want                          int
	}{
		{"no intent", http.MethodPost, "/idem/effect", `{}`, "k1", http.StatusBadRequest},
		{"not JSON", http.MethodPost, "/idem/effect", `intent`, "k1", http.StatusBadRequest},
		{"no key", http.MethodPost, "/idem/effect", `{"intent":"i"}`, "", http.StatusBadRequest},
		{"unknown endpoint", http.MethodPost, "/idem/other", `{"intent":"i"}`, "k1", http.StatusNotFound},
		{"status of an unknown key", http.MethodGet, "/status/by-key/nope", "", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, tg.URL()+tt.path, strings.NewReader(tt.body))
			if tt.key != "" {
				req.Header.Set("Idempotency-Key", tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
			}
		})
	}
	if n := len(tg.Arrivals()); n != 0 {
		t.Errorf("malformed requests made %d arrivals, want 0", n)
	}
}

// TestHoldsAnswers404ThenCommits: the hard case of issue 10. While a
// request is held, its key answers 404 and a same-key request to the
// idempotency_key endpoint answers 409; after the release the key answers
// 200 and the effect is counted once.
func TestHoldsAnswers404ThenCommits(t *testing.T) {
	tg := Start(Config{MaxHold: 10 * time.Second})
	defer tg.Close()
	arrived := tg.Plan("i", true, nil)
	done := make(chan int, 1)
	go func() { code, _ := post(t, tg.URL(), ClassIdem, "i", "k1"); done <- code }()
	<-arrived
	if got := statusCode(t, tg.URL(), "k1"); got != http.StatusNotFound {
		t.Errorf("status of a held key = %d, want 404", got)
	}
	if code, _ := post(t, tg.URL(), ClassIdem, "i", "k1"); code != http.StatusConflict {
		t.Errorf("same key while held = %d, want 409", code)
	}
	if _, live := tg.AnyLive("i", "other"); !live {
		t.Errorf("AnyLive while held = false, want true")
	}
	tg.ReleaseFirst("i", Release{How: Commit})
	if code := <-done; code != http.StatusOK {
		t.Errorf("held request answered %d after release, want 200", code)
	}
	if got := statusCode(t, tg.URL(), "k1"); got != http.StatusOK {
		t.Errorf("status of a committed key = %d, want 200", got)
	}
	keys, n := tg.Truth("i")
	if diff := cmp.Diff([]KeyView{{Key: "k1", State: Committed}}, keys); diff != "" || n != 1 {
		t.Errorf("Truth(i) = %v, %d; want one committed key, 1 effect (%s)", keys, n, diff)
	}
	if diff := cmp.Diff(map[string]string{"k1": "i"}, tg.CommittedKeys()); diff != "" {
		t.Errorf("CommittedKeys() mismatch (-want +got):\n%s", diff)
	}
}

// TestReleaseKinds: each way a held request can end leaves the truth the
// suites rely on.
func TestReleaseKinds(t *testing.T) {
	tests := []struct {
		name    string
		msg     Release
		want    KeyState
		effects int
	}{
		{name: "abort", msg: Release{How: Abort}, want: Aborted, effects: 0},
		{name: "commit then close", msg: Release{How: CommitClose}, want: Committed, effects: 1},
		{name: "close then commit late", msg: Release{How: CommitLate, Delay: 50 * time.Millisecond}, want: Committed, effects: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := Start(Config{MaxHold: 10 * time.Second})
			defer tg.Close()
			arrived := tg.Plan("i", true, nil)
			done := make(chan int, 1)
			go func() { code, _ := post(t, tg.URL(), ClassStatus, "i", "k1"); done <- code }()
			<-arrived
			tg.ReleaseFirst("i", tt.msg)
			if code := <-done; code != 0 {
				t.Errorf("the client got HTTP %d, want no answer (connection closed)", code)
			}
			tg.Close() // waits for a late commit
			keys, n := tg.Truth("i")
			if len(keys) != 1 || keys[0].State != tt.want || n != tt.effects {
				t.Errorf("Truth(i) = %v, %d effects; want state %v, %d effects", keys, n, tt.want, tt.effects)
			}
		})
	}
}

// TestCloseAbortsHeld: a request still held when the target closes ends
// with no effect (a crash of the target before its commit).
func TestCloseAbortsHeld(t *testing.T) {
	tg := Start(Config{MaxHold: 10 * time.Second})
	arrived := tg.Plan("i", true, nil)
	done := make(chan int, 1)
	go func() { code, _ := post(t, tg.URL(), ClassReview, "i", "k1"); done <- code }()
	<-arrived
	tg.Close()
	if code := <-done; code != 0 {
		t.Errorf("the client got HTTP %d, want no answer (connection closed)", code)
	}
	if keys, n := tg.Truth("i"); len(keys) != 1 || keys[0].State != Aborted || n != 0 {
		t.Errorf("Truth(i) = %v, %d effects; want one aborted key, 0 effects", keys, n)
	}
}

// TestHoldEveryAndHooks: with HoldEvery, every request of the intent is
// held (the second one too, not just the first) until MaxHold and then
// commits; the hooks see each held request and each answer, with the
// sender's PID.
func TestHoldEveryAndHooks(t *testing.T) {
	tg := Start(Config{
		MaxHold:   50 * time.Millisecond,
		HoldEvery: func(intent string) bool { return strings.HasSuffix(intent, "_h") },
		Senders:   func() []int { return []int{os.Getpid()} },
	})
	defer tg.Close()
	held, answered := make(chan int, 10), make(chan int, 10)
	tg.SetHooks(func(pid int) { held <- pid }, func(pid int) { answered <- pid })
	for _, k := range []string{"k1", "k2"} {
		if code, _ := post(t, tg.URL(), ClassStatus, "x_h", k); code != http.StatusOK {
			t.Fatalf("held request %s answered %d, want 200 after MaxHold", k, code)
		}
	}
	if code, _ := post(t, tg.URL(), ClassStatus, "plain", "k3"); code != http.StatusOK {
		t.Fatalf("plain request answered %d, want 200", code)
	}
	tg.SetHooks(nil, nil)
	close(held)
	close(answered)
	var gotHeld, gotAnswered []int
	for p := range held {
		gotHeld = append(gotHeld, p)
	}
	for p := range answered {
		gotAnswered = append(gotAnswered, p)
	}
	me := os.Getpid()
	if diff := cmp.Diff([]int{me, me}, gotHeld); diff != "" {
		t.Errorf("held hook PIDs mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{me, me, me}, gotAnswered); diff != "" {
		t.Errorf("answered hook PIDs mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"x_h": 2, "plain": 1}, tg.Effects()); diff != "" {
		t.Errorf("Effects() mismatch (-want +got):\n%s", diff)
	}
	if d := tg.Describe("k1"); !strings.Contains(d, "committed") || !strings.Contains(d, "(status)") {
		t.Errorf("Describe(k1) = %q, want its arrival and committed", d)
	}
	if d := tg.Describe("nope"); d != "never arrived" {
		t.Errorf("Describe(nope) = %q, want never arrived", d)
	}
}

// TestSocketOwner: the target attributes a request from this process to
// this process, and to nobody when this process is not a candidate.
func TestSocketOwner(t *testing.T) {
	for _, tt := range []struct {
		name    string
		senders []int
		want    int
	}{
		{"this process is a candidate", []int{os.Getpid()}, os.Getpid()},
		{"it is not", []int{1}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := Start(Config{Senders: func() []int { return tt.senders }})
			defer tg.Close()
			if code, _ := post(t, tg.URL(), ClassIdem, "x", "act_1"); code != http.StatusOK {
				t.Fatalf("post = %d, want 200", code)
			}
			var got []int
			for _, a := range tg.Arrivals() {
				got = append(got, a.PID)
			}
			if diff := cmp.Diff([]int{tt.want}, got); diff != "" {
				t.Errorf("arrival PIDs mismatch (-want +got):\n%s", diff)
			}
		})
	}
	l, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:1")
	if pid := socketOwner(l, l, []int{os.Getpid()}); pid != 0 {
		t.Errorf("socketOwner(no such socket) = %d, want 0", pid)
	}
}

// TestCatalog: the catalog loads, with one target per class at Addr and one
// tool per class, in that class's replay, and with the extra entries.
func TestCatalog(t *testing.T) {
	extraTargets := "  host:\n    channel: local\n    hostagent_socket: /tmp/a.sock\n    timeout: 5s\n"
	extraTools := `  px_host:
    description: Append one line on this host.
    input_schema: {type: object, required: [intent], properties: {intent: {type: string, pattern: "^[A-Za-z0-9_]+$"}}}
    target: host
    command: ["/bin/true", "{{intent}}"]
    replay: review
    attach_window: 1h
`
	for _, settle := range []time.Duration{0, 3 * time.Second} {
		cfg := CatalogConfig{Addr: "127.0.0.1:9", Prefix: "px", Timeout: time.Second, Settle: settle, ExtraTargets: extraTargets, ExtraTools: extraTools}
		path := filepath.Join(t.TempDir(), "catalog.yaml")
		if err := WriteCatalog(path, cfg); err != nil {
			t.Fatalf("WriteCatalog(settle %s): %v\n%s", settle, err, Catalog(cfg))
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cat, err := tools.Parse(path, b)
		if err != nil {
			t.Fatal(err)
		}
		type tgt struct {
			BaseURL, Status string
			Timeout, Settle time.Duration
		}
		gotT := map[string]tgt{}
		for name, x := range cat.Targets {
			if name == "host" {
				continue
			}
			st := ""
			if x.Status != nil {
				st = x.Status.Path
			}
			gotT[name] = tgt{x.BaseURL, st, x.Timeout, x.Settle}
		}
		wantSettle := settle
		if settle == 0 { // left out: the loader's default
			wantSettle = tools.DefaultSettle
		}
		wantT := map[string]tgt{
			ClassIdem:   {"http://127.0.0.1:9", "", time.Second, wantSettle},
			ClassStatus: {"http://127.0.0.1:9", "/status/by-key/{execution_id}", time.Second, wantSettle},
			ClassReview: {"http://127.0.0.1:9", "", time.Second, wantSettle},
		}
		if diff := cmp.Diff(wantT, gotT); diff != "" {
			t.Errorf("targets (settle %s) mismatch (-want +got):\n%s", settle, diff)
		}
		gotTools := map[string]string{}
		for name, x := range cat.Tools {
			gotTools[name] = x.Target + " " + string(x.Replay)
		}
		wantTools := map[string]string{
			cfg.Tool(ClassIdem):   "idem idempotency_key",
			cfg.Tool(ClassStatus): "status status_query",
			cfg.Tool(ClassReview): "review review",
			"px_host":             "host review",
		}
		if diff := cmp.Diff(wantTools, gotTools); diff != "" {
			t.Errorf("tools (settle %s) mismatch (-want +got):\n%s", settle, diff)
		}
	}
	if err := WriteCatalog(filepath.Join(t.TempDir(), "c.yaml"), CatalogConfig{Addr: "127.0.0.1:9", Prefix: "px"}); err == nil {
		t.Errorf("WriteCatalog with no timeout: nil error; want the loader's refusal")
	}
}

// TestKeyless: without Config.Keyless a request without a key is refused;
// with it, each such request is an effect of its own, even of the idem
// class (nothing to dedupe on).
func TestKeyless(t *testing.T) {
	strict := Start(Config{MaxHold: time.Second})
	defer strict.Close()
	if code, _ := post(t, strict.URL(), ClassIdem, "a", ""); code != http.StatusBadRequest {
		t.Errorf("keyless request to a strict target = %d, want 400", code)
	}
	tg := Start(Config{MaxHold: time.Second, Keyless: true})
	defer tg.Close()
	for range 2 {
		if code, body := post(t, tg.URL(), ClassIdem, "a", ""); code != http.StatusOK {
			t.Fatalf("keyless request = %d %s, want 200", code, body)
		}
	}
	keys, effects := tg.Truth("a")
	if effects != 2 || len(keys) != 2 || keys[0].Key != "keyless-1" || keys[1].Key != "keyless-2" {
		t.Errorf("Truth(a) = %v, %d; want two keyless effects", keys, effects)
	}
}
