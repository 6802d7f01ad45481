package openapi_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/tools"
	"github.com/latchhq/latch/tools/openapi"
)

func importFile(t *testing.T, file string, o openapi.Options) *openapi.Result {
	t.Helper()
	spec, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if o.Target == "" {
		o.Target = "api"
	}
	o.Source = file
	r, err := openapi.Import(t.Context(), spec, o)
	if err != nil {
		t.Fatalf("Import(%s) = %v", file, err)
	}
	// The result loads with the catalog loader (the validator of
	// `latch catalog validate`), read back from the bytes Import returned.
	if _, err := tools.Parse(file, r.YAML); err != nil {
		t.Fatalf("tools.Parse(Import(%s)) = %v\n%s", file, err, r.YAML)
	}
	return r
}

type classified struct {
	Tool  string
	Class openapi.Class
}

func classOf(t *testing.T, r *openapi.Result, method, path string) classified {
	t.Helper()
	o, ok := r.Operation(method, path)
	if !ok {
		t.Fatalf("no operation %s %s in the import", method, path)
	}
	return classified{o.Tool, o.Class}
}

// TestImportPayments imports a hand-written 3.1 description with every
// class: the replay classes, the reasons, the names and the target follow
// what the description documents.
func TestImportPayments(t *testing.T) {
	r := importFile(t, "testdata/payments.yaml", openapi.Options{})
	cases := []struct {
		method, path string
		want         classified
	}{
		{"POST", "/orders", classified{"create_order_2", openapi.StatusQuery}},
		{"GET", "/orders", classified{"list_orders", openapi.ReadOnly}},
		{"GET", "/orders/by-key/{key}", classified{"get_order_by_key", openapi.ReadOnly}},
		{"GET", "/orders/{order_id}", classified{"get_order", openapi.ReadOnly}},
		{"HEAD", "/orders/{order_id}", classified{"head_orders_order_id", openapi.ReadOnly}},
		{"DELETE", "/orders/{order_id}", classified{"cancel_order", openapi.Review}},
		{"POST", "/refunds", classified{"create_refund", openapi.IdempotencyKey}},
		{"POST", "/payouts", classified{"post_payouts", openapi.Review}},
		{"PUT", "/payouts/{payout_id}", classified{"put_payouts_payout_id", openapi.Review}},
		{"POST", "/disputes", classified{"create_order", openapi.Review}}, // paths in order: the first keeps the name,
		{"POST", "/uploads", classified{"", openapi.Skipped}},
		{"DELETE", "/sessions", classified{"", openapi.Skipped}},
	}
	for _, c := range cases {
		if got := classOf(t, r, c.method, c.path); got != c.want {
			t.Errorf("Import: %s %s = %+v, want %+v", c.method, c.path, got, c.want)
		}
	}
	want := map[openapi.Class]int{openapi.ReadOnly: 4, openapi.IdempotencyKey: 1, openapi.StatusQuery: 1, openapi.Review: 4, openapi.Skipped: 2}
	for c, n := range want {
		if got := r.Count(c); got != n {
			t.Errorf("Count(%s) = %d, want %d (%s)", c, got, n, r.Counts())
		}
	}
	if r.StatusPath != "/orders/by-key/{execution_id}" || r.IdempotencyHeader != "Idempotency-Key" {
		t.Errorf("target status %q, idempotency_header %q; want the linked lookup and Idempotency-Key", r.StatusPath, r.IdempotencyHeader)
	}
	tg := r.Catalog.Targets["api"]
	if tg == nil || tg.BaseURL != "https://eu.payments.example/v2" || tg.Status == nil || tg.Status.Path != r.StatusPath {
		t.Errorf("target = %+v, want base_url from the server variables and the proposed status", tg)
	}
	// Parameters become arguments; the body is one argument.
	co := r.Catalog.Tools["create_order_2"]
	if co.Request.Path != "/orders" || co.Request.Body != "{{body}}" || len(co.Request.Headers) != 0 {
		t.Errorf("create_order request = %+v, want the body argument and no header (Latch sends Idempotency-Key)", co.Request)
	}
	lo := r.Catalog.Tools["list_orders"]
	if diff := cmp.Diff(map[string]string{"limit": "{{limit}}", "page[after]": "{{page_after}}"}, lo.Request.Query); diff != "" {
		t.Errorf("list_orders query (-want +got):\n%s", diff)
	}
	rf := r.Catalog.Tools["create_refund"]
	if diff := cmp.Diff(map[string]string{"X-Request-Source": "{{X_Request_Source}}"}, rf.Request.Headers); diff != "" {
		t.Errorf("create-refund headers (-want +got):\n%s", diff)
	}
	po := r.Catalog.Tools["post_payouts"]
	if po.Request.Headers["Content-Type"] != "application/vnd.payments+json" {
		t.Errorf("post_payouts headers = %v, want the +json media type as Content-Type", po.Request.Headers)
	}
	pu := r.Catalog.Tools["put_payouts_payout_id"]
	if pu.Request.Query["execution_id"] != "{{execution_id_param}}" {
		t.Errorf("put_payouts_payout_id query = %v: a parameter called execution_id must get another argument name", pu.Request.Query)
	}
	// The generated requests render as the API expects.
	m, p, q, _, body, err := co.RenderRequest(map[string]any{"body": map[string]any{"amount": 5, "currency": "EUR"}})
	if err != nil || m != "POST" || p != "/orders" || len(q) != 0 || string(body) != `{"amount":5,"currency":"EUR"}` {
		t.Errorf("create_order_2.RenderRequest = %s %s %v %s, %v", m, p, q, body, err)
	}
	_, p, q, _, _, err = r.Catalog.Tools["get_order"].RenderRequest(map[string]any{"order_id": "ord_1/.."})
	if err != nil || p != "/orders/ord_1%2F.." || len(q) != 0 {
		t.Errorf("get_order.RenderRequest = %s %v, %v; want the path value escaped", p, q, err)
	}
	_, _, q, _, _, err = lo.RenderRequest(map[string]any{"page_after": "c1"})
	if err != nil || !cmp.Equal(q, map[string]string{"page[after]": "c1"}) {
		t.Errorf("list_orders.RenderRequest query = %v, %v; want page[after] only (limit absent)", q, err)
	}
	y := string(r.YAML)
	for _, s := range []string{
		"# REVIEW: generated from POST /payouts (operationId none",
		"# replay review: it documents no Idempotency-Key header",
		"(PUT is idempotent by HTTP's rules",
		"POST /uploads: its request body is multipart/form-data only, and Latch sends JSON bodies",
		"DELETE /sessions: it needs cookie \"sid\"",
		"add credential: REF",
		"# proposed from link \"lookup\" of POST /orders",
		"cut: cyclic $ref #/components/schemas/Customer",
	} {
		if !strings.Contains(y, s) {
			t.Errorf("catalog lacks %q:\n%s", s, y)
		}
	}
	// Every tool is marked for review.
	if n, m := strings.Count(y, "# REVIEW: generated from"), len(r.Catalog.Tools); n != m {
		t.Errorf("%d REVIEW comments for %d tools", n, m)
	}
	for name := range r.Catalog.Tools {
		if strings.HasPrefix(name, "latch_") || len(name) > 64 {
			t.Errorf("tool name %q breaks the naming rules", name)
		}
	}
	// A readOnly property is the server's: not an input.
	if strings.Contains(string(rf.InputSchema), "readOnly") {
		t.Errorf("create-refund input_schema keeps a readOnly property: %v", rf.InputSchema)
	}
}

