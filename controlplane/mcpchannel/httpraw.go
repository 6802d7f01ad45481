package mcpchannel

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/mcpwire"
)

// The raw-request seam on Streamable HTTP.
//
// The SDK's Streamable HTTP connection cannot be wrapped like the stdio one
// (it learns its protocol version through an unexported method the SDK calls
// on its own type), so on HTTP the SDK's session runs unwrapped and the
// channel's own requests (task-augmented tools/call, tasks/get, tasks/result)
// are POSTs of their own to the same URL through the same http.Client: the
// same roundTripper (the credential, the written mark) over the same
// http.Transport (the address policy). What the SDK keeps to itself is read
// off its HTTP traffic by that roundTripper: the Mcp-Session-Id the upstream
// assigned (response header), and the task fields of the initialize,
// server/discover and tools/list results (response bodies, JSON or event
// stream, read as the SDK reads them).

// maxRawBody bounds a raw answer (a JSON body, or one event of a stream).
const maxRawBody = 16 << 20

// HTTP header names of the Streamable HTTP transport.
const (
	headerSessionID       = mcpwire.HeaderSessionID
	headerProtocolVersion = mcpwire.HeaderProtocolVersion
	headerMethod          = mcpwire.HeaderMethod
	headerName            = mcpwire.HeaderName
	// standardHeadersSince is the first version whose requests carry
	// Mcp-Method and Mcp-Name (SEP-2243).
	standardHeadersSince = mcpwire.Era20260728
)

// httpRaw sends the channel's own requests to an HTTP upstream.
type httpRaw struct {
	url    string
	client *http.Client

	mu        sync.Mutex
	sessionID string
	// sessionGone is called when the upstream answers 404 for the session:
	// it forgot it (restarted), so the SDK's session is closed and the
	// supervisor connects again.
	sessionGone func()
}

func (h *httpRaw) session() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessionID
}

// sawSession records the session ID the upstream assigned (the first one:
// a session's ID does not change).
func (h *httpRaw) sawSession(id string) {
	h.mu.Lock()
	if h.sessionID == "" {
		h.sessionID = id
	}
	h.mu.Unlock()
}

func (h *httpRaw) setSessionGone(fn func()) {
	h.mu.Lock()
	h.sessionGone = fn
	h.mu.Unlock()
}

// do POSTs one request and reads its answer, a JSON body or the response in
// an event stream. written is called once the request is on the wire
// (httptrace); an error before that means nothing reached the upstream.
func (h *httpRaw) do(ctx context.Context, caps taskCaps, req *jsonrpc.Request, written func()) (*jsonrpc.Response, error) {
	data, err := jsonrpc.EncodeMessage(req)
	if err != nil {
		return nil, fmt.Errorf("mcpchannel: encoding %s: %w", req.Method, err)
	}
	var once atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil && written != nil && once.CompareAndSwap(false, true) {
			written()
		}
	}}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, h.url, bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("mcpchannel: building the %s request: %w", req.Method, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json, text/event-stream")
	if caps.protocolVersion != "" {
		hreq.Header.Set(headerProtocolVersion, caps.protocolVersion)
	}
	sid := h.session()
	if sid != "" {
		hreq.Header.Set(headerSessionID, sid)
	}
	if caps.protocolVersion >= standardHeadersSince {
		hreq.Header.Set(headerMethod, req.Method)
		if req.Method == "tools/call" {
			var p struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(req.Params, &p) == nil && p.Name != "" {
				hreq.Header.Set(headerName, p.Name)
			}
		}
		if h, ok := ctx.Value(paramHeadersKey{}).(map[string]string); ok {
			for k, v := range h {
				hreq.Header.Set(k, v)
			}
		}
	}
	resp, err := h.client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", req.Method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && sid != "" {
		// The transport's rule: a server refuses every request of a session
		// it does not know, before running anything.
		h.mu.Lock()
		gone := h.sessionGone
		h.mu.Unlock()
		if gone != nil {
			go gone()
		}
		return nil, fmt.Errorf("%s: HTTP 404 for session %s: %w", req.Method, sid, mcp.ErrSessionMissing)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if msg, err := jsonrpc.DecodeMessage(body); err == nil {
			if r, ok := msg.(*jsonrpc.Response); ok && r.Error != nil {
				return r, nil
			}
		}
		return nil, fmt.Errorf("%s: the upstream answered HTTP %d %s", req.Method, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxRawBody+1))
		if err != nil {
			return nil, fmt.Errorf("%s: reading the answer: %w", req.Method, err)
		}
		if len(body) > maxRawBody {
			return nil, fmt.Errorf("%s: the answer is larger than %d bytes", req.Method, maxRawBody)
		}
		r, err := decodeResponse(body, req.ID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.Method, err)
		}
		return r, nil
	case "text/event-stream":
		return h.readStream(ctx, caps, req, resp)
	}
	return nil, fmt.Errorf("%s: the upstream answered with content type %q (want application/json or text/event-stream)", req.Method, ct)
}

