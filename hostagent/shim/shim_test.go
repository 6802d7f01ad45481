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
			res := copyCapped(&out, io.LimitReader(strings.NewReader(tt.in), int64(len(tt.in))), tt.limit)
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
	res := copyCapped(&out, oneByteReader{src}, 10)
	if res.written != 10 || !res.truncated || src.Len() != 0 {
		t.Errorf("copyCapped = %+v, %d bytes unread; want 10 written, truncated, all drained", res, src.Len())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestCopyCappedWriteErrorMarksTruncated(t *testing.T) {
	res := copyCapped(failingWriter{}, strings.NewReader("abc"), 10)
	if !res.truncated || res.written != 0 {
		t.Errorf("copyCapped to a failing writer = %+v, want truncated with 0 written", res)
	}
}
