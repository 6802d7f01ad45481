package console

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// maxProofs bounds the records one proof answer carries (the newest).
const maxProofs = maxJournalShown

// checkpointView is one signed checkpoint as the console shows it.
type checkpointView struct {
	Size               int64
	Root, Time, Age    string
	Signature          string // "verified" or what is wrong
	SignatureOK        bool
	Note               string
	AgeSeconds         float64
	CoversWholeJournal bool
}

// proofSummary is what the detail page says about the records' anchoring
// before the browser checks anything.
type proofSummary struct {
	Checkpoint *checkpointView
	Proven     int   // records the server proved against the checkpoint
	Unanchored int   // records newer than the checkpoint
	Failed     []int // records whose proof did not check (server side)
	Error      string
}

// newestCheckpoint opens the newest stored checkpoint under the verifier
// key. nil, nil: none yet.
func (c *Console) newestCheckpoint() (*checkpointView, *journal.Checkpoint, error) {
	cps, err := c.cfg.Store.NewestCheckpoints(1)
	if err != nil || len(cps) == 0 {
		return nil, nil, err
	}
	v, cp := c.openCheckpoint(cps[0])
	return v, cp, nil
}

// openCheckpoint verifies one checkpoint note on the server.
func (c *Console) openCheckpoint(note []byte) (*checkpointView, *journal.Checkpoint) {
	v := &checkpointView{Note: string(note)}
	cp, err := journal.OpenCheckpoint(note, c.cfg.VerifierKey)
	if err != nil {
		v.Signature = err.Error()
		return v, nil
	}
	v.SignatureOK, v.Signature = true, "verified by the control plane"
	v.Size, v.Root = cp.Size, base64.StdEncoding.EncodeToString(cp.Root[:])
	if !cp.Time.IsZero() {
		v.Time = cp.Time.UTC().Format(time.RFC3339Nano)
		d := c.cfg.Clock().Sub(cp.Time)
		v.Age, v.AgeSeconds = age(d), d.Seconds()
	}
	v.CoversWholeJournal = cp.Size >= c.cfg.Store.JournalSize()
	return v, cp
}

func (c *Console) hashReader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			h, ok, err := c.cfg.Store.StoredHash(x)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("stored hash %d is missing (run `latch audit verify` on the stopped data dir)", x)
			}
			out[i] = h
		}
		return out, nil
	})
}

// proofSummary proves each record of hist against the newest checkpoint
// on the server (the browser checks again on its own).
func (c *Console) proofSummary(hist []*recordv1.JournalEntry) proofSummary {
	var s proofSummary
	v, cp, err := c.newestCheckpoint()
	if err != nil {
		s.Error = "checkpoints could not be read: " + err.Error()
		return s
	}
	s.Checkpoint = v
	if cp == nil {
		s.Unanchored = len(hist)
		return s
	}
	r := c.hashReader()
	for _, e := range hist {
		i := int64(e.GetIndex())
		if i >= cp.Size {
			s.Unanchored++
			continue
		}
		if err := c.checkRecord(cp, r, i); err != nil {
			s.Failed = append(s.Failed, int(i))
			continue
		}
		s.Proven++
	}
	return s
}

func (c *Console) checkRecord(cp *journal.Checkpoint, r tlog.HashReader, i int64) error {
	data, err := c.cfg.Store.JournalEntry(i)
	if err != nil {
		return err
	}
	p, err := tlog.ProveRecord(cp.Size, i, r)
	if err != nil {
		return err
	}
	return tlog.CheckRecord(p, cp.Size, cp.Root, i, journal.LeafHash(data))
}

// proofAnswer is GET /ui/executions/{id}/proof: what the browser needs to
// check every record itself: the checkpoint note and verifier key, and per
// record its leaf bytes and its inclusion proof (RFC 6962 order, as
// tlog.ProveRecord makes it).
type proofAnswer struct {
	Checkpoint  string        `json:"checkpoint,omitempty"`
	VerifierKey string        `json:"verifier_key"`
	Size        int64         `json:"size"`
	Records     []proofRecord `json:"records"`
	Unanchored  []uint64      `json:"unanchored"`
	Error       string        `json:"error,omitempty"`
}

type proofRecord struct {
	Index uint64   `json:"index"`
	Leaf  string   `json:"leaf"`
	Proof []string `json:"proof"`
	Error string   `json:"error,omitempty"`
}

func (c *Console) proofJSON(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	hist, err := c.cfg.Reads.History(id, "")
	ans := proofAnswer{VerifierKey: c.cfg.VerifierKey, Records: []proofRecord{}, Unanchored: []uint64{}}
	status := http.StatusOK
	switch {
	case err != nil:
		ans.Error, status = "the execution's journal could not be read: "+err.Error(), http.StatusNotFound
	default:
		c.fillProofs(&ans, hist)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(ans) //nolint:errcheck // the browser went away
}

func (c *Console) fillProofs(ans *proofAnswer, hist []*recordv1.JournalEntry) {
	cps, err := c.cfg.Store.NewestCheckpoints(1)
	if err != nil {
		ans.Error = "checkpoints could not be read: " + err.Error()
		return
	}
	if len(hist) > maxProofs {
		hist = hist[len(hist)-maxProofs:]
	}
	if len(cps) == 0 {
		for _, e := range hist {
			ans.Unanchored = append(ans.Unanchored, e.GetIndex())
		}
		return
	}
	ans.Checkpoint = string(cps[0])
	_, cp := c.openCheckpoint(cps[0])
	if cp == nil {
		// The browser checks the signature too and will say it fails; the
		// size still comes from the note's text.
		ans.Error = "the newest checkpoint does not verify on the server"
		return
	}
	ans.Size = cp.Size
	r := c.hashReader()
	for _, e := range hist {
		i := int64(e.GetIndex())
		if i >= cp.Size {
			ans.Unanchored = append(ans.Unanchored, e.GetIndex())
			continue
		}
		pr := proofRecord{Index: e.GetIndex(), Proof: []string{}}
		data, err := c.cfg.Store.JournalEntry(i)
		if err == nil {
			pr.Leaf = base64.StdEncoding.EncodeToString(data)
			var p tlog.RecordProof
			if p, err = tlog.ProveRecord(cp.Size, i, r); err == nil {
				for _, h := range p {
					pr.Proof = append(pr.Proof, base64.StdEncoding.EncodeToString(h[:]))
				}
			}
		}
		if err != nil {
			pr.Error = err.Error()
		}
		ans.Records = append(ans.Records, pr)
	}
}
