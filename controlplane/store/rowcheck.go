package store

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The console session rows (cs/) and upstream tool pins (u/) against the
// journal, in the full check (checkRows).
//
// A console session row signs an operator in while the operator_signed_in
// record it names opened it (ConsoleSession checks it on every use); the
// check holds every row so, so a forged row is reported at start-up and
// by latch audit verify rather than only refused when a browser presents
// its key. A pin is what Latch accepted of an upstream tool and is written
// only with the upstream_tool_pinned or upstream_tool_accepted record
// carrying it: each row must be the pin of the last such record of its
// tool (a row edited to accept a changed tool would otherwise expose it).

// journaledPin is the last journal record of an upstream tool's pin.
type journaledPin struct {
	index int64
	pin   *recordv1.UpstreamToolPin
}

type rowAdd = func(id string, idx int64, key string, kind MismatchKind, format string, args ...any)

// checkRows holds the console session rows and the pins against the
// journal (pins: the pass's, of its first size records).
func (s *Store) checkRows(ctx context.Context, pins map[string]journaledPin, size int64, add rowAdd) error {
	type row struct{ key, value []byte }
	var sessions []row
	err := s.kv.Scan([]byte("cs/"), false, func(k, v []byte) bool {
		sessions = append(sessions, row{k, v})
		return ctx.Err() == nil
	})
	if err != nil {
		return fmt.Errorf("store: state check: read the console sessions: %w", err)
	}
	for _, r := range sessions {
		id := string(r.key[len("cs/"):])
		x := &recordv1.ConsoleSession{}
		_ = proto.Unmarshal(r.value, x) // a row that does not decode is refused below
		_, err := s.openedConsoleSession(id, x.GetKeySha256(), r.value)
		if err == nil && ConsoleSessionID(x.GetKeySha256()) != id {
			err = fmt.Errorf("%w: %s is not named by the hash of its key", ErrConsoleSessionForged, id)
		}
		if err != nil {
			add(id, int64(x.GetJournalIndex()), string(r.key), MismatchRecord, "the console session row is not the one its journal record opened (%v); sign the session out or delete the row (it signs nobody in)", err)
		}
	}

	ms, err := pinMismatches(s.kv.Get, s.kv, pins)
	if err != nil {
		return err
	}
	if len(ms) > 0 && s.JournalSize() > size {
		// Written while the check ran: look again with the records since.
		uerr := s.Update(ctx, func(tx *Tx) error {
			for i := size; i < tx.size; i++ {
				if e, err := entryAt(tx.get, i); err == nil && e.GetUpstreamToolPin().GetTool() != "" {
					pins[e.GetUpstreamToolPin().GetTool()] = journaledPin{index: i, pin: e.GetUpstreamToolPin()}
				}
			}
			var kept []Mismatch
			for _, m := range ms {
				again, err := pinMismatch(tx.get, m.ExecutionID, pins)
				if err != nil {
					return err
				}
				kept = append(kept, again...)
			}
			ms = kept
			return nil
		})
		if uerr != nil && !errors.Is(uerr, ErrClosed) {
			return uerr
		}
	}
	for _, m := range ms {
		add(m.ExecutionID, m.JournalIndex, m.Key, m.Kind, "%s", m.Detail)
	}
	return nil
}

// pinMismatches checks every pin row of kv.
func pinMismatches(get getter, kv KV, pins map[string]journaledPin) ([]Mismatch, error) {
	var tools []string
	err := kv.Scan([]byte("u/"), false, func(k, _ []byte) bool {
		tools = append(tools, string(k[len("u/"):]))
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("store: state check: read the upstream tool pins: %w", err)
	}
	var out []Mismatch
	for _, tool := range tools {
		ms, err := pinMismatch(get, tool, pins)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// pinMismatch checks tool's pin row (read with get) against its last
// journal record.
func pinMismatch(get getter, tool string, pins map[string]journaledPin) ([]Mismatch, error) {
	key := string(pinKey(tool))
	v, err := get(pinKey(tool))
	if errors.Is(err, ErrNotFound) {
		return nil, nil // gone since the scan: nothing is exposed by it
	}
	if err != nil {
		return nil, fmt.Errorf("store: state check: read %s: %w", key, err)
	}
	j, journaled := pins[tool]
	row := &recordv1.UpstreamToolPin{}
	switch {
	case proto.Unmarshal(v, row) != nil:
		return []Mismatch{{ExecutionID: tool, JournalIndex: j.indexOr(journaled), Key: key, Kind: MismatchRecord,
			Detail: "the upstream tool pin does not decode; restore the store from a backup, or delete the row and accept the tool again (latch catalog upstream-tools accept)"}}, nil
	case !journaled:
		return []Mismatch{{ExecutionID: tool, JournalIndex: -1, Key: key, Kind: MismatchUnjournaled,
			Detail: "no upstream_tool_pinned or upstream_tool_accepted journal record carries this pin; delete the row and accept the tool again (latch catalog upstream-tools accept)"}}, nil
	case !proto.Equal(row, j.pin):
		return []Mismatch{{ExecutionID: tool, JournalIndex: j.index, Key: key, Kind: MismatchRecord,
			Detail: fmt.Sprintf("the upstream tool pin is not the one journal record %d accepted; restore the row from a backup, or accept the tool again (latch catalog upstream-tools accept)", j.index)}}, nil
	}
	return nil, nil
}

func (j journaledPin) indexOr(ok bool) int64 {
	if !ok {
		return -1
	}
	return j.index
}
