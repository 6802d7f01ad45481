package openapi_test

import (
	"os"
	"testing"

	"github.com/latchhq/latch/tools"
	"github.com/latchhq/latch/tools/openapi"
)

// FuzzImport: no description makes Import panic, loop or return a catalog
// the loader refuses.
func FuzzImport(f *testing.F) {
	for _, file := range []string{"testdata/payments.yaml", "testdata/cyclic.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(hugeSpec(12, 5))
	f.Add([]byte("openapi: 3.1.0\ninfo: {title: x, version: \"1\"}\nservers: [{url: https://x.example}]\npaths: {/a/{b}: {post: {responses: {\"200\": {description: ok}}}}}\n"))
	f.Add([]byte("openapi: 3.0.0\ninfo: {title: m, version: \"1\"}\nservers: [{url: https://m.example/}]\npaths: {/p/{q}: {parameters: [{name: q, in: path, required: true}], put: {parameters: [{name: Idempotency-Key, in: header}], responses: {\"200\": {description: ok, links: {l: {operationRef: '#/paths/~1p~1{q}/get', parameters: {q: $request.header.Idempotency-Key}}}}}}, get: {responses: {\"200\": {description: ok}}}}}\n"))
	f.Fuzz(func(t *testing.T, spec []byte) {
		r, err := openapi.Import(t.Context(), spec, openapi.Options{Target: "api", MaxSchemaNodes: 50})
		if err != nil {
			return
		}
		if _, err := tools.Parse("fuzz", r.YAML); err != nil {
			t.Fatalf("Import returned a catalog the loader refuses: %v\n%s", err, r.YAML)
		}
	})
}
