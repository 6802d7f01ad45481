package console

import (
	"maps"
	"slices"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// toolsSeen is every tool an execution was accepted for, read from the
// journal up to size: the list's Tool filter offers them, not only the
// catalog's in force (an execution of a tool since taken out of the
// catalog must still be found). It grows with the journal: each listing
// reads only the records appended since the last.
type toolsSeen struct {
	size  int64
	names map[string]bool
}

// toolNames is the list's Tool filter: the catalog's tools and every tool
// that appears in an execution, sorted.
func (c *Console) toolNames() ([]string, error) {
	c.toolsMu.Lock()
	defer c.toolsMu.Unlock()
	if c.tools.names == nil {
		c.tools.names = map[string]bool{}
	}
	size := c.cfg.Store.JournalSize()
	if size > c.tools.size {
		var e recordv1.JournalEntry
		err := c.cfg.Store.ScanJournalRange(c.tools.size, size, func(_ int64, data []byte, _ []tlog.Hash) bool {
			e.Reset()
			if proto.Unmarshal(data, &e) == nil {
				if t := e.GetExecution().GetTool(); t != "" {
					c.tools.names[t] = true
				}
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		c.tools.size = size
	}
	names := maps.Clone(c.tools.names)
	if cat := c.cfg.Catalog(); cat != nil {
		for name := range cat.Tools {
			names[name] = true
		}
	}
	return slices.Sorted(maps.Keys(names)), nil
}
