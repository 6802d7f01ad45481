package redact

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func needlesOf(vs ...any) [][]byte {
	var out [][]byte
	for _, v := range vs {
		out = Needles(out, v)
	}
	return out
}

func TestBytes(t *testing.T) {
	tests := []struct {
		name   string
		secret any
		in     string
		cut    bool
		want   string
	}{
		{name: "plain", secret: "s3cr3t-Value", in: `{"echo":"s3cr3t-Value"} and s3cr3t-Values`, want: `{"echo":"[REDACTED]"} and [REDACTED]s`},
		{name: "escaped forms", secret: `a"b/c <d>&é`,
			in:   `j1 a\"b/c \u003cd\u003e\u0026é j2 a\"b/c <d>&é q a%22b%2Fc+%3Cd%3E%26%C3%A9 p a%22b%2Fc%20%3Cd%3E&%C3%A9`,
			want: `j1 [REDACTED] j2 [REDACTED] q [REDACTED] p [REDACTED]`},
		{name: "object secret, field by field", secret: map[string]any{"user": "svc-account", "pass": "hunter22", "pin": 1234567.0, "on": true},
			in: `user svc-account pass hunter22 pin 1234567 on true`, want: `user [REDACTED] pass [REDACTED] pin [REDACTED] on true`},
		{name: "array secret", secret: []any{"first-one", "second-one"}, in: `first-one,second-one`, want: `[REDACTED],[REDACTED]`},
		{name: "short secret left alone", secret: "abc", in: `abcabc`, want: `abcabc`},
		{name: "inside the mark left alone", secret: "DACT", in: `REDACTED`, want: `REDACTED`},
		{name: "adjacent occurrences", secret: "TOPSECRET99", in: `TOPSECRET99TOPSECRET99`, want: `[REDACTED][REDACTED]`},
		{name: "overlapping occurrences: one span, nothing left", secret: "abab", in: `ababab`, want: `[REDACTED]`},
		{name: "truncated text ending in part of the secret", secret: "TOPSECRET99", in: `ok TOPSECRET99 then TOPSEC`, cut: true, want: `ok [REDACTED] then `},
		{name: "untruncated text ending in part of the secret keeps it", secret: "TOPSECRET99", in: `then TOPSEC`, want: `then TOPSEC`},
		{name: "nothing to find", secret: "TOPSECRET99", in: `nothing here`, want: `nothing here`},
		{name: "empty", secret: "TOPSECRET99", in: ``, want: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(needlesOf(tt.secret))
			in := []byte(tt.in)
			got := string(r.Bytes(in, tt.cut))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Bytes (-want +got):\n%s", diff)
			}
			if string(in) != tt.in {
				t.Errorf("Bytes modified its input: %q", in)
			}
			if !tt.cut {
				if again := r.String(got); again != got {
					t.Errorf("redacting twice changed the text: %q then %q", got, again)
				}
			}
		})
	}
}

func TestLongestNeedleWins(t *testing.T) {
	// "secret-token" starts with the needle "secret": the longer one is
	// replaced whole, never broken up by the shorter.
	r := New([][]byte{[]byte("secret"), []byte("secret-token")})
	if got := r.String("a secret-token b secret c"); got != "a [REDACTED] b [REDACTED] c" {
		t.Errorf("String = %q", got)
	}
}

