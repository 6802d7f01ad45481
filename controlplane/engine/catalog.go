package engine

import (
	"context"

	"github.com/latchhq/latch/tools"
)

// catalogInForce is one catalog with its version, swapped whole.
type catalogInForce struct {
	cat     *tools.Catalog
	version string
}

// Catalog returns the catalog in force.
func (e *Engine) Catalog() *tools.Catalog { return e.catalog.Load().cat }

// CatalogVersion returns the version of the catalog in force.
func (e *Engine) CatalogVersion() string { return e.catalog.Load().version }

// SetCatalog puts another catalog in force (catalog.Manager calls it after
// the version is journaled). New executions are accepted under it; an
// execution accepted before keeps its recorded catalog_version, and is
// dispatched and recovered with the tool as the catalog in force defines it
// (a tool that left the catalog is refused at dispatch with that reason).
func (e *Engine) SetCatalog(cat *tools.Catalog, version string) {
	if cat == nil {
		return
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	e.catalog.Store(&catalogInForce{cat: cat, version: version})
	close(e.catalogChanged)
	e.catalogChanged = make(chan struct{})
}

// WaitCatalog returns the catalog in force once its version differs from
// known, or when ctx ends (then possibly still known).
func (e *Engine) WaitCatalog(ctx context.Context, known string) (*tools.Catalog, string) {
	for {
		e.catalogMu.Lock()
		cur, ch := e.catalog.Load(), e.catalogChanged
		e.catalogMu.Unlock()
		if cur.version != known {
			return cur.cat, cur.version
		}
		select {
		case <-ctx.Done():
			return cur.cat, cur.version
		case <-ch:
		}
	}
}
