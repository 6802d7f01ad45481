package store

import "github.com/latchhq/latch/controlplane/store/backend"

// The backend contract is package backend's; the execution store and its
// callers name it here. The backends are packages memkv, badgerkv and
// pgkv, opened by name through package backends.
type (
	// KV is backend.KV: the ordered key space the store runs on.
	KV = backend.KV
	// Write is backend.Write: one key set or deletion in a batch.
	Write = backend.Write
)

// Sentinel errors (the backend's: errors.Is matches either name).
var (
	ErrNotFound = backend.ErrNotFound
	ErrClosed   = backend.ErrClosed
)
