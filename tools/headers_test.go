package tools

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestReservedHeadersRefusedAtLoad: a catalog that sets a reserved header,
// in a request template or as a target's idempotency header, is refused at
// load, so no such catalog reaches a dispatcher that would refuse every call.
func TestReservedHeadersRefusedAtLoad(t *testing.T) {
	const catalog = `targets:
  api:
    channel: http
    base_url: http://api.internal.test:7412
    idempotency_header: %s
tools:
  a:
    input_schema: {type: object}
    target: api
    replay: idempotency_key
    request:
      method: POST
      path: /v1/a
      headers: {%q: "x"}
`
	if _, err := Parse("ok.yaml", fmt.Appendf(nil, catalog, "Idempotency-Key", "X-Trace")); err != nil {
		t.Fatalf("Parse(the catalog with ordinary headers) = %v, want it loaded", err)
	}
	if len(ReservedHeaders()) != 11 {
		t.Errorf("ReservedHeaders() = %v, want the 11 the dispatcher refused before the lists were joined", ReservedHeaders())
	}
	for _, h := range ReservedHeaders() {
		for _, name := range []string{h, strings.ToLower(h)} {
			tests := []struct {
				where string
				data  []byte
				want  string
			}{
				{"template header", fmt.Appendf(nil, catalog, "Idempotency-Key", name), "is set by the HTTP client, not the catalog"},
				{"idempotency_header", fmt.Appendf(nil, catalog, name, "X-Trace"), "is a reserved header"},
			}
			for _, tt := range tests {
				_, err := Parse("c.yaml", tt.data)
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Parse(%s %s) = %v, want ErrInvalid saying %q", tt.where, name, err, tt.want)
				}
			}
		}
	}
	if !ReservedHeader("expect") || ReservedHeader("X-Expect") {
		t.Error("ReservedHeader matches names, case-insensitively, and nothing else")
	}
}
