// Command taskup is a counting upstream MCP server that runs calls as tasks,
// for mcpchannel's tests. It is written without the go-sdk (which has no
// tasks): newline-delimited JSON-RPC over stdio, the 2025-11-25 tasks
// utility (capabilities.tasks.requests.tools.call, execution.taskSupport,
// params.task, CreateTaskResult {task}, tasks/get, tasks/result), or with
// --modern the 2026-07-28 extension io.modelcontextprotocol/tasks
// (server/discover, flat CreateTaskResult, result inlined in tasks/get).
//
// Its task store is durable in the state directory, as a task store that
// outlives a process must be: a task is written (and synced) before its
// CreateTaskResult is, and a process started later answers tasks/get for
// it and finishes the work of tasks left working.
//
// State directory files: pid; effects (one line per effect: "task_id
// execution_id text"); tasks/<task_id>.json; hold (while present, task work
// waits, writing holding.<n> when it starts waiting); cut (if present when
// a task is created, it is removed and the process exits right after writing
// the CreateTaskResult, before doing the work); url (with --http).
//
// With --http ADDR it serves Streamable HTTP at /mcp instead: 2025-11-25
// with sessions (Mcp-Session-Id from initialize; 404 for a session it does
// not know, as after a restart), or with --modern sessionless 2026-07-28
// requiring the Mcp-Method (and, for tools/call, Mcp-Name and charge's
// Mcp-Param-Charge-Text) headers to match
// the body. tools/call answers in an event stream; tasks/result sends a
// priming event with an ID and closes its stream, answering on the GET that
// resumes it with Last-Event-ID (SEP-1699 polling); the other methods
// answer in a JSON body. With TASKUP_TOKEN set, every HTTP request must
// carry it as a bearer token (401 otherwise).
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchhq/latch/internal/atomicfile"
)

const extensionTasks = "io.modelcontextprotocol/tasks"

type server struct {
	dir    string
	modern bool

	outMu sync.Mutex
	out   *bufio.Writer

	work  sync.WaitGroup
	holds atomic.Int64
	mu    sync.Mutex // the task files and effects
}

type task struct {
	TaskID      string          `json:"taskId"`
	Status      string          `json:"status"`
	Message     string          `json:"statusMessage,omitempty"`
	CreatedAt   string          `json:"createdAt"`
	UpdatedAt   string          `json:"lastUpdatedAt"`
	ExecutionID string          `json:"executionId"`
	Text        string          `json:"text"`
	Result      json.RawMessage `json:"result,omitempty"`
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func main() {
	dir := flag.String("state", "", "state directory (required)")
	modern := flag.Bool("modern", false, "speak 2026-07-28 (server/discover, the tasks extension)")
	httpAddr := flag.String("http", "", "serve Streamable HTTP on this address instead of stdio")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "taskup: --state is required")
		os.Exit(2)
	}
	s := &server{dir: *dir, modern: *modern, out: bufio.NewWriter(os.Stdout)}
	if err := os.MkdirAll(filepath.Join(s.dir, "tasks"), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "taskup:", err)
		os.Exit(1)
	}
	// Renamed into place: a test reading pid while a restarted process
	// writes it sees the old or the new PID, never an empty file.
	atomicfile.Write(filepath.Join(s.dir, "pid"), []byte(fmt.Sprint(os.Getpid())), 0o644, false)
	s.resume()
	if *httpAddr != "" {
		if err := s.serveHTTP(*httpAddr); err != nil {
			fmt.Fprintln(os.Stderr, "taskup:", err)
			os.Exit(1)
		}
		return
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "taskup: bad message:", err)
			continue
		}
		if len(req.ID) == 0 || req.Method == "" {
			continue // a notification or a response
		}
		go s.handle(req, func(result any, rerr *rpcError) { s.send(req.ID, result, rerr) })
	}
	// stdin closed (the client is gone): finish the work in hand, bounded.
	done := make(chan struct{})
	go func() { s.work.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
	}
}

func (s *server) send(id json.RawMessage, result any, rerr *rpcError) {
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if rerr != nil {
		msg["error"] = rerr
	} else {
		msg["result"] = result
	}
	b, _ := json.Marshal(msg)
	s.outMu.Lock()
	s.out.Write(append(b, '\n'))
	s.out.Flush()
	s.outMu.Unlock()
}

func (s *server) complete(m map[string]any) map[string]any {
	if s.modern {
		m["resultType"] = "complete"
	}
	return m
}

var tools = []map[string]any{
	{"name": "charge", "description": "charges once, as a task",
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string", "x-mcp-header": "Charge-Text"}}, "required": []string{"text"}},
		"execution":   map[string]any{"taskSupport": "required"}},
	{"name": "plain", "description": "answers at once; takes no task",
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}}},
}

