// Package receipts issues execution receipts (package
// github.com/latchhq/latch/receipt describes and verifies them): the
// journal record of an execution's latest step, its inclusion proof and a
// checkpoint signed by the journal key that covers it. The control plane's
// API (controlplane/api) calls Issue for the answers that ask for one.
//
// # Freshness
//
// A receipt is answered with the result, not after the next periodic
// checkpoint: when no checkpoint this Issuer signed covers the record yet,
// it signs one of the whole committed journal (journal.Signer, the
// periodic checkpoints' key) and keeps it for the receipts after it. The
// journal's size only changes at a group commit, so this is at most one
// signature per group commit however many calls shared it, and none for a
// group no receipt asked about. These checkpoints are not stored: they are
// statements about committed records, each verifiable alone; the stored
// periodic checkpoints stay the journal's anchors (`latch audit verify`).
//
// # Witness
//
// With a witness configured (Config.Witness), each checkpoint signed for
// receipts is sent to it first, and the receipt carries its cosignature:
// the receipt then verifies against a key held outside Latch too
// (receipt.VerifyWith). A witness that fails is not asked again for
// witnessRetry; receipts issued meanwhile carry the journal's signature
// alone, and Config.OnWitnessError hears why.
package receipts

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/witness"
	receiptv1 "github.com/latchhq/latch/proto/latch/receipt/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/receipt"
)

// Journal is what Issue reads of the committed journal; *store.Store
// implements it.
type Journal interface {
	JournalSize() int64
	JournalEntry(i int64) ([]byte, error)
	StoredHash(index int64) (tlog.Hash, bool, error)
}

// Config names the issuer's dependencies.
type Config struct {
	Journal Journal
	Signer  *journal.Signer
	// Clock stamps the checkpoints' time line (default time.Now).
	Clock func() time.Time
	// Witness, when set, co-signs every checkpoint signed for receipts
	// (*witness.Client); OnWitnessError, when set, hears each failure.
	Witness        Cosigner
	OnWitnessError func(error)
}

// Cosigner co-signs a checkpoint note of a journal of size leaves
// (*witness.Client). Its error wraps witness.ErrStale when it already
// co-signed a larger checkpoint.
type Cosigner interface {
	Cosign(ctx context.Context, size int64, note []byte) ([]byte, error)
}

// witnessTimeout bounds the witness's answer on a receipt's way (the
// call waits for it); witnessRetry is how long a failed witness is left
// alone.
const (
	witnessTimeout = 2 * time.Second
	witnessRetry   = 10 * time.Second
)

// Issuer issues receipts. It is safe for concurrent use.
type Issuer struct {
	j     Journal
	sign  *journal.Signer
	clock func() time.Time
	wit   Cosigner
	onErr func(error)
	// witnessAfter: the witness is not asked before this time (after a
	// failure). Guarded by mu.
	witnessAfter time.Time

	// last is the newest checkpoint signed (nil before the first), read
	// without mu: a receipt it covers waits for no signature.
	last atomic.Pointer[signed]
	mu   sync.Mutex // held while signing, so concurrent callers share one
	// signatures counts the checkpoints signed (for tests and the bench).
	signatures int64
}

type signed struct {
	size int64
	note []byte
}

// Errors of this package.
var (
	// ErrNoRecord: the execution's record is not in the committed journal.
	ErrNoRecord = errors.New("receipts: the execution's journal record is not committed")
)

