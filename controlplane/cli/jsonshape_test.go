package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/datadir"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// cliJSONPath documents every --json shape.
var cliJSONPath = filepath.Join("..", "..", "docs", "reference", "cli-json.md")

// jsonShape is a command's --json type: new returns a pointer to decode
// into; lines says the output is one value per line.
type jsonShape struct {
	new   func() any
	lines bool
	// elsewhere names the test that decodes it, when it needs what this
	// one does not run (PostgreSQL).
	elsewhere string
}

// jsonShapes is every command that has --json, with its documented type.
var jsonShapes = map[string]jsonShape{
	"approvals list":         {new: func() any { return &approvalCardJSON{} }, lines: true},
	"approvals show":         {new: func() any { return &execShowJSON{} }},
	"catalog status":         {new: func() any { return &catalogStatusJSON{} }},
	"catalog upstream-tools": {new: func() any { return &upstreamToolsJSON{} }},
	"catalog validate":       {new: func() any { return &[]validateProblem{} }},
	"events list":            {new: func() any { return &eventsListJSON{} }},
	"exec explain":           {new: func() any { return &explainJSON{} }},
	"exec list":              {new: func() any { return &execLine{} }, lines: true},
	"exec show":              {new: func() any { return &execShowJSON{} }},
	"exec watch":             {new: func() any { return &execLine{} }, lines: true},
	"observe report":         {new: func() any { return &observeReportJSON{} }},
	"operator token list":    {new: func() any { return &tokenLine{} }, lines: true},
	"receipt verify":         {new: func() any { return &receiptVerifyJSON{} }},
	"session list":           {new: func() any { return &sessionLine{} }, lines: true},
	"store migrate":          {new: func() any { return &storePlanJSON{} }, elsewhere: "TestStoreMigrateDryRun"},
	"store status":           {new: func() any { return &storeStatusJSON{} }, elsewhere: "TestAuditOnPostgres"},
	"token list":             {new: func() any { return &tokenLine{} }, lines: true},
	"vault list":             {new: func() any { return &vaultListJSON{} }},
	"vault status":           {new: func() any { return &vaultStatusJSON{} }},
	"version":                {new: func() any { return &versionJSON{} }},
}

// decodeStrict decodes out, one JSON value, into v refusing unknown fields
// and anything after it.
func decodeStrict(out string, v any) error {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	tok, err := dec.Token()
	switch {
	case err == nil:
		return fmt.Errorf("more than one JSON value (next: %v)", tok)
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("after the JSON value: %w", err)
	}
	return nil
}

// commandsWithJSON walks every command's help, subcommands' too (three
// levels: operator token list), and returns those whose flags have -json.
func commandsWithJSON(t *testing.T) []string {
	t.Helper()
	help := func(path []string) string {
		var out bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
		Main(t.Context(), env, append(slices.Clone(path), "-h"))
		return out.String()
	}
	word := regexp.MustCompile(`^[a-z][a-z-]*$`)
	var found []string
	var walk func(path []string, depth int)
	walk = func(path []string, depth int) {
		out := help(path)
		if strings.Contains(out, "\n  -json\n") {
			found = append(found, strings.Join(path, " "))
		}
		if depth == 3 {
			return
		}
		var subs []string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if !strings.HasPrefix(line, "  latch ") || len(f) < len(path)+2 || !slices.Equal(f[1:1+len(path)], path) {
				continue
			}
			if s := f[1+len(path)]; word.MatchString(s) && !slices.Contains(subs, s) {
				subs = append(subs, s)
			}
		}
		for _, s := range subs {
			walk(append(slices.Clone(path), s), depth+1)
		}
	}
	for name := range commandTable() {
		walk([]string{name}, 1)
	}
	sort.Strings(found)
	return found
}

