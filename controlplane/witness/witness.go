// Package witness has the journal's checkpoints co-signed by an
// independent witness speaking the c2sp.org/tlog-witness protocol (for
// example litewitness): the control plane sends each checkpoint with an
// RFC 6962 consistency proof from the last one the witness saw, and keeps
// the witness's cosignature on the checkpoint note, where receipts and
// `latch audit verify` check it (package receipt).
//
// A witness refuses a checkpoint that is not an extension of the last one
// it co-signed for this journal. That is what makes a fork visible: a
// journal rolled back to an older backup, rewritten, or shown differently
// to different readers can no longer be co-signed, and Cosign says so
// (ErrFork) instead of the witness's silence going unnoticed.
//
// The witness holds no secret of Latch: it learns the journal's origin,
// sizes and root hashes, never a record.
package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/internal/egress"
	"github.com/latchhq/latch/receipt"
)

// Journal is what the client reads of the committed journal; *store.Store
// implements it.
type Journal interface {
	JournalSize() int64
	StoredHash(index int64) (tlog.Hash, bool, error)
}

// Config configures a Client.
type Config struct {
	// URL is the witness's base URL; checkpoints are POSTed to
	// URL/add-checkpoint. A witness is the operator's configuration, so
	// loopback and private addresses are allowed (never cloud metadata or
	// link-local ones, internal/egress).
	URL string
	// Key is the witness's cosignature verifier key
	// (<name>+<hash>+<key>, as the witness prints it).
	Key string
	// Journal is the journal whose checkpoints are co-signed.
	Journal Journal
	// Timeout bounds one request to the witness (default 5s).
	Timeout time.Duration
	// HTTP is the client (default: internal/egress, no redirects).
	HTTP *http.Client
}

// Errors of Cosign. Each message says what to do.
var (
	// ErrFork: the witness co-signed a checkpoint of this journal that
	// the journal no longer extends.
	ErrFork = errors.New("witness: the journal is not an extension of the checkpoint the witness co-signed (forked, rewritten, or restored from an older backup)")
	// ErrRefused: the witness refused the checkpoint for a reason other
	// than consistency (unknown log, unknown key, bad request).
	ErrRefused = errors.New("witness: the witness refused the checkpoint")
	// ErrUnavailable: the witness did not answer, or answered with an
	// error of its own.
	ErrUnavailable = errors.New("witness: the witness is unavailable")
	// ErrStale: the witness already co-signed a larger checkpoint of this
	// journal; co-sign a newer one.
	ErrStale = errors.New("witness: the witness already co-signed a newer checkpoint of this journal")
)

// maxProofLines is the protocol's bound on consistency proof lines.
const maxProofLines = 63

// maxAttempts bounds the requests of one Cosign: each 409 Conflict tells
// the size the witness holds, and the next request starts from it.
const maxAttempts = 3

// Client co-signs checkpoints with one witness. It is safe for concurrent
// use; requests are made one at a time, so the size the witness holds
// stays known.
type Client struct {
	endpoint string
	verifier *receipt.WitnessVerifier
	j        Journal
	http     *http.Client
	timeout  time.Duration

	mu    sync.Mutex
	known int64 // the size the witness last co-signed or reported; 0 at start
}

