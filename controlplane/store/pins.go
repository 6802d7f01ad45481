package store

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// u/<catalog tool> holds the UpstreamToolPin of an upstream tool: what
// Latch accepted of its schema, description and annotations. It is written
// only with the journal record that says so (upstream_tool_pinned or
// upstream_tool_accepted, carrying the pin), so it survives restarts and
// is shared by every replica of a PostgreSQL store.

func pinKey(tool string) []byte { return []byte("u/" + tool) }

// UpstreamToolPin returns the pin of tool as this group sees it, or
// ErrNotFound.
func (t *Tx) UpstreamToolPin(tool string) (*recordv1.UpstreamToolPin, error) {
	return decodePin(t.get(pinKey(tool)))
}

// PutUpstreamToolPin records the pin of p.Tool (the caller appends its
// journal record in the same group).
func (t *Tx) PutUpstreamToolPin(p *recordv1.UpstreamToolPin) error {
	data, err := proto.Marshal(p)
	if err != nil {
		return fmt.Errorf("store: encode upstream tool pin: %w", err)
	}
	t.set(pinKey(p.GetTool()), data)
	return nil
}

// UpstreamToolPin returns the committed pin of tool, or ErrNotFound.
func (s *Store) UpstreamToolPin(tool string) (*recordv1.UpstreamToolPin, error) {
	return decodePin(s.kv.Get(pinKey(tool)))
}

func decodePin(data []byte, err error) (*recordv1.UpstreamToolPin, error) {
	if err != nil {
		return nil, err
	}
	x := &recordv1.UpstreamToolPin{}
	if err := proto.Unmarshal(data, x); err != nil {
		return nil, fmt.Errorf("store: decode upstream tool pin: %w", err)
	}
	return x, nil
}
