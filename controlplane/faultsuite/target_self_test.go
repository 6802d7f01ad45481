package faultsuite

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The suite's verdicts are only as good as its target's truth: these tests
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

func TestTargetCountsEffectsPerIntent(t *testing.T) {
	tests := []struct {
		name        string
		class       string
		keys        []string
		wantStatus  []int
		wantEffects int
	}{
		{name: "idempotency_key: the same key is one effect", class: "idem", keys: []string{"k1", "k1"}, wantStatus: []int{200, 200}, wantEffects: 1},
		{name: "idempotency_key: two keys are two effects", class: "idem", keys: []string{"k1", "k2"}, wantStatus: []int{200, 200}, wantEffects: 2},
		{name: "status_query: a re-send with the same key is a second effect", class: "status", keys: []string{"k1", "k1"}, wantStatus: []int{200, 200}, wantEffects: 2},
		{name: "review: a re-send with the same key is a second effect", class: "review", keys: []string{"k1", "k1"}, wantStatus: []int{200, 200}, wantEffects: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(time.Second)
			srv := httptest.NewServer(tg)
			defer srv.Close()
			defer tg.close()
			var got []int
			for _, k := range tt.keys {
				code, _ := post(t, srv.URL, tt.class, "i", k)
				got = append(got, code)
			}
			if diff := cmp.Diff(tt.wantStatus, got); diff != "" {
				t.Errorf("answers mismatch (-want +got):\n%s", diff)
			}
			if _, n := tg.truth("i"); n != tt.wantEffects {
				t.Errorf("truth(i) effects = %d, want %d", n, tt.wantEffects)
			}
		})
	}
}

// TestTargetHoldsAnswers404ThenCommits: the hard case of issue 10. While a
// request is held, its key answers 404 and a same-key request to the
// idempotency_key endpoint answers 409; after the release the key answers
// 200 and the effect is counted once.
func TestTargetHoldsAnswers404ThenCommits(t *testing.T) {
	tg := newTarget(10 * time.Second)
	srv := httptest.NewServer(tg)
	defer srv.Close()
	defer tg.close()
	arrived := tg.plan("i", true, nil)
	done := make(chan int, 1)
	go func() { code, _ := post(t, srv.URL, "idem", "i", "k1"); done <- code }()
	<-arrived
	if got := statusCode(t, srv.URL, "k1"); got != http.StatusNotFound {
		t.Errorf("status of a held key = %d, want 404", got)
	}
	if code, _ := post(t, srv.URL, "idem", "i", "k1"); code != http.StatusConflict {
		t.Errorf("same key while held = %d, want 409", code)
	}
	if _, live := tg.anyLive("i", "other"); !live {
		t.Errorf("anyLive while held = false, want true")
	}
	tg.releaseFirst("i", releaseMsg{how: relCommit})
	if code := <-done; code != http.StatusOK {
		t.Errorf("held request answered %d after release, want 200", code)
	}
	if got := statusCode(t, srv.URL, "k1"); got != http.StatusOK {
		t.Errorf("status of a committed key = %d, want 200", got)
	}
	keys, n := tg.truth("i")
	if diff := cmp.Diff([]keyView{{Key: "k1", State: keyCommitted}}, keys); diff != "" || n != 1 {
		t.Errorf("truth(i) = %v, %d; want one committed key, 1 effect (%s)", keys, n, diff)
	}
}

// TestTargetReleaseKinds: each way a held request can end leaves the truth
// the suite relies on.
func TestTargetReleaseKinds(t *testing.T) {
	tests := []struct {
		name    string
		msg     releaseMsg
		want    keyState
		effects int
	}{
		{name: "abort", msg: releaseMsg{how: relAbort}, want: keyAborted, effects: 0},
		{name: "commit then close", msg: releaseMsg{how: relCommitClose}, want: keyCommitted, effects: 1},
		{name: "close then commit late", msg: releaseMsg{how: relCommitLate, delay: 50 * time.Millisecond}, want: keyCommitted, effects: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(10 * time.Second)
			srv := httptest.NewServer(tg)
			defer srv.Close()
			arrived := tg.plan("i", true, nil)
			done := make(chan int, 1)
			go func() { code, _ := post(t, srv.URL, "status", "i", "k1"); done <- code }()
			<-arrived
			tg.releaseFirst("i", tt.msg)
			if code := <-done; code != 0 {
				t.Errorf("the client got HTTP %d, want no answer (connection closed)", code)
			}
			tg.close() // waits for a late commit
			keys, n := tg.truth("i")
			if len(keys) != 1 || keys[0].State != tt.want || n != tt.effects {
				t.Errorf("truth(i) = %v, %d effects; want state %v, %d effects", keys, n, tt.want, tt.effects)
			}
		})
	}
}