// TestImportStatusPathFlag: a lookup the user names makes every operation
// taking the key status_query, whatever the links say.
func TestImportStatusPathFlag(t *testing.T) {
	r := importFile(t, "testdata/payments.yaml", openapi.Options{StatusPath: "/lookups/{execution_id}", BaseURL: "http://127.0.0.1:9/v2"})
	if got := classOf(t, r, "POST", "/refunds"); got.Class != openapi.StatusQuery {
		t.Errorf("POST /refunds = %+v, want status_query with --status-path", got)
	}
	tg := r.Catalog.Targets["api"]
	if tg.Status == nil || tg.Status.Path != "/lookups/{execution_id}" || !tg.AllowPrivate || tg.BaseURL != "http://127.0.0.1:9/v2" {
		t.Errorf("target = %+v, want the named status path, the base URL and allow_private for a loopback base", tg)
	}
}

// TestImportIdempotencyHeaderFlag: a configured header replaces
// Idempotency-Key; an operation taking only the default one is review.
func TestImportIdempotencyHeaderFlag(t *testing.T) {
	r := importFile(t, "testdata/payments.yaml", openapi.Options{IdempotencyHeader: "X-Request-Source"})
	if got := classOf(t, r, "POST", "/refunds"); got.Class != openapi.IdempotencyKey {
		t.Errorf("POST /refunds = %+v, want idempotency_key for its X-Request-Source header", got)
	}
	if got := classOf(t, r, "POST", "/orders"); got.Class != openapi.Review {
		t.Errorf("POST /orders = %+v, want review: it does not take X-Request-Source", got)
	}
	if tg := r.Catalog.Targets["api"]; tg.IdempotencyHeader != "X-Request-Source" {
		t.Errorf("idempotency_header = %q, want X-Request-Source", tg.IdempotencyHeader)
	}
}

