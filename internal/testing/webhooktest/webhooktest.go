// Package webhooktest is a loopback HTTPS webhook receiver for tests: it
// verifies every delivery's Standard Webhooks signature and counts the
// deliveries of each webhook-id. Only tests import it.
package webhooktest

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/latchhq/latch/internal/testing/testpki"
)

// Secret is the receivers' signing secret.
const Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" //nolint:gosec // a test receiver's signing secret, not a real credential

// Receiver is a running receiver.
type Receiver struct {
	// URL is its address; CAFile the PEM CA its certificate chains to.
	URL, CAFile string
	srv         *httptest.Server
	wh          *standardwebhooks.Webhook
	mu          sync.Mutex
	seen        map[string]int
	kind        map[string]string
	bad         int
	// OnDelivery, when set before the first delivery, is called with
	// the ID of each verified delivery.
	OnDelivery func(id string)
	hold       bool
	held       chan struct{}
	release    chan struct{}
}

// New starts a receiver, stopped when tb ends.
func New(tb testing.TB) *Receiver {
	tb.Helper()
	ca := testpki.NewCA(tb, "webhook receiver")
	wh, err := standardwebhooks.NewWebhook(Secret)
	if err != nil {
		tb.Fatal(err)
	}
	r := &Receiver{wh: wh, seen: map[string]int{}, kind: map[string]string{}, held: make(chan struct{}), release: make(chan struct{})}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(tb).TLS}}
	r.srv.StartTLS()
	tb.Cleanup(r.srv.Close)
	r.URL, r.CAFile = r.srv.URL, ca.Write(tb, tb.TempDir(), "ca")
	return r
}

// HoldNext makes the next delivery block, once recorded, until Release;
// Held is closed when it arrived.
func (r *Receiver) HoldNext() {
	r.mu.Lock()
	r.hold = true
	r.mu.Unlock()
}

// Held is closed when the held delivery arrived.
func (r *Receiver) Held() <-chan struct{} { return r.held }

// Release answers the held delivery with 503.
func (r *Receiver) Release() { close(r.release) }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if err := r.wh.Verify(body, req.Header); err != nil || json.Unmarshal(body, &ev) != nil || ev.ID != req.Header.Get("webhook-id") {
		r.mu.Lock()
		r.bad++
		r.mu.Unlock()
		http.Error(w, "bad signature or body", http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	r.seen[ev.ID]++
	r.kind[ev.ID] = ev.Type
	hold := r.hold
	r.hold = false
	r.mu.Unlock()
	if r.OnDelivery != nil {
		r.OnDelivery(ev.ID)
	}
	if hold {
		close(r.held)
		<-r.release
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Snapshot returns the deliveries per ID, the type of each ID, and how
// many deliveries failed verification.
func (r *Receiver) Snapshot() (seen map[string]int, kinds map[string]string, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, kinds = map[string]int{}, map[string]string{}
	for k, v := range r.seen {
		seen[k] = v
	}
	for k, v := range r.kind {
		kinds[k] = v
	}
	return seen, kinds, r.bad
}
