package mcpwire

import "testing"

func TestModern(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"", false},
		{"2024-11-05", false},
		{Era20251125, false},
		{Era20260728, true},
		{"2027-01-01", true},
	}
	for _, tt := range tests {
		if got := Modern(tt.v); got != tt.want {
			t.Errorf("Modern(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