// TestImportCycles: recursive and mutually recursive $refs (3.0, JSON) are
// cut where they recur, with a comment; the import ends and loads.
func TestImportCycles(t *testing.T) {
	r := importFile(t, "testdata/cyclic.json", openapi.Options{})
	if r.Cuts == 0 {
		t.Fatalf("Cuts = 0 for a cyclic schema:\n%s", r.YAML)
	}
	y := string(r.YAML)
	for _, s := range []string{"# cut: cyclic $ref #/components/schemas/Tree", "# cut: cyclic $ref #/components/schemas/Node", "# cut: cyclic $ref #/components/schemas/Leaf", "allow_private: true"} {
		if !strings.Contains(y, s) {
			t.Errorf("catalog lacks %q:\n%s", s, y)
		}
	}
	// 3.0's nullable and boolean exclusiveMinimum become 2020-12's forms.
	for _, s := range []string{`type: [string, "null"]`, "exclusiveMinimum: 0"} {
		if !strings.Contains(y, s) {
			t.Errorf("catalog lacks %q:\n%s", s, y)
		}
	}
}

// hugeSpec is a description with one schema nested depth levels deep and
// one object with width properties, each a chain of $refs.
func hugeSpec(depth, width int) []byte {
	var b strings.Builder
	b.WriteString(`{"openapi":"3.1.0","info":{"title":"huge","version":"1"},"servers":[{"url":"https://huge.example"}],"paths":{"/deep":{"post":{"operationId":"deep","requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/D0"}}}},"responses":{"200":{"description":"ok"}}}},"/wide":{"post":{"operationId":"wide","requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/W"}}}},"responses":{"200":{"description":"ok"}}}}},"components":{"schemas":{`)
	for i := range depth {
		fmt.Fprintf(&b, `"D%d":{"type":"object","properties":{"next":{"$ref":"#/components/schemas/D%d"}}},`, i, i+1)
	}
	fmt.Fprintf(&b, `"D%d":{"type":"string"},"W":{"type":"object","properties":{`, depth)
	for i := range width {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"object","properties":{"a":{"$ref":"#/components/schemas/D0"}}}`, i)
	}
	b.WriteString(`}}}}}`)
	return []byte(b.String())
}

// TestImportHugeSchema: a schema 400 levels deep and one with 3,000
// properties are cut at the depth and node bounds instead of exploding.
func TestImportHugeSchema(t *testing.T) {
	r, err := openapi.Import(t.Context(), hugeSpec(400, 3000), openapi.Options{Target: "huge"})
	if err != nil {
		t.Fatalf("Import(huge) = %v", err)
	}
	y := string(r.YAML)
	for _, s := range []string{"# cut: nested deeper than 8 levels", "# cut: the tool's schemas are larger than 300 nodes"} {
		if !strings.Contains(y, s) {
			t.Errorf("catalog lacks %q", s)
		}
	}
	if len(r.YAML) > 1<<20 {
		t.Errorf("catalog is %d bytes for two tools: the bounds did not hold", len(r.YAML))
	}
}

// TestImportMinimal: the smallest description (no components, no info
// beyond the required, a path item holding only parameters) imports.
func TestImportMinimal(t *testing.T) {
	spec := "openapi: 3.0.0\ninfo: {title: m, version: \"1\"}\nservers: [{url: https://m.example/}]\npaths:\n  /ping: {get: {responses: {\"200\": {description: ok}}}}\n  /empty: {parameters: []}\n"
	r, err := openapi.Import(t.Context(), []byte(spec), openapi.Options{Target: "m"})
	if err != nil {
		t.Fatalf("Import(minimal) = %v", err)
	}
	if got := r.Counts(); got != "read_only 1, idempotency_key 0, status_query (proposed) 0, review 0, skipped 0" {
		t.Errorf("Counts() = %q", got)
	}
	if tg := r.Catalog.Targets["m"]; tg.BaseURL != "https://m.example" {
		t.Errorf("base_url = %q, want the server without its trailing /", tg.BaseURL)
	}
}

// TestImportRefused: what cannot be imported is refused with an error
// saying what is wrong.
func TestImportRefused(t *testing.T) {
	const paths = `paths: {/a: {get: {responses: {"200": {description: ok}}}}}`
	cases := []struct {
		name, spec string
		o          openapi.Options
		want       error
		says       string
	}{
		{"not yaml", "openapi: [3.1.0\n", openapi.Options{}, openapi.ErrInvalidSpec, "not JSON or YAML"},
		{"no version", "info: {title: x}\n" + paths, openapi.Options{}, openapi.ErrInvalidSpec, `no "openapi" version field`},
		{"swagger 2", "swagger: \"2.0\"\ninfo: {title: x, version: \"1\"}\npaths: {}\n", openapi.Options{}, openapi.ErrUnsupportedVersion, "convert it to OpenAPI 3"},
		{"openapi 4", "openapi: 4.0.0\n", openapi.Options{}, openapi.ErrUnsupportedVersion, "reads 3.0.x and 3.1.x"},
		{"dangling ref", "openapi: 3.0.3\ninfo: {title: x, version: \"1\"}\nservers: [{url: https://x.example}]\npaths: {/a: {post: {requestBody: {content: {application/json: {schema: {$ref: '#/components/schemas/Nope'}}}}, responses: {\"200\": {description: ok}}}}}\n", openapi.Options{}, openapi.ErrInvalidSpec, "Nope"},
		{"external ref", "openapi: 3.0.3\ninfo: {title: x, version: \"1\"}\nservers: [{url: https://x.example}]\npaths: {/a: {post: {requestBody: {content: {application/json: {schema: {$ref: '/etc/passwd#/x'}}}}, responses: {\"200\": {description: ok}}}}}\n", openapi.Options{}, openapi.ErrInvalidSpec, "external"},
		{"no paths", "openapi: 3.1.0\ninfo: {title: x, version: \"1\"}\nservers: [{url: https://x.example}]\npaths: {}\n", openapi.Options{}, openapi.ErrNoOperations, "no paths"},
		{"no server", "openapi: 3.1.0\ninfo: {title: x, version: \"1\"}\n" + paths, openapi.Options{}, openapi.ErrBadOptions, "pass --base-url"},
		{"relative server", "openapi: 3.1.0\ninfo: {title: x, version: \"1\"}\nservers: [{url: /api}]\n" + paths, openapi.Options{}, openapi.ErrBadOptions, "not an absolute http(s) URL"},
		{"bad target", "openapi: 3.1.0\n", openapi.Options{Target: "Bad Name"}, openapi.ErrBadOptions, "target name"},
		{"bad status path", "openapi: 3.1.0\n", openapi.Options{StatusPath: "/orders/{id}"}, openapi.ErrBadOptions, "{execution_id}"},
		{"all skipped", "openapi: 3.1.0\ninfo: {title: x, version: \"1\"}\nservers: [{url: https://x.example}]\npaths: {/a: {post: {requestBody: {required: true, content: {text/plain: {schema: {type: string}}}}, responses: {\"200\": {description: ok}}}}}\n", openapi.Options{}, openapi.ErrNoOperations, "text/plain only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.o.Target == "" {
				c.o.Target = "api"
			}
			_, err := openapi.Import(t.Context(), []byte(c.spec), c.o)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Import(%s) = %v, want %v saying %q", c.name, err, c.want, c.says)
			}
		})
	}
}
