// Package redact replaces secret values in text a target sent back (an HTTP
// body, a command's output) with "[REDACTED]", in one piece (Redactor.Bytes)
// or as a stream (Writer), with the same result either way.
//
// It is the one redactor: who imports it is the control plane's engine
// (secret arguments, in the results it stores), the HTTP dispatcher and
// the MCP channel (vault credentials, in observations, reasons and logs)
// and the host agent's shim (the output copy it keeps on the target host).
// It imports nothing of any of them, so the host agent's import rule holds.
//
// The rules, shared by both:
//
//   - every string leaf of a secret value is a needle (an object-valued
//     secret is redacted field by field), and so are numbers; booleans and
//     null carry nothing secret (Needles);
//   - a credential's values (an HTTP credential's Secrets: a token, a
//     password and its "user:pass" pair, a session token, an access token
//     fetched) are needles too (Secrets);
//   - each needle is also looked for in every form a target may echo it
//     in (Forms): JSON-escaped in the ways JSON writers differ (`\/`,
//     \u00XX in either case, \u-escaped non-ASCII), URL query- and
//     path-escaped, base64 in both alphabets with and without padding (and
//     inside a longer base64 text), HTML entities, named and numeric;
//   - one minimum length, MinLen bytes: a shorter secret argument is left
//     alone (it would match ordinary text, and a value that short is
//     guessable anyway), and so is a needle found inside Mark (redacting
//     would grow the text each time it is applied); a credential value
//     that short cannot be redacted and is refused instead (Secrets
//     returns ErrTooShort and the credential is never presented), so no
//     credential is ever stored unredacted;
//   - every byte of every occurrence of a needle is replaced: overlapping
//     occurrences (of one needle, "abab" in "ababab", or of two, "xabc" and
//     "abcdef" in "xabcdef") are replaced as one span by one Mark;
//     replaced text is not searched again;
//   - when a text was cut (an output cap), a tail that is the start of a
//     needle is cut too, so a truncated text never ends in half a secret.
package redact

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"slices"
	"strconv"
)

// MinLen is the shortest needle that is redacted, and the shortest
// credential value that may be presented (Secrets). Four bytes: shorter
// strings occur by chance in ordinary text (a 3-byte value would mangle a
// body), and every real token, password or key is far longer.
const MinLen = 4

// Mark replaces a secret value.
const Mark = "[REDACTED]"

// Needles appends to out the byte strings that stand for secret value v: a
// string, a float64 (a JSON number) or a JSON object or array of them, as
// encoding/json decodes into any.
func Needles(out [][]byte, v any) [][]byte {
	switch tv := v.(type) {
	case string:
		if len(tv) < MinLen {
			return out
		}
		for _, f := range Forms(tv) {
			out = append(out, []byte(f))
		}
	case float64:
		if s := strconv.FormatFloat(tv, 'f', -1, 64); len(s) >= MinLen {
			out = append(out, []byte(s))
		}
		if b, err := json.Marshal(tv); err == nil && len(b) >= MinLen {
			out = append(out, b)
		}
	case map[string]any:
		for _, e := range tv {
			out = Needles(out, e)
		}
	case []any:
		for _, e := range tv {
			out = Needles(out, e)
		}
	}
	return out
}

// Redactor replaces a fixed set of needles. The zero value and nil redact
// nothing. It is safe for concurrent use; a Writer is not.
type Redactor struct {
	needles [][]byte  // longest first, distinct
	first   [256]bool // first bytes of the needles
	firsts  []byte    // the same, as a list
	// byFirst holds, per first byte, the needles that start with it
	// (longest first), and pairs the first two bytes of every needle: a
	// secret has many forms (Forms), and most positions of a text where
	// one could start are ruled out by these before any comparison.
	byFirst [256][][]byte
	pairs   [1 << 16 / 64]uint64
}

// New returns a Redactor for needles (usually built with Needles), or nil
// when none is worth redacting. It keeps its own copy of the needles.
func New(needles [][]byte) *Redactor {
	var keep [][]byte
	for _, n := range needles {
		if len(n) >= MinLen && !bytes.Contains([]byte(Mark), n) {
			keep = append(keep, bytes.Clone(n))
		}
	}
	if len(keep) == 0 {
		return nil
	}
	slices.SortFunc(keep, func(p, q []byte) int {
		if c := cmp.Compare(len(q), len(p)); c != 0 {
			return c
		}
		return bytes.Compare(p, q)
	})
	keep = slices.CompactFunc(keep, bytes.Equal)
	r := &Redactor{needles: keep}
	for _, n := range keep {
		if !r.first[n[0]] {
			r.first[n[0]] = true
			r.firsts = append(r.firsts, n[0])
		}
		r.byFirst[n[0]] = append(r.byFirst[n[0]], n)
		pair := int(n[0])<<8 | int(n[1]) // MinLen >= 2
		r.pairs[pair/64] |= 1 << (pair % 64)
	}
	return r
}

// next returns the first index of p where a needle may start, or len(p).
func (r *Redactor) next(p []byte) int {
	if len(r.firsts) <= 2 {
		// IndexByte is vectorised: far faster than a loop over each byte.
		best := len(p)
		for _, c := range r.firsts {
			if i := bytes.IndexByte(p[:best], c); i >= 0 {
				best = i
			}
		}
		return best
	}
	for i, c := range p {
		if !r.first[c] {
			continue
		}
		if i+1 == len(p) {
			return i
		}
		if pair := int(c)<<8 | int(p[i+1]); r.pairs[pair/64]&(1<<(pair%64)) != 0 {
			return i
		}
	}
	return len(p)
}

