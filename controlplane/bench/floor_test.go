package bench

import (
	"context"
	"errors"
	"os"
	"testing"
)

// TestMeasureFloorCleansUp: the durability floor is measured in a
// temporary directory of the data dir that is gone afterwards, also when
// it is cut short.
func TestMeasureFloorCleansUp(t *testing.T) {
	dir := t.TempDir()
	f, err := measureFloor(t.Context(), dir)
	if err != nil || f.commit <= 0 || f.fsync <= 0 {
		t.Fatalf("measureFloor = %+v, %v; want both p50s measured", f, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := measureFloor(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("measureFloor with a cancelled context = %v, want context.Canceled", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("measureFloor left %d entries in the data dir: %v", len(left), left)
	}
}
