package shim

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCopyCapped(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		limit     int64
		want      string
		truncated bool
	}{
		{"under", "hello", 10, "hello", false},
		{"exact", "hello", 5, "hello", false},
		{"over", "hello world", 5, "hello", true},
		{"zero", "hello", 0, "", true},
		{"empty", "", 5, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			res := copyCapped(&out, io.LimitReader(strings.NewReader(tt.in), int64(len(tt.in))), tt.limit, nil)
			if out.String() != tt.want || res.truncated != tt.truncated || res.written != int64(len(tt.want)) {
				t.Errorf("copyCapped(%q, %d) = %q %+v, want %q truncated %v", tt.in, tt.limit, out.String(), res, tt.want, tt.truncated)
			}
		})
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:min(1, len(p))]) }

func TestCopyCappedDrainsPastTheCap(t *testing.T) {
	src := strings.NewReader(strings.Repeat("x", 100))
	var out bytes.Buffer
	res := copyCapped(&out, oneByteReader{src}, 10, nil)
	if res.written != 10 || !res.truncated || src.Len() != 0 {
		t.Errorf("copyCapped = %+v, %d bytes unread; want 10 written, truncated, all drained", res, src.Len())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestCopyCappedWriteErrorMarksTruncated(t *testing.T) {
	res := copyCapped(failingWriter{}, strings.NewReader("abc"), 10, nil)
	if !res.truncated || res.written != 0 {
		t.Errorf("copyCapped to a failing writer = %+v, want truncated with 0 written", res)
	}
}

func TestCopyCappedRedacts(t *testing.T) {
	const secret = "Zq9-planted-SECRET-4471"
	spec := &Spec{Env: []string{"PATH=/bin", "TOKEN=" + secret, "OTHER=" + secret + "-not-named"}, SecretEnv: []string{"TOKEN"}}
	red := spec.Redactor()
	tests := []struct {
		name      string
		in        string
		limit     int64
		oneByte   bool
		want      string
		truncated bool
	}{
		{name: "one read", in: "a " + secret + " b", limit: 100, want: "a [REDACTED] b"},
		{name: "split over one-byte reads", in: "a " + secret + " b " + secret, limit: 100, oneByte: true, want: "a [REDACTED] b [REDACTED]"},
		{name: "cap counts redacted bytes", in: secret + secret, limit: 15, want: "[REDACTED][REDA", truncated: true},
		{name: "untruncated end in a secret's start is kept", in: "x " + secret[:6], limit: 100, oneByte: true, want: "x " + secret[:6]},
		{name: "a held-back start that is no secret is released", in: "0123456789" + secret[:8] + strings.Repeat("y", 50), limit: 12, oneByte: true, want: "0123456789Zq", truncated: true},
		{name: "output ending in a secret's start that the cap cuts", in: strings.Repeat("y", 20) + secret[:8], limit: 25, oneByte: true, want: strings.Repeat("y", 20), truncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tt.in)
			if tt.oneByte {
				r = oneByteReader{r}
			}
			var out bytes.Buffer
			res := copyCapped(&out, r, tt.limit, red)
			if out.String() != tt.want || res.truncated != tt.truncated || res.written != int64(len(tt.want)) {
				t.Errorf("copyCapped = %q %+v, want %q truncated %v", out.String(), res, tt.want, tt.truncated)
			}
		})
	}
}

func TestSpecRedactorOnlyNamedEntries(t *testing.T) {
	spec := &Spec{Env: []string{"A=first-secret", "B=second-value", "C=x=with=equals"}, SecretEnv: []string{"A", "C"}}
	got := spec.Redactor().String("first-secret second-value x=with=equals")
	if got != "[REDACTED] second-value [REDACTED]" {
		t.Errorf("Redactor().String = %q", got)
	}
	if r := (&Spec{Env: spec.Env}).Redactor(); !r.Empty() {
		t.Error("a spec naming no secret env has a redactor")
	}
}

// TestCopyCappedRedactsEncodedForms: the output copy the host keeps has a
// secret env value printed in any encoded form (JSON's `\/`, \u002F,
// URL-escaped, base64, HTML entities) replaced, also over one-byte reads.
func TestCopyCappedRedactsEncodedForms(t *testing.T) {
	const secret = "a/b-secret-123"
	red := (&Spec{Env: []string{"TOKEN=" + secret}, SecretEnv: []string{"TOKEN"}}).Redactor()
	for _, enc := range []string{
		secret, `a\/b-secret-123`, `a\u002Fb-secret-123`, "a%2Fb-secret-123",
		"YS9iLXNlY3JldC0xMjM=", "YS9iLXNlY3JldC0xMjM", "a&#x2F;b-secret-123", "a&#47;b-secret-123",
	} {
		var out bytes.Buffer
		res := copyCapped(&out, oneByteReader{strings.NewReader("x " + enc + " y\n")}, 1<<10, red)
		if out.String() != "x [REDACTED] y\n" || res.truncated {
			t.Errorf("copyCapped(%q) = %q %+v, want %q", enc, out.String(), res, "x [REDACTED] y\n")
		}
	}
}
