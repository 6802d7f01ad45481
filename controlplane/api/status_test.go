package api

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// TestToStatusReplicaCannotWrite: a replica that lost its lease (fenced
// commit) or must restart (commit outcome unknown) answers Unavailable, so
// a front moves to the active replica and sends a Submit again there,
// instead of showing the agent an internal error.
func TestToStatusReplicaCannotWrite(t *testing.T) {
	s := &Service{log: hclog.NewNullLogger()}
	tests := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"fenced commit", fmt.Errorf("store: commit: %w: latch: fenced: epoch 1 no longer holds the lease", backend.ErrFenced), codes.Unavailable},
		{"commit outcome unknown", fmt.Errorf("%w: restart latch serve", backend.ErrCommitUnknown), codes.Unavailable},
		{"database unreachable, nothing committed", fmt.Errorf("%w: PostgreSQL commit (nothing was sent): dial tcp: connection refused", backend.ErrNotCommitted), codes.Unavailable},
		{"anything else", errors.New("boom"), codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(s.toStatus(tt.err)); got != tt.want {
				t.Errorf("toStatus(%q) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