// TestOverlappingNeedles: every byte of every occurrence is replaced, also
// where occurrences overlap (one span, one mark), whatever the writes.
func TestOverlappingNeedles(t *testing.T) {
	tests := []struct {
		needles []string
		in      string
		want    string
	}{
		{[]string{"xabc", "abcdef"}, "xabcdef", "[REDACTED]"},
		{[]string{"xabc", "abcdef"}, "1 xabcdef 2", "1 [REDACTED] 2"},
		{[]string{"aaaa"}, "aaaaaa", "[REDACTED]"},
		{[]string{"abab"}, "ababab.", "[REDACTED]."},
		{[]string{"abcd", "cdef", "efgh"}, "abcdefgh", "[REDACTED]"},
		{[]string{"abcd"}, "abcdabcd", "[REDACTED][REDACTED]"}, // adjacent, not overlapping
	}
	for _, tt := range tests {
		var ns [][]byte
		for _, n := range tt.needles {
			ns = append(ns, []byte(n))
		}
		r := New(ns)
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("needles %q: String(%q) = %q, want %q", tt.needles, tt.in, got, tt.want)
		}
		if got := reference(r, []byte(tt.in)); got != tt.want {
			t.Errorf("needles %q: reference(%q) = %q, want %q (the test's reference is wrong)", tt.needles, tt.in, got, tt.want)
		}
		for i := 0; i <= len(tt.in); i++ {
			if got, _ := writeChunks(t, r, []byte(tt.in), []int{i}, false); got != tt.want {
				t.Errorf("needles %q, split at %d: %q, want %q", tt.needles, i, got, tt.want)
			}
		}
	}
}

// reference is the redaction rule written plainly: every occurrence of
// every needle is an interval; intervals that overlap merge; each merged
// interval becomes one Mark.
func reference(r *Redactor, in []byte) string {
	type iv struct{ lo, hi int }
	var ivs []iv
	for _, n := range r.needles {
		for i := 0; i+len(n) <= len(in); i++ {
			if bytes.Equal(in[i:i+len(n)], n) {
				ivs = append(ivs, iv{i, i + len(n)})
			}
		}
	}
	slices.SortFunc(ivs, func(a, b iv) int { return a.lo - b.lo })
	var out strings.Builder
	pos := 0
	for k := 0; k < len(ivs); {
		lo, hi := ivs[k].lo, ivs[k].hi
		for k++; k < len(ivs) && ivs[k].lo < hi; k++ {
			hi = max(hi, ivs[k].hi)
		}
		out.Write(in[pos:lo])
		out.WriteString(Mark)
		pos = hi
	}
	out.Write(in[pos:])
	return out.String()
}

func TestEmptyRedactor(t *testing.T) {
	for _, r := range []*Redactor{nil, New(nil), New([][]byte{[]byte("ab"), []byte(Mark)})} {
		if !r.Empty() {
			t.Errorf("New of nothing worth redacting is not empty")
		}
		in := []byte("TOPSECRET99")
		if got := r.Bytes(in, true); &got[0] != &in[0] {
			t.Errorf("an empty redactor copied its input")
		}
		var out bytes.Buffer
		w := NewWriter(&out, r)
		_, _ = w.Write([]byte("TOPSEC"))
		if out.String() != "TOPSEC" {
			t.Errorf("an empty redactor's writer held %q back", "TOPSEC")
		}
	}
}

// writeChunks feeds in to a Writer split at the given offsets and returns
// what reached the underlying writer, and what had reached it after each
// write.
func writeChunks(t *testing.T, r *Redactor, in []byte, splits []int, cut bool) (string, []string) {
	t.Helper()
	var out bytes.Buffer
	w := NewWriter(&out, r)
	var seen []string
	prev := 0
	for _, s := range append(splits, len(in)) {
		if n, err := w.Write(in[prev:s]); err != nil || n != s-prev {
			t.Fatalf("Write = %d, %v", n, err)
		}
		seen = append(seen, out.String())
		prev = s
	}
	if err := w.Flush(cut); err != nil {
		t.Fatal(err)
	}
	return out.String(), seen
}

