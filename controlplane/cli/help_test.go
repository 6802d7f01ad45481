package cli

import (
	"slices"
	"strings"
	"testing"
)

func TestLeadingConnectionFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		lead      []string
		rest      []string
		wantError string
	}{
		{name: "none", args: []string{"list", "--json"}, rest: []string{"list", "--json"}},
		{name: "data before", args: []string{"--data", "/d", "list", "--json"}, lead: []string{"--data", "/d"}, rest: []string{"list", "--json"}},
		{name: "value named like a subcommand", args: []string{"--data", "list", "show", "X"}, lead: []string{"--data", "list"}, rest: []string{"show", "X"}},
		{name: "several", args: []string{"--addr=tcp://h:1", "--tls-ca", "ca.pem", "list"}, lead: []string{"--addr=tcp://h:1", "--tls-ca", "ca.pem"}, rest: []string{"list"}},
		{name: "terminator", args: []string{"--data", "/d", "--", "list"}, lead: []string{"--data", "/d"}, rest: []string{"list"}},
		{name: "subcommand flag before", args: []string{"--json", "list"}, wantError: "only the connection flags"},
		{name: "help before", args: []string{"--data", "/d", "-h"}, wantError: "-h goes after the subcommand"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lead, rest, err := leadingConnectionFlags(&Env{Getenv: func(string) string { return "" }}, "exec", tt.args)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("leadingConnectionFlags(%q) error = %v, want one containing %q", tt.args, err, tt.wantError)
				}
				return
			}
			if err != nil || !slices.Equal(lead, tt.lead) || !slices.Equal(rest, tt.rest) {
				t.Errorf("leadingConnectionFlags(%q) = %q, %q, %v; want %q, %q", tt.args, lead, rest, err, tt.lead, tt.rest)
			}
		})
	}
}
