// Package demotarget is a small HTTP service with side effects, used as the
// target of tests and of `latch dev`. Its POST endpoints implement the IETF
// Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header):
//
//   - a POST without the key header is refused with 400;
//   - the same key with the same payload returns the stored response, marked
//     "Idempotent-Replayed: true", and performs no second effect;
//   - the same key with a different payload is refused with 422;
//   - the same key while the first request is still in flight gets 409.
//
// Keys never expire (the process is short-lived). Payloads are compared
// after JSON canonicalization, so whitespace and key order do not matter.
// A request refused by validation (400) stores nothing.
//
// Endpoints:
//
//	POST /v1/releases                 {service, version, region} → 201 {release_id, service, version, region, status: "deployed"}
//	GET  /v1/releases/{service}       → 200 the current release of service, 404 none (read-only)
//	GET  /v1/releases/by-key/{key}    → 200 the stored response of key, 404 unknown key, 409 in flight
//	POST /v1/tickets                  {title, body?} → 201 {ticket_id, title, status: "open"}
//	GET  /v1/tickets/by-key/{key}     (as for releases)
//	POST /v1/credentials/rotate       {name} → 200 {credential, version, status: "rotated"}
//	GET  /v1/credentials/by-key/{key} (as for releases)
//
// Fault knobs for tests: SetDelay makes every POST sleep after performing its
// effect and before answering (so a client timeout is an unknown outcome
// whose effect happened), Hold makes them wait until Release; SetFailNext makes the next request fail with a
// status and no effect. Effects, Total, Requests and InFlight let tests
// count what happened. Only tests and the dev command import this package.
package demotarget

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Effect kinds, as counted by Effects.
const (
	KindRelease  = "release"
	KindTicket   = "ticket"
	KindRotation = "rotation"
)

// DefaultKeyHeader is the header carrying the idempotency key.
const DefaultKeyHeader = "Idempotency-Key"

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Config configures a Server.
type Config struct {
	Logger hclog.Logger
	// KeyHeader names the idempotency key header (default Idempotency-Key).
	KeyHeader string
}

// Server is the demo target. It is an http.Handler and safe for concurrent use.
type Server struct {
	log       hclog.Logger
	keyHeader string
	mux       *http.ServeMux

	mu       sync.Mutex
	keys     map[string]*entry // kind + "\x00" + key
	effects  map[string]int
	total    int
	requests int
	inFlight int
	releases map[string][]byte // service → current release JSON
	versions map[string]int    // credential → version
	delay    time.Duration
	wake     chan struct{} // closed when the delay changes
	failNext int
}

// entry is the idempotency record of one key.
type entry struct {
	fingerprint [32]byte
	done        bool
	status      int
	body        []byte
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.KeyHeader == "" {
		cfg.KeyHeader = DefaultKeyHeader
	}
	s := &Server{
		log:       cfg.Logger.Named("demotarget"),
		keyHeader: cfg.KeyHeader,
		mux:       http.NewServeMux(),
		keys:      make(map[string]*entry),
		effects:   make(map[string]int),
		releases:  make(map[string][]byte),
		versions:  make(map[string]int),
		wake:      make(chan struct{}),
	}
	s.mux.HandleFunc("POST /v1/releases", s.post(KindRelease, s.release))
	s.mux.HandleFunc("GET /v1/releases/by-key/{key}", s.byKey(KindRelease))
	s.mux.HandleFunc("GET /v1/releases/{service}", s.currentRelease)
	s.mux.HandleFunc("POST /v1/tickets", s.post(KindTicket, s.ticket))
	s.mux.HandleFunc("GET /v1/tickets/by-key/{key}", s.byKey(KindTicket))
	s.mux.HandleFunc("POST /v1/credentials/rotate", s.post(KindRotation, s.rotate))
	s.mux.HandleFunc("GET /v1/credentials/by-key/{key}", s.byKey(KindRotation))
	// Control endpoints for `latch demo` (the demo target only ever serves
	// on loopback under `latch dev`): effect counts and the answer delay.
	s.mux.HandleFunc("GET /_demo/effects", s.effectCounts)
	s.mux.HandleFunc("POST /_demo/delay", s.setDelay)
	return s
}

func (s *Server) effectCounts(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := map[string]int{}
	for k, v := range s.effects {
		out[k] = v
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) setDelay(w http.ResponseWriter, r *http.Request) {
	ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
	if err != nil || ms < 0 || ms > 60_000 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "ms must be an integer from 0 to 60000"})
		return
	}
	s.SetDelay(time.Duration(ms) * time.Millisecond)
	writeJSON(w, http.StatusOK, map[string]int{"delay_ms": ms})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	fail := s.failNext
	s.failNext = 0
	s.mu.Unlock()
	if fail != 0 {
		writeJSON(w, fail, map[string]string{"error": "injected failure"})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Effects returns how many effects of kind were performed.
func (s *Server) Effects(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[kind]
}

// Total returns how many effects of any kind were performed.
func (s *Server) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Requests returns how many HTTP requests the server has received.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// InFlight returns how many keyed POSTs have performed or are performing
// their effect and have not answered yet.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// SetDelay makes POSTs sleep d after performing their effect and before
// answering. Changing the delay ends the sleeps in progress; a client that
// goes away ends its own.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
	close(s.wake)
	s.wake = make(chan struct{})
}