func (s *server) handle(req request, reply func(result any, rerr *rpcError)) {
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
		Meta      map[string]any `json:"_meta"`
		Task      map[string]any `json:"task"`
		TaskID    string         `json:"taskId"`
	}
	json.Unmarshal(req.Params, &p)
	switch req.Method {
	case "initialize":
		if s.modern {
			reply(nil, &rpcError{-32601, "use server/discover"})
			return
		}
		reply(map[string]any{
			"protocolVersion": "2025-11-25",
			"capabilities":    map[string]any{"tools": map[string]any{}, "tasks": map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}},
			"serverInfo":      map[string]any{"name": "taskup", "version": "1"},
		}, nil)
	case "server/discover":
		if !s.modern {
			reply(nil, &rpcError{-32601, "method not found: server/discover"})
			return
		}
		reply(s.complete(map[string]any{
			"supportedVersions": []string{"2026-07-28"},
			"capabilities":      map[string]any{"tools": map[string]any{}, "extensions": map[string]any{extensionTasks: map[string]any{}}},
			"_meta":             map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "taskup", "version": "1"}},
		}), nil)
	case "ping":
		reply(s.complete(map[string]any{}), nil)
	case "tools/list":
		list := tools
		if s.modern {
			list = nil
			for _, t := range tools {
				c := map[string]any{}
				for k, v := range t {
					if k != "execution" {
						c[k] = v
					}
				}
				list = append(list, c)
			}
		}
		reply(s.complete(map[string]any{"tools": list}), nil)
	case "tools/call":
		s.call(reply, p.Name, p.Arguments, p.Meta, p.Task != nil)
	case "tasks/get":
		t, ok := s.load(p.TaskID)
		if !ok {
			reply(nil, &rpcError{-32602, "Failed to retrieve task: Task not found"})
			return
		}
		reply(s.wire(t, true), nil)
	case "tasks/result":
		if s.modern {
			reply(nil, &rpcError{-32601, "method not found: tasks/result"})
			return
		}
		for {
			t, ok := s.load(p.TaskID)
			if !ok {
				reply(nil, &rpcError{-32602, "Failed to retrieve task: Task not found"})
				return
			}
			if t.Status == "completed" {
				var res map[string]any
				json.Unmarshal(t.Result, &res)
				res["_meta"] = map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": t.TaskID}}
				reply(res, nil)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	default:
		reply(nil, &rpcError{-32601, "method not found: " + req.Method})
	}
}

func declaresTasks(meta map[string]any) bool {
	caps, _ := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[extensionTasks]
	return ok
}

func (s *server) call(reply func(any, *rpcError), name string, args, meta map[string]any, asksTask bool) {
	execID, _ := meta["io.latch/execution_id"].(string)
	switch name {
	case "plain":
		reply(s.complete(map[string]any{"content": []any{map[string]any{"type": "text", "text": "plain"}}}), nil)
		return
	case "charge":
	default:
		reply(nil, &rpcError{-32602, "unknown tool " + name})
		return
	}
	if s.modern {
		asksTask = declaresTasks(meta)
	}
	if !asksTask {
		reply(nil, &rpcError{-32601, "tool charge must be called as a task"})
		return
	}
	text, _ := args["text"].(string)
	b := make([]byte, 8)
	rand.Read(b)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	t := &task{TaskID: "task-" + hex.EncodeToString(b), Status: "working", Message: "charging", CreatedAt: now, UpdatedAt: now, ExecutionID: execID, Text: text}
	if err := s.store(t); err != nil {
		reply(nil, &rpcError{-32603, err.Error()})
		return
	}
	cut := false
	if err := os.Remove(filepath.Join(s.dir, "cut")); err == nil {
		cut = true
	}
	w := s.wire(t, false)
	if s.modern {
		w["resultType"] = "task"
		reply(w, nil)
	} else {
		reply(map[string]any{"task": w}, nil)
	}
	if cut {
		os.Exit(3) // the stream ends after the CreateTaskResult; the work is left to the next process
	}
	s.work.Add(1)
	go func() { defer s.work.Done(); s.finish(t) }()
}

// wire is the task on the wire; full adds the inlined result (2026-07-28
// tasks/get).
func (s *server) wire(t *task, full bool) map[string]any {
	ttl, poll := "ttl", "pollInterval"
	if s.modern {
		ttl, poll = "ttlMs", "pollIntervalMs"
	}
	m := map[string]any{"taskId": t.TaskID, "status": t.Status, "statusMessage": t.Message, "createdAt": t.CreatedAt, "lastUpdatedAt": t.UpdatedAt, ttl: 3600000, poll: 50}
	if full && s.modern {
		m["resultType"] = "complete"
		if t.Status == "completed" {
			m["result"] = t.Result
		}
	}
	return m
}

func (s *server) path(id string) string {
	return filepath.Join(s.dir, "tasks", filepath.Base(id)+".json")
}

func (s *server) store(t *task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(t)
	return atomicfile.Write(s.path(t.TaskID), b, 0o644, true)
}

func (s *server) load(id string) (*task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := os.ReadFile(s.path(id))
	if err != nil {
		return nil, false
	}
	var t task
	if json.Unmarshal(b, &t) != nil {
		return nil, false
	}
	return &t, true
}

// resume finishes the work of tasks a previous process left working.
func (s *server) resume() {
	entries, _ := os.ReadDir(filepath.Join(s.dir, "tasks"))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if t, ok := s.load(strings.TrimSuffix(e.Name(), ".json")); ok && t.Status == "working" {
			s.work.Add(1)
			go func() { defer s.work.Done(); s.finish(t) }()
		}
	}
}

func (s *server) finish(t *task) {
	hold := filepath.Join(s.dir, "hold")
	if _, err := os.Stat(hold); err == nil {
		n := s.holds.Add(1)
		os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("holding.%d", n)), nil, 0o644)
		for {
			if _, err := os.Stat(hold); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	s.mu.Lock()
	effects, _ := os.ReadFile(filepath.Join(s.dir, "effects"))
	if !strings.Contains(string(effects), t.TaskID+" ") {
		f, err := os.OpenFile(filepath.Join(s.dir, "effects"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %s %s\n", t.TaskID, t.ExecutionID, t.Text)
			f.Sync()
			f.Close()
		}
	}
	s.mu.Unlock()
	res, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": "charged: " + t.Text}},
		"structuredContent": map[string]any{"charged": t.Text, "task": t.TaskID},
	})
	t.Status, t.Message, t.Result = "completed", "charged", res
	t.UpdatedAt = time.Now().UTC().Format(time.RFC3339Nano)
	if err := s.store(t); err != nil {
		fmt.Fprintln(os.Stderr, "taskup: storing task:", err)
	}
}