// Empty reports whether r redacts nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.needles) == 0 }

// Bytes returns b with every needle replaced by Mark; cut says b was
// truncated, and then a tail that is the start of a needle is dropped. b is
// never modified; when nothing changes, b itself is returned.
func (r *Redactor) Bytes(b []byte, cut bool) []byte {
	if r.Empty() || len(b) == 0 {
		return b
	}
	var out bytes.Buffer
	w := &Writer{r: r, w: &out}
	_, _ = w.Write(b)
	_ = w.Flush(cut)
	if bytes.Equal(out.Bytes(), b) {
		return b
	}
	return out.Bytes()
}

// String is Bytes for a string that was not cut.
func (r *Redactor) String(s string) string {
	if r.Empty() || s == "" {
		return s
	}
	return string(r.Bytes([]byte(s), false))
}

// match returns the length of the longest needle at the start of p, 0 when
// none is there, or -1 when p is too short to tell (p is a proper prefix of
// a longer needle and more text may complete it).
func (r *Redactor) match(p []byte, final bool) int {
	if len(p) == 0 || !r.first[p[0]] {
		return 0
	}
	if len(p) >= 2 {
		if pair := int(p[0])<<8 | int(p[1]); r.pairs[pair/64]&(1<<(pair%64)) == 0 {
			return 0
		}
	}
	for _, n := range r.byFirst[p[0]] {
		if len(n) <= len(p) {
			if bytes.HasPrefix(p, n) {
				return len(n)
			}
		} else if !final && bytes.HasPrefix(n, p) {
			return -1
		}
	}
	return 0
}

// Writer redacts a stream: what it writes to the underlying writer is what
// Redactor.Bytes returns for everything written to it, however the stream
// was split into writes (a secret split over two reads of a pipe is still
// replaced). It holds back at most the longest needle's length minus one
// byte, the part of the text that could still become a secret; Flush writes
// it out at the end. Not safe for concurrent use.
type Writer struct {
	r       *Redactor
	w       io.Writer
	pending []byte
	covered int // bytes at the start of pending inside a span already replaced
	err     error
}

// NewWriter returns a Writer that redacts with r into w. With an empty r it
// still works, and holds nothing back.
func NewWriter(w io.Writer, r *Redactor) *Writer { return &Writer{r: r, w: w} }

// Write redacts p into the underlying writer and reports len(p) unless the
// underlying writer failed (then that error, now and for every later call).
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.r.Empty() {
		if _, err := w.w.Write(p); err != nil {
			w.err = err
			return 0, err
		}
		return len(p), nil
	}
	w.pending = append(w.pending, p...)
	if err := w.drain(false, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Held returns how many bytes written so far are held back.
func (w *Writer) Held() int { return len(w.pending) }

// Flush writes out what was held back, as the end of the text; cut says the
// text was truncated (a tail that is the start of a needle is then dropped).
// Writing after Flush starts a new text.
func (w *Writer) Flush(cut bool) error {
	if w.err != nil {
		return w.err
	}
	if w.r.Empty() {
		return nil // Write held nothing back
	}
	return w.drain(true, cut)
}

// drain writes out every byte of pending that no later text can turn into
// part of a secret (all of it when final). A needle found starts a span
// replaced by one Mark; the span grows to the end of every needle that
// starts inside it ("xabc" and "abcdef" in "xabcdef", "abab" in "ababab"),
// so no byte of any occurrence is left. What is held back starts at the
// first position still undecided, so it stays shorter than the longest
// needle; covered says how much of it the current span already replaced.
func (w *Writer) drain(final, cut bool) error {
	p := w.pending
	var out []byte
	cover := w.covered // p[:cover] is inside a span whose Mark is written
	lit := cover       // start of the literal run not yet copied to out
	i := 0
	for i < len(p) {
		if i >= cover {
			i += w.r.next(p[i:])
			if i == len(p) {
				break
			}
		}
		n := w.r.match(p[i:], final)
		if n < 0 {
			break // the rest may still become a secret: hold it
		}
		if n > 0 {
			if i >= cover { // a new span
				out = append(out, p[lit:i]...)
				out = append(out, Mark...)
			}
			cover = max(cover, i+n)
			lit = cover
		}
		i++
	}
	if lit < i {
		out = append(out, p[lit:i]...)
	}
	if final && cut {
		out = w.r.cutTail(out)
	}
	rest := copy(w.pending, p[i:])
	w.pending = w.pending[:rest]
	w.covered = max(cover-i, 0)
	if final {
		w.covered = 0 // a new text starts after Flush
	}
	if len(out) == 0 {
		return nil
	}
	if _, err := w.w.Write(out); err != nil {
		w.err = err
		return err
	}
	return nil
}

// cutTail drops a tail of b that is the start of a needle (for each needle
// in turn, the longest such start).
func (r *Redactor) cutTail(b []byte) []byte {
	for _, n := range r.needles {
		for k := min(len(n)-1, len(b)); k >= 1; k-- {
			if bytes.HasSuffix(b, n[:k]) {
				b = b[:len(b)-k]
				break
			}
		}
	}
	return b
}