// New builds an issuer.
func New(cfg Config) (*Issuer, error) {
	if cfg.Journal == nil || cfg.Signer == nil {
		return nil, errors.New("receipts: Config.Journal and Config.Signer are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.OnWitnessError == nil {
		cfg.OnWitnessError = func(error) {}
	}
	return &Issuer{j: cfg.Journal, sign: cfg.Signer, clock: cfg.Clock, wit: cfg.Witness, onErr: cfg.OnWitnessError}, nil
}

// Issue returns the receipt of x's latest journal record (x.journal_index).
// Its fields are read from the record itself, never from x.
func (is *Issuer) Issue(x *recordv1.Execution) (*receiptv1.Receipt, error) {
	idx := int64(x.GetJournalIndex())
	if idx < 0 || idx >= is.j.JournalSize() {
		return nil, fmt.Errorf("%w: record %d of %s", ErrNoRecord, idx, x.GetId())
	}
	data, err := is.j.JournalEntry(idx)
	if err != nil {
		return nil, fmt.Errorf("receipts: read journal record %d: %w", idx, err)
	}
	e, err := journal.DecodeEntry(data)
	if err != nil {
		return nil, fmt.Errorf("receipts: journal record %d: %w", idx, err)
	}
	rx := e.GetExecution()
	if e.GetIndex() != uint64(idx) || rx.GetId() != x.GetId() {
		return nil, fmt.Errorf("receipts: journal record %d is not a record of %s: the data dir is damaged (run latch audit verify)", idx, x.GetId())
	}
	ck, err := is.checkpoint(idx)
	if err != nil {
		return nil, err
	}
	proof, err := tlog.ProveRecord(ck.size, idx, is.reader())
	if err != nil {
		return nil, fmt.Errorf("receipts: inclusion proof of record %d in a tree of %d: %w", idx, ck.size, err)
	}
	lh := journal.LeafHash(data)
	r := &receiptv1.Receipt{
		Format: receipt.Format, ExecutionId: rx.GetId(), Tool: rx.GetTool(), Actor: rx.GetActor(),
		Fingerprint: rx.GetFingerprint(), State: name(rx.GetState().String(), "STATE_"), TargetStatus: rx.GetTargetStatus(),
		ResultSha256: hex.EncodeToString(rx.GetResultSha256()), JournalIndex: uint64(idx), LeafHash: lh[:],
		Record: data, Checkpoint: string(ck.note),
	}
	if o := rx.GetOutcome(); o != recordv1.Outcome_OUTCOME_UNSPECIFIED {
		r.Outcome = name(o.String(), "OUTCOME_")
	}
	for _, h := range proof {
		r.Proof = append(r.Proof, h[:])
	}
	return r, nil
}

func name(enum, prefix string) string { return strings.ToLower(strings.TrimPrefix(enum, prefix)) }

// checkpoint returns a signed checkpoint covering record idx: the newest
// one signed when it does, else a new one of the committed journal.
// Callers that arrive while one is signed wait for it and share it.
func (is *Issuer) checkpoint(idx int64) (*signed, error) {
	if l := is.last.Load(); l != nil && l.size > idx {
		return l, nil
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if l := is.last.Load(); l != nil && l.size > idx {
		return l, nil // signed by the caller before us
	}
	l, err := is.signCommitted()
	if err != nil {
		return nil, err
	}
	if is.wit != nil && !is.clock().Before(is.witnessAfter) {
		cosigned, err := is.cosign(l)
		if errors.Is(err, witness.ErrStale) {
			// The witness holds a newer checkpoint (a periodic one):
			// sign the journal as it is now, which is at least that.
			if l, err = is.signCommitted(); err != nil {
				return nil, err
			}
			cosigned, err = is.cosign(l)
		}
		if err != nil {
			is.witnessAfter = is.clock().Add(witnessRetry)
			is.onErr(err)
		} else {
			l.note = cosigned
		}
	}
	is.last.Store(l)
	return l, nil
}

// signCommitted signs a checkpoint of the whole committed journal.
func (is *Issuer) signCommitted() (*signed, error) {
	n := is.j.JournalSize()
	root, err := journal.TreeHash(n, is.reader())
	if err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	note, err := is.sign.Sign(n, root, is.clock())
	if err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	is.signatures++
	return &signed{size: n, note: note}, nil
}

func (is *Issuer) cosign(l *signed) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), witnessTimeout)
	defer cancel()
	return is.wit.Cosign(ctx, l.size, l.note)
}

// Signatures is how many checkpoints the issuer signed.
func (is *Issuer) Signatures() int64 {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.signatures
}

func (is *Issuer) reader() tlog.HashReader { return journal.StoredHashReader(is.j.StoredHash) }
