package mcpchannel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Pins.
//
// What an upstream offers for a tool with a contract (its input schema,
// description and annotations) is pinned by hash in the store the first
// time a catalog load sees it (journaled: upstream_tool_pinned). From then
// on an offer with another hash holds the tool, at every catalog load (a
// reload, SIGHUP, a restart, a failover, the reload when an upstream is
// reached) and at dispatch, until an operator accepts it (latch catalog
// upstream-tools accept NAME; journaled: upstream_tool_accepted, with the
// diff shown). A description longer than MaxDescription goes to agents cut,
// with a note saying so; the pin covers the whole of it.

// Journal kinds of pins.
const (
	KindToolPinned   = recordv1.EntryKind_ENTRY_KIND_UPSTREAM_TOOL_PINNED
	KindToolAccepted = recordv1.EntryKind_ENTRY_KIND_UPSTREAM_TOOL_ACCEPTED
)

// Triggers of the catalog loads the channel asks for (SetReload).
const (
	TriggerUpstreamReached = "upstream_reached"
	TriggerToolAccepted    = "upstream_tool_accepted"
)

// DefaultMaxDescription caps an upstream tool's description as agents see it.
const DefaultMaxDescription = 4 << 10

var (
	// ErrUnknownTool is returned for a catalog tool that is not an upstream
	// tool of the catalog in force.
	ErrUnknownTool = errors.New("mcpchannel: no such upstream tool")
	// ErrStaleOffer is returned when the upstream's offer changed since
	// the diff the operator accepted.
	ErrStaleOffer = errors.New("mcpchannel: the upstream's offer changed")
)

// Pins keeps the accepted form of each upstream tool. Implemented by
// StorePins.
type Pins interface {
	// Pin returns the pin of a catalog tool, or nil when it has none.
	Pin(tool string) (*recordv1.UpstreamToolPin, error)
	// Put records p with its journal record (kind, reason).
	Put(ctx context.Context, p *recordv1.UpstreamToolPin, kind recordv1.EntryKind, reason string) error
}

// StorePins keeps pins in st (u/<tool>, written with their journal record).
func StorePins(st *store.Store, clock func() time.Time) Pins {
	if clock == nil {
		clock = time.Now
	}
	return &storePins{st: st, clock: clock}
}

type storePins struct {
	st    *store.Store
	clock func() time.Time
}

func (s *storePins) Pin(tool string) (*recordv1.UpstreamToolPin, error) {
	p, err := s.st.UpstreamToolPin(tool)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return p, err
}

func (s *storePins) Put(ctx context.Context, p *recordv1.UpstreamToolPin, kind recordv1.EntryKind, reason string) error {
	now := s.clock()
	p.AcceptedAt = timestamppb.New(now)
	return s.st.Update(ctx, func(tx *store.Tx) error {
		if err := tx.PutUpstreamToolPin(p); err != nil {
			return err
		}
		_, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: kind, Reason: reason, Actor: p.GetAcceptedBy(), UpstreamToolPin: p})
		return err
	})
}

// offerOf is what the upstream offers for catalog tool name, as a pin.
func offerOf(name string, lt *mcp.Tool) *recordv1.UpstreamToolPin {
	p := &recordv1.UpstreamToolPin{Tool: name, InputSchema: schemaJSON(lt), Description: lt.Description}
	if lt.Annotations != nil {
		p.Annotations, _ = json.Marshal(lt.Annotations)
	}
	p.Hash = PinHash(p)
	return p
}

