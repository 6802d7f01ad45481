//go:build !latch_testhooks

package shim

import "github.com/hashicorp/go-hclog"

// testPause does nothing: the pause hook exists only in test builds
// (testhook_on.go, -tags latch_testhooks).
func testPause(hclog.Logger) {}
