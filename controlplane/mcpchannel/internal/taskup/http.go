package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/latchhq/latch/internal/atomicfile"
)

// serveHTTP serves Streamable HTTP at /mcp on addr (see the package doc).
func (s *server) serveHTTP(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	atomicfile.Write(filepath.Join(s.dir, "url"), []byte(url), 0o644, false)
	h := &httpServer{s: s, sessions: map[string]bool{}, polled: map[string]request{}, token: os.Getenv("TASKUP_TOKEN")}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	return http.Serve(ln, mux)
}

type httpServer struct {
	s        *server
	token    string // with TASKUP_TOKEN, every request must carry it as a bearer token
	mu       sync.Mutex
	sessions map[string]bool
	polled   map[string]request // tasks/result requests by the event ID of their closed stream
	next     int
}

func (h *httpServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet:
		h.resume(w, r)
		return
	case http.MethodDelete:
		h.mu.Lock()
		delete(h.sessions, r.Header.Get("Mcp-Session-Id"))
		h.mu.Unlock()
		return
	default: // no standalone stream
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad JSON-RPC message: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.ID) == 0 || req.Method == "" { // a notification or a response
		w.WriteHeader(http.StatusAccepted)
		return
	}
	fail := func(status, code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": rpcError{code, msg}})
		w.Write(b)
	}
	if h.s.modern {
		// SEP-2243: the headers must match the body.
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		json.Unmarshal(req.Params, &p)
		switch req.Method {
		case "tools/call", "tasks/get":
			if got := r.Header.Get("Mcp-Method"); got != req.Method {
				fail(http.StatusBadRequest, -32001, "header Mcp-Method is "+got+", want "+req.Method)
				return
			}
		}
		if req.Method == "tools/call" && r.Header.Get("Mcp-Name") != p.Name {
			fail(http.StatusBadRequest, -32001, "header Mcp-Name is "+r.Header.Get("Mcp-Name")+", want "+p.Name)
			return
		}
		if req.Method == "tools/call" && p.Name == "charge" {
			// charge's text is annotated x-mcp-header Charge-Text.
			got := r.Header.Get("Mcp-Param-Charge-Text")
			if enc, ok := strings.CutPrefix(got, "=?base64?"); ok {
				b, _ := base64.StdEncoding.DecodeString(strings.TrimSuffix(enc, "?="))
				got = string(b)
			}
			if got != p.Arguments.Text {
				fail(http.StatusBadRequest, -32001, "header Mcp-Param-Charge-Text is "+got+", want "+p.Arguments.Text)
				return
			}
		}
	} else if req.Method == "initialize" {
		b := make([]byte, 8)
		rand.Read(b)
		sid := hex.EncodeToString(b)
		h.mu.Lock()
		h.sessions[sid] = true
		h.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
	} else {
		h.mu.Lock()
		ok := h.sessions[r.Header.Get("Mcp-Session-Id")]
		h.mu.Unlock()
		if !ok {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	}
	stream := req.Method == "tools/call" || req.Method == "tasks/result"
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
	}
	if req.Method == "tasks/result" {
		// SEP-1699 polling: a priming event with an ID, then the stream is
		// closed; the answer comes on the GET that resumes it.
		h.mu.Lock()
		h.next++
		eid := fmt.Sprintf("result-%d", h.next)
		h.polled[eid] = req
		h.mu.Unlock()
		fmt.Fprintf(w, "id: %s\nretry: 20\ndata: \n\n", eid)
		return
	}
	h.answer(w, req, stream)
}

// resume answers the GET resuming a closed tasks/result stream.
func (h *httpServer) resume(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	req, ok := h.polled[r.Header.Get("Last-Event-ID")]
	known := h.sessions[r.Header.Get("Mcp-Session-Id")]
	h.mu.Unlock()
	if !ok { // no standalone stream
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !known && !h.s.modern {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	h.answer(w, req, true)
}

func (h *httpServer) answer(w http.ResponseWriter, req request, stream bool) {
	h.s.handle(req, func(result any, rerr *rpcError) {
		msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if rerr != nil {
			msg["error"] = rerr
		} else {
			msg["result"] = result
		}
		b, _ := json.Marshal(msg)
		if stream {
			w.Write([]byte("event: message\ndata: "))
			w.Write(b)
			w.Write([]byte("\n\n"))
			w.(http.Flusher).Flush()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
}
