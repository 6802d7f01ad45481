// Package channels is the registry of the control plane's channel kinds:
// for each kind, the catalog half (tools.Kind: the target and tool keys
// it takes) and the control-plane half (how the stack builds its
// engine.Channel, how `latch dev` adapts the example catalog's targets).
// BuiltIn lists the kinds Latch ships, one line each; each kind's code is
// in its own package (httpchannel, hostchannel, mcpchannel).
//
// Imported by the composition root (cli) and devstack.
package channels

import (
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/tools"
)

// Kind is one channel kind of the control plane.
type Kind struct {
	// Catalog are the catalog kinds its channel serves (hostchannel serves
	// ssh and local with one channel).
	Catalog []tools.Kind
	// New builds the channel from the stack's dependencies; closeFn
	// releases its connections once the server has stopped (nil: nothing
	// to release).
	New func(Deps) (ch engine.Channel, closeFn func(), err error)
	// Dev points a target of the embedded example catalog at what `latch
	// dev` runs (its demo target, its host agent); nil leaves the kind's
	// targets as written.
	Dev func(t *tools.Target, env DevEnv)
}

// Deps are what the stack hands every kind's New.
type Deps struct {
	Logger hclog.Logger
	// Vault holds the targets' credentials.
	Vault *vault.Vault
	// TrustOnFirstUse allows unpinned SSH host keys (latch dev only).
	TrustOnFirstUse bool
	// DataDir is the control plane's data directory ("" in tests).
	DataDir string
	// Version is the Latch version the mcp channel announces upstream.
	Version string
	// UpstreamMaxDescription bounds an upstream tool's description.
	UpstreamMaxDescription int
}

// DevEnv is what `latch dev` runs for the example catalog's targets.
type DevEnv struct {
	// ExampleURL is the demo target's base URL as the example catalog
	// writes it; DemoURL where the demo target listens.
	ExampleURL, DemoURL string
	// AgentSocket is the embedded host agent's socket.
	AgentSocket string
}

// Registry is a set of channel kinds: the catalog registry for the
// loader, and the channels for the engine.
type Registry struct {
	kinds   []Kind
	byCh    map[tools.Channel]*Kind
	catalog *tools.Registry
}

// NewRegistry returns the registry of kinds; two kinds serving one
// channel name are an error, as is a kind without New.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r := &Registry{kinds: kinds, byCh: map[tools.Channel]*Kind{}}
	var cat []tools.Kind
	for i := range r.kinds {
		k := &r.kinds[i]
		if k.New == nil || len(k.Catalog) == 0 {
			return nil, errors.New("channels: a kind needs its catalog kinds and New")
		}
		for _, ck := range k.Catalog {
			r.byCh[ck.Channel()] = k
			cat = append(cat, ck)
		}
	}
	c, err := tools.NewRegistry(cat...)
	if err != nil {
		return nil, fmt.Errorf("channels: %w", err)
	}
	r.catalog = c
	return r, nil
}

// Default is the registry of the built-in kinds.
func Default() *Registry {
	r, err := NewRegistry(BuiltIn()...)
	if err != nil {
		panic(err) // BuiltIn is fixed: a bug, not an input
	}
	return r
}

// Catalog is the catalog registry: Load and Parse accept exactly the
// registry's kinds.
func (r *Registry) Catalog() *tools.Registry { return r.catalog }

// Set is the channels built from a registry.
type Set struct {
	// Channels is the engine's map (engine.Config.Channels).
	Channels map[tools.Channel]engine.Channel
	closers  []func()
}

// Build builds every kind's channel. On error the channels already built
// are closed.
func (r *Registry) Build(d Deps) (*Set, error) {
	if d.Logger == nil {
		d.Logger = hclog.NewNullLogger()
	}
	s := &Set{Channels: map[tools.Channel]engine.Channel{}}
	for _, k := range r.kinds {
		ch, closeFn, err := k.New(d)
		if err != nil {
			s.Close()
			return nil, err
		}
		if closeFn != nil {
			s.closers = append(s.closers, closeFn)
		}
		for _, ck := range k.Catalog {
			s.Channels[ck.Channel()] = ch
		}
	}
	return s, nil
}

// Close releases every channel's connections, the last built first.
func (s *Set) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// AdaptDev points the targets of cat, the embedded example catalog, at
// what `latch dev` runs, each by its kind.
func (r *Registry) AdaptDev(cat *tools.Catalog, env DevEnv) {
	for _, t := range cat.Targets {
		if k := r.byCh[t.Channel]; k != nil && k.Dev != nil {
			k.Dev(t, env)
		}
	}
}
