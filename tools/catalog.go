package tools

import (
	"maps"
	"slices"
)

// ToolNames returns the catalog's tool names, sorted.
func (c *Catalog) ToolNames() []string {
	return slices.Sorted(maps.Keys(c.Tools))
}

// TargetOf returns the target tool t is sent to (nil if the catalog has no
// such target, which Load never allows).
func (c *Catalog) TargetOf(t *Tool) *Target {
	return c.Targets[t.Target]
}