// PinHash is "sha256:" + the hex SHA-256 of the JSON array [input_schema,
// description, annotations] (schema and annotations as the JSON they are,
// null when absent).
func PinHash(p *recordv1.UpstreamToolPin) string {
	b, _ := json.Marshal([]any{orNull(p.GetInputSchema()), p.GetDescription(), orNull(p.GetAnnotations())})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// pinDiff says, a line per field, how offer differs from pin.
func pinDiff(pin, offer *recordv1.UpstreamToolPin) string {
	if pin == nil {
		return "first accepted: " + offer.GetHash()
	}
	var b strings.Builder
	field := func(name, old, new string) {
		if old == new {
			return
		}
		fmt.Fprintf(&b, "%s (%d -> %d bytes):\n  - %s\n  + %s\n", name, len(old), len(new), clip(oneLine(old), 400), clip(oneLine(new), 400))
	}
	field("input_schema", string(pin.GetInputSchema()), string(offer.GetInputSchema()))
	field("description", pin.GetDescription(), offer.GetDescription())
	field("annotations", string(pin.GetAnnotations()), string(offer.GetAnnotations()))
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// pinHold says why offer is not the pin in force ("" when it is).
func pinHold(name, upstream string, pin, offer *recordv1.UpstreamToolPin) string {
	if pin == nil || pin.GetHash() == offer.GetHash() {
		return ""
	}
	var changed []string
	for _, f := range []struct {
		name     string
		old, new string
	}{
		{"input schema", string(pin.GetInputSchema()), string(offer.GetInputSchema())},
		{"description", pin.GetDescription(), offer.GetDescription()},
		{"annotations", string(pin.GetAnnotations()), string(offer.GetAnnotations())},
	} {
		if f.old != f.new {
			changed = append(changed, f.name)
		}
	}
	return fmt.Sprintf("held: the upstream changed the %s of %s since it was accepted (%s, now %s); review with latch catalog upstream-tools %s, accept with latch catalog upstream-tools accept %s",
		strings.Join(changed, ", "), name, pin.GetHash(), offer.GetHash(), upstream, name)
}

// capDescription cuts an upstream description over the cap, saying so.
func (c *Channel) capDescription(d string) string {
	if len(d) <= c.cfg.MaxDescription {
		return d
	}
	cut := strings.ToValidUTF8(d[:c.cfg.MaxDescription], "") // a rune cut in two is dropped
	return fmt.Sprintf("%s\n[Latch cut this description: the upstream's is %d bytes, over the %d-byte cap (Config.MaxDescription); latch catalog upstream-tools shows it whole]", cut, len(d), c.cfg.MaxDescription)
}

// AcceptUpstreamTool pins what the upstream offers now for catalog tool
// name (journaled: upstream_tool_accepted, by actor) and reloads the
// catalog so that it comes into force. With wantHash, the offer must still
// be the one the operator reviewed.
func (c *Channel) AcceptUpstreamTool(ctx context.Context, name, actor, wantHash string) (*controlplanev1.AcceptUpstreamToolResponse, error) {
	c.mu.Lock()
	cat, reload := c.parsed, c.reload
	c.mu.Unlock()
	var t *tools.Tool
	if cat != nil {
		t = cat.Tools[name]
	}
	if t == nil || t.Upstream == "" {
		return nil, fmt.Errorf("%w %q: the catalog in force has no upstream tool of that name (its contracts are <upstream>.<tool>)", ErrUnknownTool, name)
	}
	pins := c.pinStore()
	if pins == nil {
		return nil, fmt.Errorf("mcpchannel: upstream tools are not pinned on this control plane (no store)")
	}
	u, err := c.upstream(t.Upstream)
	if err != nil {
		return nil, err
	}
	u.waitConnected(ctx)
	sess, err := u.session()
	if err != nil {
		return nil, err
	}
	if err := u.refreshWith(ctx, sess); err != nil {
		return nil, err
	}
	lt := u.listedTools()[t.UpstreamTool]
	if lt == nil {
		return nil, fmt.Errorf("%w: upstream %s offers no tool %s now", ErrUnknownTool, t.Upstream, t.UpstreamTool)
	}
	offer := offerOf(name, lt)
	if wantHash != "" && wantHash != offer.GetHash() {
		return nil, fmt.Errorf("%w: %s is %s at the upstream now, not %s; review it again (latch catalog upstream-tools %s)", ErrStaleOffer, name, offer.GetHash(), wantHash, t.Upstream)
	}
	pin, err := pins.Pin(name)
	if err != nil {
		return nil, err
	}
	resp := &controlplanev1.AcceptUpstreamToolResponse{Tool: name, Hash: offer.GetHash(), Previous: pin.GetHash(), Diff: pinDiff(pin, offer)}
	if pin.GetHash() == offer.GetHash() {
		resp.Diff = ""
		return resp, nil
	}
	offer.AcceptedBy = actor
	reason := fmt.Sprintf("upstream tool %s accepted by %s: %s (was %s)", name, actor, offer.GetHash(), orNone(pin.GetHash()))
	if err := pins.Put(ctx, offer, KindToolAccepted, reason); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.pinned[name] = offer.GetHash()
	c.mu.Unlock()
	c.log.Info("upstream tool change accepted", "tool", name, "hash", offer.GetHash(), "previous", pin.GetHash(), "actor", actor)
	resp.Changed = true
	if reload != nil {
		reload(TriggerToolAccepted) // the accepted form comes into force under a new catalog version
	}
	return resp, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
