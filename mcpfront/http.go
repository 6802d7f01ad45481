package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/latchhq/latch/internal/mcpwire"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Headers the HTTP wrapper sets for the tool handlers, which see only
// req.Extra.Header (the SDK hides the JSON-RPC id and the peer address).
// Client-sent values are removed first, so they cannot be forged.
const (
	HeaderJSONRPCID   = "Latch-Jsonrpc-Id"
	HeaderPeerAddress = "Latch-Peer-Address"
	// HeaderRun is the client's explicit intent scope (docs/design §5).
	HeaderRun = "Latch-Run"
)

// maxBody bounds a POST body; tool arguments are small.
const maxBody = 4 << 20

// deliveryMarker precedes an execution id in the `_meta` of a result that
// carries a completed execution's stored result. The wrappers below look for
// it in the bytes they write and record delivery once the write succeeded.
const deliveryMarker = `"latch/delivery":"`

// wrapHTTP puts, outermost first: the Origin rule, bearer authentication,
// evidence headers, and the delivery observer around next.
func (f *Front) wrapHTTP(next http.Handler) http.Handler {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if aw, ok := w.(*authWriter); ok {
			w = aw.ResponseWriter // authWriter only matters for the 401 path
		}
		f.serveObserved(w, r, next)
	})
	// Bearer authentication (static tokens and OAuth JWTs, oauth.go).
	if f.authRequired() {
		opts := &sdkauth.RequireBearerTokenOptions{
			// Latch tokens do not expire; they are revoked (`latch token
			// revoke`). JWTs must carry exp (auth.JWTVerifier checks it).
			AllowMissingExpiration: true,
		}
		if f.cfg.OAuth != nil {
			opts.ClockSkew = f.cfg.OAuth.Leeway()
		}
		mw := sdkauth.RequireBearerToken(f.verifyToken, opts)(h)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mw.ServeHTTP(&authWriter{ResponseWriter: w, challenge: f.challenge(r)}, r)
		})
	}
	// End of bearer authentication.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origins := r.Header.Values("Origin"); len(origins) > 0 {
			err := f.origins.check(origins[0])
			if err == nil && len(origins) > 1 {
				err = errors.New("more than one Origin header")
			}
			if err != nil {
				f.log.Debug("refused origin", "origin", origins, "peer", r.RemoteAddr, "error", err)
				http.Error(w, fmt.Sprintf("Forbidden: %v. The operator can allow a browser origin with --allow-origin.", err), http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// authWriter puts the front's WWW-Authenticate challenge (Front.challenge)
// on 401 answers: the SDK adds one only when resource metadata or scopes are
// configured, without the error code, and RFC 6750 requires one.
type authWriter struct {
	http.ResponseWriter
	challenge string
}

func (w *authWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", w.challenge)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *authWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serveObserved copies evidence into headers, serves the request, and records
// delivery of the completed results it wrote.
func (f *Front) serveObserved(w http.ResponseWriter, r *http.Request, next http.Handler) {
	r.Header.Del(HeaderJSONRPCID)
	r.Header.Del(HeaderPeerAddress)
	r.Header.Set(HeaderPeerAddress, r.RemoteAddr)
	method := ""
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var id string
		if id, method = jsonrpcRequest(body); id != "" {
			r.Header.Set(HeaderJSONRPCID, id)
		}
	}
	dw := &deliveryWriter{ResponseWriter: w}
	out, untap := f.tapStream(dw, r) // a session's GET stream (late.go)
	next.ServeHTTP(out, r)
	untap()
	// Delivery is recorded here, after the SDK handler returned for this
	// HTTP exchange, when (1) the SSE event carrying the completed result was
	// written and flushed without error and (2) the client was still
	// connected when the exchange ended. This covers the POST that carried
	// the call (both eras) and the GET + Last-Event-ID that replayed it after
	// a cut. Limits: "written to the socket" is the strongest fact an HTTP
	// server can establish; a client that dies after the kernel accepted the
	// bytes but before reading them is recorded as delivered. A result that
	// is never written (client gone for good) stays completed-not-delivered,
	// which is the safe side: an attach returns the stored result.
	//
	// A result whose write failed did not reach its caller: on a stateless
	// tools/call the caller left before the answer (reported, delivery.go);
	// on a session the answer waits in the event store for a resume, and a
	// task's result is read again by its next tasks/get.
	if len(dw.unwritten) > 0 && method == "tools/call" && isModernEra(r.Header.Get(mcpwire.HeaderProtocolVersion)) {
		for _, id := range dw.unwritten {
			f.notWritten(id)
		}
	}
	if dw.failed || r.Context().Err() != nil {
		return
	}
	for _, id := range dw.delivered {
		f.markDelivered(id)
	}
}

// jsonrpcID returns the id of a single JSON-RPC request body, as JSON text
// (`7`, `"abc"`), or "" for notifications, responses and batches.
func jsonrpcID(body []byte) string {
	id, _ := jsonrpcRequest(body)
	return id
}

// jsonrpcRequest is jsonrpcID and the request's method ("" with no id).
func jsonrpcRequest(body []byte) (id, method string) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Method == "" || len(msg.ID) == 0 {
		return "", ""
	}
	return string(msg.ID), msg.Method
}

// deliveryWriter watches the SSE events the SDK writes for delivery markers.
// The SDK writes one event per Write call (mcp/event.go writeEvent).
type deliveryWriter struct {
	http.ResponseWriter
	delivered []string
	// unwritten are the execution ids of results whose write failed.
	unwritten []string
	failed    bool
}

func (w *deliveryWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if err != nil {
		w.failed = true
		w.unwritten = appendMarkers(w.unwritten, p)
		return n, err
	}
	w.delivered = appendMarkers(w.delivered, p)
	return n, nil
}

func (w *deliveryWriter) Flush() {
	if err := http.NewResponseController(w.ResponseWriter).Flush(); err != nil {
		w.failed = true
	}
}

func (w *deliveryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// appendMarkers appends the execution ids that follow deliveryMarker in p.
func appendMarkers(ids []string, p []byte) []string {
	for {
		i := bytes.Index(p, []byte(deliveryMarker))
		if i < 0 {
			return ids
		}
		p = p[i+len(deliveryMarker):]
		j := bytes.IndexByte(p, '"')
		if j < 0 {
			return ids
		}
		ids = append(ids, string(p[:j]))
		p = p[j:]
	}
}

// maxPending bounds the pending-delivery set; past it, results are not
// tracked and stay completed-not-delivered (the safe side).
const maxPending = 100_000

// expectDelivery registers a completed execution whose result is being sent.
func (f *Front) expectDelivery(id string) bool {
	f.pendingMu.Lock()
	defer f.pendingMu.Unlock()
	if len(f.pending) >= maxPending {
		return false
	}
	f.pending[id] = struct{}{}
	return true
}

// deliveringTransport records delivery on stdio: after a response carrying a
// delivery marker was written to stdout without error.
type deliveringTransport struct {
	inner mcp.Transport
	front *Front
}

func (t *deliveringTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &deliveringConn{Connection: c, front: t.front}, nil
}

type deliveringConn struct {
	mcp.Connection
	front *Front
}

func (c *deliveringConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
		if !strings.Contains(string(resp.Result), deliveryMarker) {
			return err
		}
		for _, id := range appendMarkers(nil, resp.Result) {
			if err != nil {
				// stdout is gone: the client left before the answer.
				c.front.notWritten(id)
				continue
			}
			c.front.markDelivered(id)
		}
	}
	return err
}