// documentedJSON returns the commands docs/reference/cli-json.md has a
// section for ("## `latch exec list`"), each with its example (the first
// json block of the section; "" when it has none).
func documentedJSON(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(cliJSONPath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	sections := regexp.MustCompile("(?m)^## `latch ([a-z -]+)`$").FindAllStringSubmatchIndex(string(b), -1)
	block := regexp.MustCompile("(?s)```json\n(.*?)\n```")
	for i, m := range sections {
		end := len(b)
		if i+1 < len(sections) {
			end = sections[i+1][0]
		}
		name := string(b[m[2]:m[3]])
		out[name] = ""
		if e := block.FindSubmatch(b[m[1]:end]); e != nil {
			out[name] = string(e[1])
		}
	}
	return out
}

// TestJSONShapes: every command with --json has one documented Go type and
// a section of docs/reference/cli-json.md, and its output decodes strictly
// (no field the type or the record's .proto lacks) into that type. A new
// --json command fails here until it is given both.
func TestJSONShapes(t *testing.T) {
	have := commandsWithJSON(t)
	var known []string
	for name := range jsonShapes {
		known = append(known, name)
	}
	sort.Strings(known)
	if !slices.Equal(have, known) {
		t.Errorf("commands with --json = %q\njsonShapes lists %q: give each command with --json its type here", have, known)
	}
	doc := documentedJSON(t)
	var documented []string
	for name := range doc {
		documented = append(documented, name)
	}
	sort.Strings(documented)
	if !slices.Equal(documented, known) {
		t.Errorf("%s documents %q, want every command with --json: %q", cliJSONPath, documented, known)
	}
	// Each example is the documented type too.
	for _, name := range documented {
		shape, ok := jsonShapes[name]
		if !ok {
			continue
		}
		values := []string{doc[name]}
		if shape.lines {
			values = strings.Split(doc[name], "\n")
		}
		for _, v := range values {
			if err := decodeStrict(v, shape.new()); strings.TrimSpace(v) == "" || err != nil {
				t.Errorf("%s: the example of latch %s does not decode strictly into its type: %v\n%s", cliJSONPath, name, err, v)
			}
		}
	}

	// A control plane with executions (one awaiting approval), a session,
	// tokens, an upstream offering one tool of two (the other held).
	_, url := newTarget(t)
	up := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "lookup", Description: "Look a note up."}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
	})
	upTS := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upTS.Close)
	catalog := writeCatalog(t, url)
	text := strings.Replace(mustRead(t, catalog), "\ntools:\n", fmt.Sprintf("\nupstreams:\n  notes: {transport: http, url: %q, allow_private: true}\ntools:\n", upTS.URL), 1) +
		"  notes.lookup: {upstream: notes, tool: lookup, replay: read_only}\n" +
		"  notes.missing: {upstream: notes, tool: missing, replay: review}\n" +
		"  approve_release:\n    target: releases\n    request: {method: POST, path: /v1/releases, body: {service: x}}\n    replay: idempotency_key\n    approval: every_call\n"
	if err := os.WriteFile(catalog, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	startServe(t, data, catalog)
	c := client(t, data)
	r, err := c.Submit(t.Context(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"1"}`),
		Evidence: &recordv1.Evidence{McpSessionId: "s-json", JsonrpcId: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetExecution().GetId()
	waitFor(t, c, id, recordv1.State_STATE_COMPLETED)
	ap, err := c.Submit(t.Context(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "approve_release", Arguments: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, ap.GetExecution().GetId(), recordv1.State_STATE_AWAITING_APPROVAL)
	for _, args := range [][]string{{"token", "create", "bob"}, {"operator", "token", "create", "carol"}} {
		if out, code := runCLI(t, append(args, "--data", data)...); code != ExitOK {
			t.Fatalf("latch %s = %d:\n%s", strings.Join(args, " "), code, out)
		}
	}
	run := map[string][]string{
		"approvals list":         {"approvals", "list"},
		"approvals show":         {"approvals", "show", ap.GetExecution().GetId()},
		"catalog status":         {"catalog", "status"},
		"catalog upstream-tools": {"catalog", "upstream-tools", "notes"},
		"events list":            {"events", "list"},
		"exec explain":           {"exec", "explain", id},
		"exec list":              {"exec", "list"},
		"exec show":              {"exec", "show", id},
		"exec watch":             {"exec", "watch", id},
		"observe report":         {"observe", "report"},
		"operator token list":    {"operator", "token", "list"},
		"session list":           {"session", "list"},
		"token list":             {"token", "list"},
		"vault list":             {"vault", "list"},
		"vault status":           {"vault", "status"},
	}
	example := filepath.Join("..", "..", "tools", "examples", "catalog.yaml")
	for _, name := range known {
		shape := jsonShapes[name]
		if shape.elsewhere != "" {
			continue
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			var args []string
			switch name {
			case "version":
				args = []string{"version", "--json"}
			case "catalog validate":
				args = []string{"catalog", "validate", "--json", example}
			case "receipt verify":
				out, code := runCLI(t, "exec", "receipt", id, "--data", data)
				if code != ExitOK {
					t.Fatalf("latch exec receipt = %d:\n%s", code, out)
				}
				file := filepath.Join(t.TempDir(), "receipt.json")
				if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
					t.Fatal(err)
				}
				args = []string{"receipt", "verify", file, "--key", datadir.Verifier(data), "--json"}
			default:
				args = append(append(run[name], "--json"), "--data", data)
			}
			bound := 30 * time.Second
			if name == "exec watch" {
				bound = 3 * time.Second // it follows the execution until delivered; its current state comes first
			}
			ctx, cancel := context.WithTimeout(t.Context(), bound)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := Main(ctx, &Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}, args)
			out := stdout.String()
			if code != ExitOK {
				t.Fatalf("latch %s = %d:\n%s%s", strings.Join(args, " "), code, out, stderr.String())
			}
			values := []string{out}
			if shape.lines {
				values = strings.Split(strings.TrimRight(out, "\n"), "\n")
			}
			if strings.TrimSpace(out) == "" {
				t.Fatalf("latch %s printed nothing; want at least one value to check", strings.Join(args, " "))
			}
			for i, v := range values {
				if err := decodeStrict(v, shape.new()); err != nil {
					t.Errorf("latch %s: value %d does not decode strictly into its documented type: %v\n%s", strings.Join(args, " "), i, err, v)
				}
			}
		})
	}
	// The strict record decoding refuses a field the .proto lacks.
	if err := decodeStrict(`{"id":"act_1","not_a_field":1}`, &execLine{}); err == nil || !strings.Contains(err.Error(), "not_a_field") {
		t.Errorf("decodeStrict(unknown record field) = %v, want it refused", err)
	}
	if err := decodeStrict(`{"execution":{"evidence":{"nope":true}},"journal":[]}`, &execShowJSON{}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("decodeStrict(unknown nested field) = %v, want it refused", err)
	}
}
