package mcpchannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The raw-request seam.
//
// The go-sdk v1.8.0 client has no tasks support (CallToolParams drops
// params.task, CallTool cannot decode a CreateTaskResult, there is no
// tasks/get) and no public way to send a request it does not know. Its
// transports are public, though: a Transport's Connect returns a Connection
// that reads and writes jsonrpc.Message. tapTransport wraps the stdio
// transport's Connection: the SDK's session runs over it unchanged (the
// handshake, tools/list, list_changed, plain tools/call), and the channel
// writes its own requests (task-augmented tools/call, tasks/get, tasks/result)
// on the same connection, under string IDs ("latch-N") that the SDK's integer
// IDs never collide with; their responses are taken off Read before the SDK
// sees them. The same tap reads what the SDK drops: the tasks capability of
// the initialize (or server/discover) result and each tool's
// execution.taskSupport in tools/list.
//
// Why this seam and not a JSON-RPC client of our own for every call: the
// SDK keeps doing everything it does well (version negotiation, including
// 2026-07-28 server/discover; pings; notifications), and the raw path is used
// only for the calls the SDK cannot make. On stdio the tap wraps the
// connection; the Streamable HTTP client connection learns its protocol
// version through an unexported method the SDK calls on its own type, which a
// wrapper cannot forward, so on HTTP the tap reads the SDK's HTTP traffic
// instead and sends its own requests as POSTs of their own (httpraw.go).

// rawIDPrefix marks the IDs of the requests the channel writes itself.
const rawIDPrefix = "latch-"

// ErrRawClosed is returned for a raw request whose connection closed before
// its answer came.
var ErrRawClosed = errors.New("mcpchannel: the upstream connection closed before it answered")

type tapTransport struct {
	inner mcp.Transport
	tap   *tap
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.tap.mu.Lock()
	t.tap.conn = conn
	t.tap.mu.Unlock()
	return &tapConn{Connection: conn, tap: t.tap}, nil
}

// taskCaps is what an upstream said about tasks.
type taskCaps struct {
	// legacy: 2025-11-25 capabilities.tasks.requests.tools.call in initialize.
	legacy bool
	// modern: 2026-07-28 capabilities.extensions["io.modelcontextprotocol/tasks"]
	// in server/discover.
	modern bool
	// protocolVersion is the negotiated version ("" until known).
	protocolVersion string
	// support is execution.taskSupport by tool name (2025-11-25 tools/list).
	support map[string]string
}

// tap is one connection's raw-request state.
type tap struct {
	conn mcp.Connection // stdio
	http *httpRaw       // Streamable HTTP
	next atomic.Int64

	mu      sync.Mutex
	waiting map[string]chan *jsonrpc.Response
	closed  bool
	sent    map[string]string    // SDK request ID -> method, for the methods whose results the tap reads
	calls   map[string]string    // SDK tools/call request ID -> execution ID, until answered
	over    map[string]*oversize // execution ID -> its oversized answer (frame.go), until taken
	caps    taskCaps
}

func newTap() *tap {
	return &tap{waiting: map[string]chan *jsonrpc.Response{}, sent: map[string]string{}, calls: map[string]string{}, over: map[string]*oversize{}, caps: taskCaps{support: map[string]string{}}}
}

type tapConn struct {
	mcp.Connection
	tap *tap
}

func idKey(id jsonrpc.ID) string {
	if !id.IsValid() {
		return ""
	}
	return fmt.Sprint(id.Raw())
}

func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		switch req.Method {
		case "initialize", "server/discover", "tools/list":
			c.tap.mu.Lock()
			c.tap.sent[idKey(req.ID)] = req.Method
			c.tap.mu.Unlock()
		case "tools/call":
			if id := executionIDIn(req.Params); id != "" {
				c.tap.mu.Lock()
				c.tap.calls[idKey(req.ID)] = id
				c.tap.mu.Unlock()
			}
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.tap.closeAll()
			return nil, err
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			return msg, nil
		}
		key := idKey(resp.ID)
		if strings.HasPrefix(key, rawIDPrefix) {
			c.tap.mu.Lock()
			ch := c.tap.waiting[key]
			delete(c.tap.waiting, key)
			c.tap.mu.Unlock()
			if ch != nil {
				ch <- resp
			}
			continue // never the SDK's
		}
		c.tap.mu.Lock()
		method := c.tap.sent[key]
		delete(c.tap.sent, key)
		delete(c.tap.calls, key)
		c.tap.mu.Unlock()
		if method != "" && resp.Error == nil {
			c.tap.observe(method, resp.Result)
		}
		return msg, nil
	}
}

