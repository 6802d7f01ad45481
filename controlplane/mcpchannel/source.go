package mcpchannel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/store"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
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

var _ catalog.StoreUser = (*source)(nil)

// UseStore keeps the upstream tools' pins in st (unless Config.Pins named
// where).
func (s *source) UseStore(st *store.Store) {
	s.c.mu.Lock()
	if !s.c.pinsFixed {
		s.c.pins = StorePins(st, nil)
	}
	s.c.mu.Unlock()
}

func (s *source) Load() (*tools.Catalog, []byte, string, error) {
	cat, data, src, err := s.inner.Load()
	if err != nil {
		return cat, data, src, err
	}
	s.c.mu.Lock()
	s.c.parsed = cat
	s.c.mu.Unlock()
	if len(cat.Upstreams) == 0 {
		s.c.Configure(cat) // stops the upstreams a previous catalog had
		s.c.setCatalog(cat)
		return cat, data, src, nil
	}
	bound, held := s.c.Bind(context.Background(), cat)
	for _, h := range held {
		s.c.log.Warn("upstream tool held: not exposed until the catalog is reloaded with it available", "tool", h.Tool, "reason", h.Reason)
	}
	pins := map[string]json.RawMessage{}
	accepted := map[string]string{}
	s.c.mu.Lock()
	for name, t := range bound.Tools {
		if t.Upstream != "" {
			pins[name] = t.InputSchema
			if h := s.c.pinned[name]; h != "" {
				accepted[name] = h
			}
		}
	}
	s.c.mu.Unlock()
	heldNames := make([]string, 0, len(held))
	for _, h := range held {
		heldNames = append(heldNames, h.Tool)
	}
	fields := map[string]any{"upstream_schemas": pins, "held": heldNames}
	if len(accepted) > 0 {
		// Pinned descriptions and annotations are part of what is in force.
		fields["upstream_pins"] = accepted
	}
	extra, err := json.Marshal(fields)
	if err != nil {
		return nil, nil, src, fmt.Errorf("%w: upstream schemas do not encode: %v", catalog.ErrInvalid, err)
	}
	for _, h := range held {
		bound.Held = append(bound.Held, tools.HeldTool{Tool: h.Tool, Reason: h.Reason})
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
			u.waitConnected(ctx)
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
			u.missed = u.listed == nil
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
	out := &tools.Catalog{Source: cat.Source, Targets: cat.Targets, Upstreams: cat.Upstreams, Warnings: cat.Warnings, Tools: make(map[string]*tools.Tool, len(cat.Tools))}
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
		if h := c.checkPin(ctx, name, t.Upstream, lt); h != "" {
			held = append(held, Held{Tool: name, Reason: h})
			continue
		}
		b, err := t.BindUpstreamSchema(schemaJSON(lt))
		if err != nil {
			held = append(held, Held{Tool: name, Reason: err.Error()})
			continue
		}
		if u, err := c.upstream(t.Upstream); err == nil {
			if h := u.statusQueryHold(b); h != "" {
				held = append(held, Held{Tool: name, Reason: h})
				continue
			}
		}
		if b.Description == "" {
			b.Description = c.capDescription(lt.Description)
		}
		out.Tools[name] = b
	}
	return out, held
}

// checkPin compares what the upstream offers for catalog tool name with its
// pin: none yet pins it (first seen); another one holds the tool.
func (c *Channel) checkPin(ctx context.Context, name, upstream string, lt *mcp.Tool) string {
	pins := c.pinStore()
	if pins == nil {
		return ""
	}
	offer := offerOf(name, lt)
	pin, err := pins.Pin(name)
	if err != nil {
		return fmt.Sprintf("held: the accepted form of %s cannot be read from the store: %v", name, err)
	}
	if pin == nil {
		offer.AcceptedBy = "first_seen"
		if err := pins.Put(ctx, offer, KindToolPinned, fmt.Sprintf("upstream tool %s pinned as first offered (%s)", name, offer.GetHash())); err != nil {
			return fmt.Sprintf("held: the first offer of %s could not be pinned: %v", name, err)
		}
		pin = offer
	}
	c.mu.Lock()
	c.pinned[name] = pin.GetHash()
	c.mu.Unlock()
	return pinHold(name, upstream, pin, offer)
}

func (c *Channel) pinStore() Pins {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pins
}

// pinnedHash is the pin hash in force for catalog tool name ("" when none).
func (c *Channel) pinnedHash(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pinned[name]
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

// ListUpstreamTools lists what upstream name of the last catalog loaded
// offers, with the catalog's contract for each tool and why a contracted
// tool is held. It asks the upstream again (a live session is used as is;
// it waits for one up to ConnectWait).
func (c *Channel) ListUpstreamTools(ctx context.Context, name string) (*controlplanev1.ListUpstreamToolsResponse, error) {
	c.mu.Lock()
	cat := c.parsed
	c.mu.Unlock()
	if cat == nil || cat.Upstreams[name] == nil {
		return nil, fmt.Errorf("%w %q: the catalog in force defines no such upstream", ErrUnknownUpstream, name)
	}
	return c.listUpstream(ctx, cat, name)
}

func (c *Channel) listUpstream(ctx context.Context, cat *tools.Catalog, name string) (*controlplanev1.ListUpstreamToolsResponse, error) {
	bound, held := c.Bind(ctx, cat)
	u, err := c.upstream(name)
	if err != nil {
		return nil, err
	}
	listed := u.listedTools()
	if listed == nil {
		_, err := u.session()
		return nil, fmt.Errorf("upstream %s (%s) could not be listed: %w", name, u.describe(), err)
	}
	contract := map[string]string{}
	for tn, t := range cat.Tools {
		if t.Upstream == name {
			contract[t.UpstreamTool] = tn
		}
	}
	heldBy := map[string]string{}
	for _, h := range held {
		heldBy[h.Tool] = h.Reason
	}
	// A tool in force may also be held by a schema change since the load.
	c.mu.Lock()
	inForce := c.catalog
	c.mu.Unlock()
	out := &controlplanev1.ListUpstreamToolsResponse{Upstream: name, Transport: u.describe()}
	for _, tn := range sortedToolNames(listed) {
		lt := listed[tn]
		ut := &controlplanev1.UpstreamTool{Name: tn, Description: lt.Description, InputSchema: schemaJSON(lt), Contract: contract[tn]}
		if lt.Annotations != nil {
			ut.Annotations, _ = json.Marshal(lt.Annotations)
		}
		ut.Calls = u.callsAs(tn)
		if ut.Contract != "" {
			offer := offerOf(ut.Contract, lt)
			ut.Hash = offer.GetHash()
			if pins := c.pinStore(); pins != nil {
				if pin, err := pins.Pin(ut.Contract); err == nil && pin != nil {
					ut.PinnedHash = pin.GetHash()
					if pin.GetHash() != offer.GetHash() {
						ut.Diff = pinDiff(pin, offer)
					}
				}
			}
			ut.Held = heldBy[ut.Contract]
			if inForce != nil && ut.Held == "" && inForce.Tools[ut.Contract] != nil {
				t := inForce.Tools[ut.Contract]
				ut.Held = u.heldReason(t)
			}
			if _, ok := bound.Tools[ut.Contract]; !ok && ut.Held == "" {
				ut.Held = "not exposed"
			}
		}
		out.Tools = append(out.Tools, ut)
	}
	return out, nil
}

func sortedToolNames(m map[string]*mcp.Tool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