// TestWriterSplitsAtEveryBoundary splits a text holding secrets at every
// offset, and at every pair of offsets: the stream's result is always that
// of the whole text, and no prefix of it written so far (what a reader of
// the output file sees mid-run) holds the secret or its first half.
func TestWriterSplitsAtEveryBoundary(t *testing.T) {
	const secret = "Zq9-planted-SECRET-4471"
	r := New(needlesOf(secret, "other/s e"))
	texts := []string{
		"one " + secret + " two " + secret + secret + "\nother%2Fs%20e end",
		secret,
		"tail " + secret[:10],
	}
	for _, text := range texts {
		in := []byte(text)
		for _, cut := range []bool{false, true} {
			want := string(r.Bytes(in, cut))
			if strings.Contains(want, secret) {
				t.Fatalf("Bytes(%q) = %q still holds the secret", text, want)
			}
			for i := 0; i <= len(in); i++ {
				for j := i; j <= len(in); j++ {
					got, seen := writeChunks(t, r, in, []int{i, j}, cut)
					if got != want {
						t.Fatalf("split at %d,%d (cut %v): %q, want %q", i, j, cut, got, want)
					}
					for _, s := range seen {
						if strings.Contains(s, secret[:8]) {
							t.Fatalf("split at %d,%d: output so far %q holds (part of) the secret", i, j, s)
						}
					}
				}
			}
		}
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestWriterKeepsTheFirstError(t *testing.T) {
	w := NewWriter(&failWriter{}, New(needlesOf("TOPSECRET99")))
	if _, err := w.Write([]byte("hello world")); err == nil {
		t.Fatal("Write to a failing writer succeeded")
	}
	if _, err := w.Write([]byte("more")); err == nil {
		t.Error("Write after a failure succeeded")
	}
	if err := w.Flush(false); err == nil {
		t.Error("Flush after a failure succeeded")
	}
}

// FuzzWriterChunks: for any text, any needles and any split into writes,
// the stream equals Bytes of the whole text, and with needles made of
// characters the mark does not hold no needle is left in the result.
func FuzzWriterChunks(f *testing.F) {
	f.Add([]byte("xx abcd abcdabcd ab"), "abcd", "cdab", "", uint64(0x0305), false)
	f.Add([]byte("aaaaaaaaaa"), "aaaa", "aaaaa", "", uint64(0x010101), true)
	f.Add([]byte("s3cr3t s3cr3ts3cr3t s3cr"), "s3cr3t", "3ts3", "cr3t", uint64(0x07), true)
	f.Add([]byte("x"), "a", "b", "", uint64(0), true) // nothing to redact, cut
	f.Fuzz(func(t *testing.T, in []byte, n1, n2, n3 string, splits uint64, cut bool) {
		if len(in) > 4096 || len(n1) > 64 || len(n2) > 64 || len(n3) > 64 {
			return
		}
		r := New([][]byte{[]byte(n1), []byte(n2), []byte(n3)})
		want := r.Bytes(in, cut)
		// Split points: each byte of splits is a chunk length (0 ends).
		var offs []int
		pos := 0
		for s := splits; s != 0; s >>= 8 {
			pos += int(s & 0xff)
			if pos > len(in) {
				break
			}
			offs = append(offs, pos)
		}
		got, _ := writeChunks(t, r, in, offs, cut)
		if got != string(want) {
			t.Fatalf("chunks %v: %q, want %q", offs, got, want)
		}
		if r.Empty() {
			return
		}
		if !cut {
			if ref := reference(r, in); got != ref {
				t.Fatalf("result %q, want %q (every occurrence replaced, overlaps as one span)", got, ref)
			}
		}
		clean := func(s string) bool { return !strings.ContainsAny(s, Mark) }
		for _, n := range []string{n1, n2, n3} {
			if len(n) >= MinLen && clean(n) && strings.Contains(got, n) {
				t.Fatalf("result %q still holds needle %q", got, n)
			}
		}
	})
}

// BenchmarkWriter streams 1 MiB of log-like text in 32 KiB writes (the
// shim's read size) through a redactor of one secret's forms, against
// the same stream with nothing to redact.
func BenchmarkWriter(b *testing.B) {
	line := []byte("2026-12-01T14:00:00Z INFO migrate: applied step 42 of 97 to table accounts (3 rows)\n")
	text := bytes.Repeat(line, (1<<20)/len(line))
	for _, bc := range []struct {
		name string
		r    *Redactor
	}{{"none", nil}, {"one secret", New(Needles(nil, `Zq9-planted/SECRET "4471"`))}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				w := NewWriter(io.Discard, bc.r)
				for off := 0; off < len(text); off += 32 << 10 {
					_, _ = w.Write(text[off:min(off+32<<10, len(text))])
				}
				_ = w.Flush(false)
			}
		})
	}
}
