package openapi

import (
	"strings"
	"testing"
)

func TestToolName(t *testing.T) {
	long := strings.Repeat("Segment", 12)
	cases := []struct {
		name, opID, method, path, want string
	}{
		{"slash", "repos/get", "GET", "/repos/{owner}/{repo}", "repos_get"},
		{"hyphens", "issues/list-for-repo", "GET", "/x", "issues_list_for_repo"},
		{"camel", "PostCustomers", "POST", "/v1/customers", "post_customers"},
		{"acronym", "getHTTPStatus2xx", "GET", "/x", "get_http_status2xx"},
		{"no operationId", "", "DELETE", "/v1/orders/{order_id}", "delete_v1_orders_order_id"},
		{"blank operationId", "  ", "GET", "/", "get"},
		{"leading digit", "2fa/enable", "POST", "/x", "op_2fa_enable"},
		{"reserved prefix", "latch_status", "GET", "/x", "api_latch_status"},
		{"unicode", "créer-commande", "POST", "/x", "cr_er_commande"},
		{"only symbols", "//--", "POST", "/x", "op"},
		{"long", long, "GET", "/x", "segment_segment_segment_segment_segment_segment_segment_s_6a5d2a1e"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := toolName(c.opID, c.method, c.path)
			if c.name == "long" {
				if len(got) != maxName || !strings.HasPrefix(got, "segment_segment") {
					t.Errorf("toolName(%q) = %q (%d), want %d characters", c.opID, got, len(got), maxName)
				}
				return
			}
			if got != c.want {
				t.Errorf("toolName(%q, %q, %q) = %q, want %q", c.opID, c.method, c.path, got, c.want)
			}
		})
	}
}

func TestUniqueName(t *testing.T) {
	im := &importer{names: map[string]bool{}}
	long := strings.Repeat("a", maxName)
	for _, c := range []struct{ in, want string }{
		{"x", "x"}, {"x", "x_2"}, {"x", "x_3"}, {long, long}, {long, strings.Repeat("a", maxName-2) + "_2"},
	} {
		if got := im.uniqueName(c.in); got != c.want {
			t.Errorf("uniqueName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestArgName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"owner", "owner"}, {"page[after]", "page_after"}, {"X-GitHub-Api-Version", "X_GitHub_Api_Version"},
		{"execution_id", "execution_id_param"}, {"repeat_of", "repeat_of_param"}, {"1st", "p_1st"}, {"---", "arg"},
	} {
		if got := argName(c.in); got != c.want {
			t.Errorf("argName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