// Hold makes POSTs wait after performing their effect, before answering,
// until Release (or until their client goes away): an in-flight window a
// test controls, which no slow machine can close early.
func (s *Server) Hold() { s.SetDelay(time.Duration(math.MaxInt64)) }

// Release ends the holds and delays in progress; later POSTs answer at once.
func (s *Server) Release() { s.SetDelay(0) }

// SetFailNext makes the next request, whatever it is, answer status with no
// effect. 0 clears it.
func (s *Server) SetFailNext(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = status
}

// effectFunc validates a payload (returning an error message for a 400) or,
// with perform set, performs the effect under s.mu and returns the answer.
type effectFunc func(payload map[string]any, perform bool) (status int, body any, problem string)

func (s *Server) post(kind string, effect effectFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(s.keyHeader)
		if key == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "missing " + s.keyHeader + " header"})
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "cannot read body: " + err.Error()})
			return
		}
		var payload map[string]any
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, &payload); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not a JSON object"})
				return
			}
		}
		canon, _ := json.Marshal(payload) // map keys are sorted
		fp := sha256.Sum256(append([]byte(r.Method+" "+r.URL.Path+"\n"), canon...))
		id := kind + "\x00" + key

		s.mu.Lock()
		if e := s.keys[id]; e != nil {
			s.mu.Unlock()
			switch {
			case e.fingerprint != fp:
				writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "idempotency key reused with a different payload"})
			case !e.done:
				writeJSON(w, http.StatusConflict, map[string]string{"error": "a request with this idempotency key is in progress"})
			default:
				w.Header().Set("Idempotent-Replayed", "true")
				w.Header().Set(s.keyHeader, key)
				writeRaw(w, e.status, e.body)
			}
			return
		}
		if _, _, problem := effect(payload, false); problem != "" {
			s.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": problem})
			return
		}
		e := &entry{fingerprint: fp}
		s.keys[id] = e
		s.inFlight++
		status, body, _ := effect(payload, true)
		s.effects[kind]++
		s.total++
		delay, wake := s.delay, s.wake
		s.mu.Unlock()
		s.log.Debug("effect performed", "kind", kind, "key", key, "status", status)

		b, _ := json.Marshal(body)
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-wake:
			case <-r.Context().Done():
			}
			t.Stop()
		}
		s.mu.Lock()
		e.status, e.body, e.done = status, b, true
		s.inFlight--
		s.mu.Unlock()
		w.Header().Set(s.keyHeader, key)
		writeRaw(w, status, b)
	}
}

func (s *Server) byKey(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		s.mu.Lock()
		e := s.keys[kind+"\x00"+key]
		var done bool
		var body []byte
		if e != nil {
			done, body = e.done, e.body
		}
		s.mu.Unlock()
		switch {
		case e == nil:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no request with this idempotency key"})
		case !done:
			writeJSON(w, http.StatusConflict, map[string]string{"error": "the request with this idempotency key is in progress"})
		default:
			writeRaw(w, http.StatusOK, body)
		}
	}
}

func (s *Server) currentRelease(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.releases[r.PathValue("service")]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no release of this service"})
		return
	}
	writeRaw(w, http.StatusOK, b)
}

// release deploys {service, version, region}.
func (s *Server) release(p map[string]any, perform bool) (int, any, string) {
	service, version, region := str(p, "service"), str(p, "version"), str(p, "region")
	if service == "" || version == "" || region == "" {
		return 0, nil, "service, version and region are required strings"
	}
	if strings.ContainsAny(service, "/") {
		return 0, nil, "service must not contain /"
	}
	if !perform {
		return 0, nil, ""
	}
	rel := map[string]string{
		"release_id": fmt.Sprintf("rel-%06d", s.effects[KindRelease]+1),
		"service":    service,
		"version":    version,
		"region":     region,
		"status":     "deployed",
	}
	b, _ := json.Marshal(rel)
	s.releases[service] = b
	return http.StatusCreated, rel, ""
}

// ticket opens {title, body?}.
func (s *Server) ticket(p map[string]any, perform bool) (int, any, string) {
	title := str(p, "title")
	if title == "" {
		return 0, nil, "title is a required string"
	}
	if !perform {
		return 0, nil, ""
	}
	return http.StatusCreated, map[string]string{
		"ticket_id": fmt.Sprintf("tkt-%06d", s.effects[KindTicket]+1),
		"title":     title,
		"status":    "open",
	}, ""
}

// rotate rotates the credential {name}.
func (s *Server) rotate(p map[string]any, perform bool) (int, any, string) {
	name := str(p, "service") // the example catalog's rotate_credential
	if name == "" {
		name = str(p, "name")
	}
	if name == "" {
		return 0, nil, "service is a required string"
	}
	if !perform {
		return 0, nil, ""
	}
	s.versions[name]++
	return http.StatusOK, map[string]any{
		"credential": name,
		"version":    s.versions[name],
		"status":     "rotated",
	}, ""
}

func str(p map[string]any, k string) string {
	v, _ := p[k].(string)
	return v
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