// maxResumes bounds how often one answer's event stream is resumed.
const maxResumes = 50

// readStream reads the answer to req from an event stream. A stream that
// ends before the answer after an event with an ID (the server closing it
// to be polled, SEP-1699) is resumed with a GET carrying Last-Event-ID, after
// the server's retry delay, at most maxResumes times.
func (h *httpRaw) readStream(ctx context.Context, caps taskCaps, req *jsonrpc.Request, resp *http.Response) (*jsonrpc.Response, error) {
	p := &sseParser{max: maxRawBody}
	body := resp.Body
	for resumes := 0; ; resumes++ {
		found, err := readEvents(body, p, req.ID)
		if found != nil {
			return found, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.Method, err)
		}
		if p.lastID == "" || resumes >= maxResumes {
			return nil, fmt.Errorf("%s: the upstream's event stream ended before it answered", req.Method)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: waiting to resume the upstream's event stream: %w", req.Method, ctx.Err())
		case <-time.After(min(max(p.retry, 100*time.Millisecond), 5*time.Second)):
		}
		g, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
		if err != nil {
			return nil, err
		}
		g.Header.Set("Accept", "text/event-stream")
		g.Header.Set(mcpwire.HeaderLastEventID, p.lastID)
		if caps.protocolVersion != "" {
			g.Header.Set(headerProtocolVersion, caps.protocolVersion)
		}
		if sid := h.session(); sid != "" {
			g.Header.Set(headerSessionID, sid)
		}
		gr, err := h.client.Do(g)
		if err != nil {
			return nil, fmt.Errorf("%s: resuming the upstream's event stream: %w", req.Method, err)
		}
		defer gr.Body.Close()
		if ct, _, _ := mime.ParseMediaType(gr.Header.Get("Content-Type")); gr.StatusCode != http.StatusOK || ct != "text/event-stream" {
			return nil, fmt.Errorf("%s: resuming the upstream's event stream: HTTP %d, content type %q", req.Method, gr.StatusCode, ct)
		}
		body = gr.Body
		p = &sseParser{max: maxRawBody, lastID: p.lastID, retry: p.retry}
	}
}

// readEvents parses body until the answer to id, the end of the stream (nil,
// nil) or an error.
func readEvents(body io.Reader, p *sseParser, id jsonrpc.ID) (*jsonrpc.Response, error) {
	var found *jsonrpc.Response
	buf := make([]byte, 32<<10)
	for {
		n, rerr := body.Read(buf)
		perr := p.feed(buf[:n], func(data []byte) bool {
			if r, err := decodeResponse(data, id); err == nil {
				found = r
				return true
			}
			return false // a notification or a request of the upstream's, another answer, a priming event
		})
		if found != nil {
			return found, nil
		}
		if perr != nil {
			return nil, perr
		}
		if errors.Is(rerr, io.EOF) {
			return nil, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("reading the upstream's event stream: %w", rerr)
		}
	}
}

// decodeResponse decodes the answer to the request with ID id.
func decodeResponse(b []byte, id jsonrpc.ID) (*jsonrpc.Response, error) {
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return nil, fmt.Errorf("the answer does not decode as JSON-RPC: %w", err)
	}
	r, ok := msg.(*jsonrpc.Response)
	if !ok || idKey(r.ID) != idKey(id) {
		return nil, errors.New("the body is not the answer to the request")
	}
	return r, nil
}

// sseParser splits a text/event-stream into the data of its events.
type sseParser struct {
	max    int
	line   []byte
	data   []byte
	has    bool
	done   bool
	lastID string        // the last event ID seen (for Last-Event-ID)
	retry  time.Duration // the server's reconnection delay (retry:)
}

