// Package backend is the contract between the execution store and the
// key-value backends it runs on: KV, the ordered key space every backend
// provides, and the optional capabilities a backend shared by several
// replicas adds (a fencing lease, shared key rows, the replica table, a
// consistent read-only snapshot). Callers find a capability by asserting
// the interface on the KV they were given, never by a backend's concrete
// type.
//
// It imports nothing of latch: the backends (memkv, badgerkv, pgkv), the
// execution store (package store) and the server import it. The contract
// suite every backend runs is package internal/testing/kvtest.
package backend