func (c *tapConn) Close() error {
	c.tap.closeAll()
	return c.Connection.Close()
}

func (t *tap) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for k, ch := range t.waiting {
		close(ch)
		delete(t.waiting, k)
	}
}

// observe reads the task fields of the results the SDK decodes without them.
func (t *tap) observe(method string, result json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch method {
	case "initialize":
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Tasks *struct {
					Requests *struct {
						Tools *struct {
							Call json.RawMessage `json:"call"`
						} `json:"tools"`
					} `json:"requests"`
				} `json:"tasks"`
			} `json:"capabilities"`
		}
		if json.Unmarshal(result, &r) == nil {
			t.caps.protocolVersion = r.ProtocolVersion
			// An initialize means the 2025-11-25 era (or older), even after
			// a server/discover that found no common version.
			t.caps.modern = false
			tc := r.Capabilities.Tasks
			t.caps.legacy = tc != nil && tc.Requests != nil && tc.Requests.Tools != nil && isObject(tc.Requests.Tools.Call)
		}
	case "server/discover":
		var r struct {
			SupportedVersions []string `json:"supportedVersions"`
			Capabilities      struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"capabilities"`
		}
		if json.Unmarshal(result, &r) == nil {
			t.caps.modern = isObject(r.Capabilities.Extensions[extensionTasks])
			// The version the SDK negotiates: the newest both support.
			for _, v := range mcp.SupportedProtocolVersions() {
				if slices.Contains(r.SupportedVersions, v) {
					t.caps.protocolVersion = v
					break
				}
			}
		}
	case "tools/list":
		var r struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution *struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
		}
		if json.Unmarshal(result, &r) == nil {
			for _, tl := range r.Tools {
				s := "forbidden"
				if tl.Execution != nil && tl.Execution.TaskSupport != "" {
					s = tl.Execution.TaskSupport
				}
				t.caps.support[tl.Name] = s
			}
		}
	}
}

func isObject(b json.RawMessage) bool {
	return len(b) > 0 && b[0] == '{'
}

// sawOversize notes that the answer to request key was over the frame cap
// (frame.go); the answer handed on in its place follows.
func (t *tap) sawOversize(key string, o *oversize) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id := t.calls[key]; id != "" {
		t.over[id] = o
	}
}

// takeOversize returns (once) the oversized answer to the tools/call of
// execution id, or nil.
func (t *tap) takeOversize(id string) *oversize {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.over[id]
	delete(t.over, id)
	return o
}

func (t *tap) capsNow() taskCaps {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.caps
}

// call writes one request of the channel's own and waits for its answer (or
// ctx). written is called once the request is in the connection.
func (t *tap) call(ctx context.Context, method string, params any, written func()) (json.RawMessage, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("mcpchannel: %s params do not encode: %w", method, err)
	}
	id, err := jsonrpc.MakeID(fmt.Sprintf("%s%d", rawIDPrefix, t.next.Add(1)))
	if err != nil {
		return nil, err
	}
	if t.http != nil {
		resp, err := t.http.do(ctx, t.capsNow(), &jsonrpc.Request{ID: id, Method: method, Params: body}, written)
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	}
	ch := make(chan *jsonrpc.Response, 1)
	key := idKey(id)
	t.mu.Lock()
	if t.closed || t.conn == nil {
		t.mu.Unlock()
		return nil, ErrRawClosed
	}
	t.waiting[key] = ch
	conn := t.conn
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.waiting, key)
		t.mu.Unlock()
	}()
	if err := conn.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: body}); err != nil {
		return nil, fmt.Errorf("writing %s: %w", method, err)
	}
	if written != nil {
		written()
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, ErrRawClosed
		}
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