// feed parses b, calling emit with the data of each complete event until
// emit returns true.
func (p *sseParser) feed(b []byte, emit func([]byte) bool) error {
	for len(b) > 0 && !p.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.line = append(p.line, b...)
			if len(p.line) > p.max {
				return fmt.Errorf("an event stream line is longer than %d bytes", p.max)
			}
			return nil
		}
		p.line = append(p.line, b[:i]...)
		b = b[i+1:]
		line := bytes.TrimSuffix(p.line, []byte("\r"))
		switch {
		case len(line) == 0: // the end of an event
			if p.has && emit(p.data) {
				p.done = true
			}
			p.data, p.has = p.data[:0], false
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if p.has {
				p.data = append(p.data, '\n')
			}
			p.data, p.has = append(p.data, v...), true
			if len(p.data) > p.max {
				return fmt.Errorf("an event is larger than %d bytes", p.max)
			}
		case bytes.HasPrefix(line, []byte("id:")):
			p.lastID = string(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("id:")), []byte(" ")))
		case bytes.HasPrefix(line, []byte("retry:")):
			if ms, err := strconv.Atoi(string(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("retry:"))))); err == nil && ms >= 0 {
				p.retry = time.Duration(ms) * time.Millisecond
			}
		}
		p.line = p.line[:0]
	}
	return nil
}

// sniffBody reads, as the SDK reads it, the answer to one of the SDK's
// requests whose task fields the SDK drops, and hands it to the tap.
type sniffBody struct {
	io.ReadCloser
	tap    *tap
	method string
	id     jsonrpc.ID
	sse    bool
	p      sseParser
	buf    []byte
	done   bool
}

func (s *sniffBody) Read(b []byte) (int, error) {
	n, err := s.ReadCloser.Read(b)
	if !s.done {
		if s.sse {
			if s.p.feed(b[:n], s.try) != nil {
				s.done = true
			}
		} else {
			s.buf = append(s.buf, b[:n]...)
			if len(s.buf) > maxRawBody {
				s.done, s.buf = true, nil
			} else if err != nil {
				s.done = true
				s.try(s.buf)
				s.buf = nil
			}
		}
	}
	return n, err
}

func (s *sniffBody) try(data []byte) bool {
	r, err := decodeResponse(data, s.id)
	if err != nil {
		return false
	}
	s.done = true
	if r.Error == nil {
		s.tap.observe(s.method, r.Result)
	}
	return true
}

// sniff wraps the body of resp, the answer to the SDK's request body, when
// it is one the tap reads.
func (t *tap) sniff(reqBody []byte, resp *http.Response) {
	if !bytes.Contains(reqBody, []byte(`"initialize"`)) && !bytes.Contains(reqBody, []byte(`"server/discover"`)) && !bytes.Contains(reqBody, []byte(`"tools/list"`)) {
		return // not worth decoding (a tool call's body may be large)
	}
	msg, err := jsonrpc.DecodeMessage(reqBody)
	if err != nil {
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.ID.IsValid() {
		return
	}
	switch req.Method {
	case "initialize", "server/discover", "tools/list":
	default:
		return
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "application/json" && ct != "text/event-stream" {
		return
	}
	resp.Body = &sniffBody{ReadCloser: resp.Body, tap: t, method: req.Method, id: req.ID, sse: ct == "text/event-stream", p: sseParser{max: maxRawBody}}
}

type paramHeadersKey struct{}

// withParamHeaders carries the Mcp-Param-* headers of one raw request.
func withParamHeaders(ctx context.Context, h map[string]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return context.WithValue(ctx, paramHeadersKey{}, h)
}

// paramHeaders are the Mcp-Param-* headers (SEP-2243) a 2026-07-28
// tools/call carries: one per input-schema property annotated with
// x-mcp-header whose argument is a string, boolean or safe integer, the
// value Base64-wrapped (=?base64?...?=) when it is not plain visible ASCII.
func paramHeaders(schema any, args map[string]any) map[string]string {
	type prop struct {
		XMCPHeader string          `json:"x-mcp-header"`
		Properties json.RawMessage `json:"properties"`
	}
	var walk func(props json.RawMessage, args json.RawMessage, out map[string]string)
	walk = func(props json.RawMessage, args json.RawMessage, out map[string]string) {
		var ps map[string]prop
		var as map[string]json.RawMessage
		if json.Unmarshal(props, &ps) != nil || json.Unmarshal(args, &as) != nil {
			return
		}
		for name, p := range ps {
			a, ok := as[name]
			if !ok {
				continue
			}
			if p.XMCPHeader != "" {
				if v, ok := headerValue(a); ok {
					out["Mcp-Param-"+p.XMCPHeader] = v
				}
			}
			if len(p.Properties) > 0 {
				walk(p.Properties, a, out)
			}
		}
	}
	sb, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var s struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(sb, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	ab, err := json.Marshal(args)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	walk(s.Properties, ab, out)
	return out
}

const maxSafeInteger = 1<<53 - 1

func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case bool:
		s = strconv.FormatBool(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > maxSafeInteger {
			return "", false
		}
		s = strconv.FormatInt(int64(x), 10)
	default:
		return "", false
	}
	plain := s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7E
	}
	if plain {
		return s, true
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=", true
}
