package console

import (
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkPages measures the list page over 1,000 executions and one
// execution's page (its proofs checked on the server) on a real store:
//
//	go test -run '^$' -bench Pages ./controlplane/console/
func BenchmarkPages(b *testing.B) {
	st := newStack(b, false)
	c := browserless(b)
	st.signIn(b, c, "ops-bench")
	var last string
	for i := range 1000 {
		last = st.submit(b, "note", fmt.Sprintf(`{"text":"n%d"}`, i)).GetId()
	}
	for _, p := range []struct{ name, path string }{
		{"list", "/ui/"},
		{"list_filtered", "/ui/?tool=note&q=zz"},
		{"detail", "/ui/executions/" + last},
		{"proof", "/ui/executions/" + last + "/proof"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := c.Get(st.web.URL + p.path)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: %v %v", p.path, resp.StatusCode, err)
				}
				resp.Body.Close()
			}
		})
	}
}
