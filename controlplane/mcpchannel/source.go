package mcpchannel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/tools"
)

// Source wraps a catalog source: every load starts (or keeps) the upstreams
// the catalog defines, waits for their tool lists (bounded by ConnectWait),
// binds each upstream tool's input schema, and leaves out the tools it
// cannot bind (held, with the reason logged). The version is computed over
// the catalog's bytes and the bound schemas, so a reload after an upstream
// changed a schema brings the new schema into force under a new version.
func (c *Channel) Source(inner catalog.Source) catalog.Source {
	return &source{c: c, inner: inner}
}

type source struct {
	c     *Channel
	inner catalog.Source
}

func (s *source) Load() (*tools.Catalog, []byte, string, error) {
	cat, data, src, err := s.inner.Load()
	if err != nil || len(cat.Upstreams) == 0 {
		if err == nil {
			s.c.setCatalog(cat)
		}
		return cat, data, src, err
	}
	bound, held := s.c.Bind(context.Background(), cat)
	for _, h := range held {
		s.c.log.Warn("upstream tool held: not exposed until the catalog is reloaded with it available", "tool", h.Tool, "reason", h.Reason)
	}
	pins := map[string]json.RawMessage{}
	for name, t := range bound.Tools {
		if t.Upstream != "" {
			pins[name] = t.InputSchema
		}
	}
	heldNames := make([]string, 0, len(held))
	for _, h := range held {
		heldNames = append(heldNames, h.Tool)
	}
	extra, err := json.Marshal(map[string]any{"upstream_schemas": pins, "held": heldNames})
	if err != nil {
		return nil, nil, src, fmt.Errorf("%w: upstream schemas do not encode: %v", catalog.ErrInvalid, err)
	}
	s.c.setCatalog(bound)
	versioned := append(append(append([]byte(nil), data...), "\n#latch-upstream-schemas "...), extra...)
	return bound, versioned, src, nil
}

func (c *Channel) setCatalog(cat *tools.Catalog) {
	c.mu.Lock()
	c.catalog = cat
	c.mu.Unlock()
}

// Held is an upstream tool left out of a catalog, and why.
type Held struct {
	Tool   string
	Reason string
}

// Bind configures the upstreams of cat, waits for their tool lists (bounded
// by ConnectWait), and returns a copy of cat whose upstream tools have the
// upstream's input schema, without the tools it cannot bind.
func (c *Channel) Bind(ctx context.Context, cat *tools.Catalog) (*tools.Catalog, []Held) {
	c.Configure(cat)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectWait)
	defer cancel()
	lists := map[string]map[string]*mcp.Tool{}
	errs := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name := range cat.Upstreams {
		u, err := c.upstream(name)
		if err != nil {
			errs[name] = err
			continue
		}
		wg.Go(func() {
			u.waitTried(ctx)
			u.mu.Lock()
			sess := u.sess
			u.mu.Unlock()
			if sess != nil {
				// A reload asks again: the operator reloads to take the
				// upstream's current schemas.
				if err := u.refreshWith(ctx, sess); err != nil {
					u.log.Warn("upstream tool list failed at catalog load; using the last list", "error", err)
				}
			}
			u.mu.Lock()
			defer u.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case u.listed != nil:
				lists[name] = u.listed
			case u.lastErr != nil:
				errs[name] = u.lastErr
			default:
				errs[name] = fmt.Errorf("upstream %s did not answer within %s", name, c.cfg.ConnectWait)
			}
		})
	}
	wg.Wait()
	out := &tools.Catalog{Source: cat.Source, Targets: cat.Targets, Upstreams: cat.Upstreams, Tools: make(map[string]*tools.Tool, len(cat.Tools))}
	var held []Held
	for _, name := range cat.ToolNames() {
		t := cat.Tools[name]
		if t.Upstream == "" {
			out.Tools[name] = t
			continue
		}
		list, ok := lists[t.Upstream]
		if !ok {
			held = append(held, Held{Tool: name, Reason: fmt.Sprintf("upstream %s was not reached: %v; reload the catalog once it is up (latch catalog reload)", t.Upstream, errs[t.Upstream])})
			continue
		}
		lt, ok := list[t.UpstreamTool]
		if !ok {
			held = append(held, Held{Tool: name, Reason: fmt.Sprintf("upstream %s offers no tool %s (latch catalog upstream-tools %s lists what it offers)", t.Upstream, t.UpstreamTool, t.Upstream)})
			continue
		}
		b, err := t.BindUpstreamSchema(schemaJSON(lt))
		if err != nil {
			held = append(held, Held{Tool: name, Reason: err.Error()})
			continue
		}
		if b.Description == "" {
			b.Description = lt.Description
		}
		out.Tools[name] = b
	}
	return out, held
}

// schemaJSON is a listed tool's input schema as JSON.
func schemaJSON(t *mcp.Tool) json.RawMessage {
	if t.InputSchema == nil {
		return nil
	}
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil
	}
	return b
}

// ListedTool is one tool an upstream offers, as `latch catalog
// upstream-tools` shows it.
type ListedTool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	// Annotations are the upstream's hints, shown, never trusted.
	Annotations *mcp.ToolAnnotations
	// Contract is the catalog's tool for it ("" when it has none).
	Contract string
	// Held says why the contract's tool is not exposed ("" when it is, or
	// when there is no contract).
	Held string
}

// UpstreamTools connects to the upstream name of cat (starting it if need
// be) and lists what it offers, with the catalog's contracts.
func (c *Channel) UpstreamTools(ctx context.Context, cat *tools.Catalog, name string) ([]ListedTool, string, error) {
	if cat.Upstreams[name] == nil {
		return nil, "", fmt.Errorf("%w %q: the catalog defines no such upstream", ErrUnknownUpstream, name)
	}
	bound, held := c.Bind(ctx, cat)
	u, err := c.upstream(name)
	if err != nil {
		return nil, "", err
	}
	listed := u.listedTools()
	if listed == nil {
		_, err := u.session()
		return nil, u.describe(), fmt.Errorf("upstream %s could not be listed: %w", name, err)
	}
	contract := map[string]string{}
	heldBy := map[string]string{}
	for tn, t := range cat.Tools {
		if t.Upstream == name {
			contract[t.UpstreamTool] = tn
		}
	}
	for _, h := range held {
		heldBy[h.Tool] = h.Reason
	}
	var out []ListedTool
	for _, tn := range sortedToolNames(listed) {
		lt := listed[tn]
		lt2 := ListedTool{Name: tn, Description: lt.Description, InputSchema: schemaJSON(lt), Annotations: lt.Annotations, Contract: contract[tn]}
		if lt2.Contract != "" {
			lt2.Held = heldBy[lt2.Contract]
			if _, ok := bound.Tools[lt2.Contract]; !ok && lt2.Held == "" {
				lt2.Held = "not exposed"
			}
		}
		out = append(out, lt2)
	}
	return out, u.describe(), nil
}

func sortedToolNames(m map[string]*mcp.Tool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
