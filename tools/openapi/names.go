package openapi

import (
	"fmt"
	"hash/fnv"
	"strings"
	"unicode"
)

// maxName is the catalog's tool-name bound (^[a-z][a-z0-9_-]{0,63}$, inside
// MCP's 1–128 characters of [A-Za-z0-9_.-]).
const maxName = 64

// toolName derives a snake_case catalog tool name from an operationId
// ("repos/get" → "repos_get", "issues/list-for-repo" →
// "issues_list_for_repo", "PostCustomers" → "post_customers"), or from the method and
// path when there is none ("POST /v1/orders/{id}" → "post_v1_orders_id").
func toolName(opID, method, path string) string {
	src := opID
	if strings.TrimSpace(src) == "" {
		src = method + "_" + path
	}
	var b strings.Builder
	rs := []rune(src)
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		r = unicode.ToLower(r)
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	n := squeeze(b.String())
	if n == "" {
		n = "op"
	}
	if n[0] < 'a' || n[0] > 'z' {
		n = "op_" + n
	}
	if strings.HasPrefix(n, "latch_") {
		n = "api_" + n // latch_ is reserved for built-in tools
	}
	if len(n) > maxName {
		h := fnv.New32a()
		h.Write([]byte(src))
		n = strings.TrimRight(n[:maxName-9], "_") + fmt.Sprintf("_%08x", h.Sum32())
	}
	return n
}

// squeeze collapses runs of '_' and trims them from both ends.
func squeeze(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && b.Len() > 0 && strings.HasSuffix(b.String(), "_") {
			continue
		}
		b.WriteByte(s[i])
	}
	return strings.Trim(b.String(), "_")
}

// uniqueName returns n, or n with a numeric suffix when an earlier tool has it.
func (im *importer) uniqueName(n string) string {
	out := n
	for i := 2; im.names[out]; i++ {
		suf := fmt.Sprintf("_%d", i)
		base := n
		if len(base)+len(suf) > maxName {
			base = strings.TrimRight(base[:maxName-len(suf)], "_")
		}
		out = base + suf
	}
	im.names[out] = true
	return out
}