// New checks cfg and returns a client. It makes no request.
func New(cfg Config) (*Client, error) {
	if cfg.Journal == nil {
		return nil, errors.New("witness: Config.Journal is required")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("witness: URL %q is not an http(s) URL without query (give the witness's base URL, e.g. https://witness.example)", cfg.URL)
	}
	v, err := receipt.NewWitnessVerifier(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("witness: %w (give the key the witness prints as its verifier key)", err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.HTTP == nil {
		cfg.HTTP = egress.NewClient(egress.Config{Policy: egress.Policy{AllowPrivate: true}, Timeout: cfg.Timeout}, nil)
	}
	return &Client{
		endpoint: strings.TrimSuffix(u.String(), "/") + "/add-checkpoint",
		verifier: v, j: cfg.Journal, http: cfg.HTTP, timeout: cfg.Timeout,
	}, nil
}

// Name is the witness's name (its key's).
func (c *Client) Name() string { return c.verifier.Name() }

// Known is the journal size the witness last co-signed or reported.
func (c *Client) Known() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known
}

// Cosign sends the signed checkpoint note of a journal of size leaves to
// the witness and returns the note with the witness's cosignature added
// (its other signatures kept). The error wraps ErrFork, ErrStale,
// ErrRefused or ErrUnavailable.
func (c *Client) Cosign(ctx context.Context, size int64, note []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range maxAttempts {
		old := c.known
		if old > size {
			if old <= c.j.JournalSize() {
				return nil, fmt.Errorf("%w: it holds size %d, this checkpoint is of size %d", ErrStale, old, size)
			}
			return nil, fmt.Errorf("%w: the witness %s co-signed a checkpoint of size %d, but the journal holds %d records: it was truncated or restored from an older backup; run `latch audit verify`", ErrFork, c.Name(), old, c.j.JournalSize())
		}
		var proof tlog.TreeProof
		if old > 0 && old < size {
			p, err := journal.ProveTree(size, old, journal.StoredHashReader(c.j.StoredHash))
			if err != nil {
				return nil, fmt.Errorf("witness: %w", err)
			}
			proof = p
		}
		if len(proof) > maxProofLines {
			return nil, fmt.Errorf("witness: the consistency proof from %d to %d has %d lines, more than the protocol's %d", old, size, len(proof), maxProofLines)
		}
		status, body, err := c.post(ctx, requestBody(old, proof, note))
		if err != nil {
			return nil, err
		}
		switch status {
		case http.StatusOK:
			cosigned := append(bytes.Clone(note), body...)
			if _, err := receipt.Cosignature(cosigned, c.verifier); err != nil {
				return nil, fmt.Errorf("%w: its answer is not its valid cosignature of this checkpoint: %w", ErrRefused, err)
			}
			c.known = size
			return cosigned, nil
		case http.StatusConflict:
			k, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
			if err != nil || k < 0 {
				return nil, fmt.Errorf("%w: its 409 answer %q is not a tree size", ErrUnavailable, clip(body))
			}
			c.known = k
		case http.StatusUnprocessableEntity:
			return nil, fmt.Errorf("%w: the witness %s co-signed a checkpoint of size %d that this journal's records do not extend to size %d; run `latch audit verify` with the checkpoint copy to find where they differ", ErrFork, c.Name(), old, size)
		case http.StatusNotFound:
			return nil, fmt.Errorf("%w: it does not know this journal's origin (%s): on the witness, add the log and the journal's verifier key (litewitness: witnessctl add-log and add-key)", ErrRefused, clip(body))
		case http.StatusForbidden:
			return nil, fmt.Errorf("%w: the checkpoint's signature is not by a key the witness holds for this origin (%s): give it the journal's verifier key (DATA_DIR/keys/journal.pub)", ErrRefused, clip(body))
		case http.StatusBadRequest:
			return nil, fmt.Errorf("%w: it could not read the request (%s)", ErrRefused, clip(body))
		default:
			return nil, fmt.Errorf("%w: HTTP %d: %s", ErrUnavailable, status, clip(body))
		}
	}
	return nil, fmt.Errorf("%w: its size changed under %d requests in a row (another writer is submitting this journal's checkpoints)", ErrUnavailable, maxAttempts)
}

// requestBody is an add-checkpoint request: "old N", the proof's hashes,
// an empty line and the checkpoint note.
func requestBody(old int64, proof tlog.TreeProof, note []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", old)
	for _, h := range proof {
		b.WriteString(h.String())
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(note)
	return b.Bytes()
}

// maxAnswer bounds the witness's answer read.
const maxAnswer = 64 << 10

func (c *Client) post(ctx context.Context, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("witness: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, c.endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read its answer: %w", ErrUnavailable, err)
	}
	return resp.StatusCode, data, nil
}

// clip is a witness's answer shortened for an error message.
func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strconv.Quote(s)
}
