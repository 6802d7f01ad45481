package mcpchannel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Oversized answers.
//
// A stdio upstream's messages are lines of JSON. The SDK bounds the bytes it
// buffers for one (mcp.IOTransport.MaxLineLength) and ends the connection
// when a line passes the bound: the call whose answer it was then looked
// unanswered (Unknown), a read_only or idempotency_key tool was sent again,
// got the same answer, and the session died again, without end. An answer
// that arrived is an observed answer, even when it cannot be kept whole.
//
// frameReader sits between the process's stdout and the SDK. A line within
// MaxFrame passes unchanged. A longer line is read to its end and never
// handed on: its first bytes are kept (for the stored result), its
// top-level "id" is found by a scan that buffers nothing else (a TypeScript
// server writes "id" after "result"), and the SDK is handed in its place a
// JSON-RPC error answer for that id, so that every waiter ends, whatever
// asked (tools/list, a raw request of the tap). For a plain tools/call the
// channel finds what the frame was (oversize, by the execution ID) and
// stores it as the observed answer: truncated, with the reason.

// DefaultMaxFrame is the largest line read from a stdio upstream
// (mcp.DefaultMaxLineLength, the SDK's own bound).
const DefaultMaxFrame = mcp.DefaultMaxLineLength

// codeOversize is the code of the error answer put in an oversized frame's
// place (JSON-RPC internal error: the answer exists and could not be read).
const codeOversize = jsonrpc.CodeInternalError

// oversize is what is known of a frame over the cap.
type oversize struct {
	size    int64  // its length in bytes, without the newline
	head    []byte // its first bytes
	isError bool   // result.isError was true
	rpcErr  bool   // it carried a top-level "error"
}

// frameReader hands the SDK the upstream's lines, an oversized one replaced
// (see above). It is read by one goroutine (the SDK's read loop).
type frameReader struct {
	r       *bufio.Reader
	c       io.Closer
	max     int
	keep    int
	tap     *tap
	onDrop  func(size int64, why string) // an oversized line that cannot be answered (no id)
	pending []byte
	err     error
}

func newFrameReader(r io.ReadCloser, maxFrame, keep int, tp *tap, onDrop func(int64, string)) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), c: r, max: maxFrame, keep: keep, tap: tp, onDrop: onDrop}
}

func (f *frameReader) Close() error { return f.c.Close() }

func (f *frameReader) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.pending, f.err = f.next()
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// next reads one line: the line itself when it is within the cap, the
// replacement when not.
func (f *frameReader) next() ([]byte, error) {
	var line []byte
	for {
		chunk, err := f.r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil && len(line)-1 > f.max {
			return f.oversized(line[:len(line)-1], true)
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err // EOF (a last line without its newline) or a read error
		}
		if len(line) > f.max {
			return f.oversized(line, false)
		}
	}
}

// oversized reads the rest of a line that passed the cap (unless complete)
// and returns the line to hand on in its place (nil when there is none).
func (f *frameReader) oversized(start []byte, complete bool) ([]byte, error) {
	sc := &idScan{}
	head := bytes.Clone(start[:min(len(start), f.keep)])
	size := int64(len(start))
	sc.feed(start)
	for !complete {
		chunk, err := f.r.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		size += int64(len(chunk))
		if len(head) < f.keep {
			head = append(head, chunk[:min(len(chunk), f.keep-len(head))]...)
		}
		sc.feed(chunk)
		if err == nil {
			complete = true
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			// The line was cut: no answer arrived whole. The connection ends
			// with it, and the call is Unknown, as for any cut.
			return nil, err
		}
	}
	info := &oversize{size: size, head: head, isError: sc.isError, rpcErr: sc.sawError}
	id, err := sc.jsonrpcID()
	if err != nil {
		f.onDrop(size, err.Error())
		return nil, nil
	}
	msg := fmt.Sprintf("latch: the upstream's answer is %d bytes, over the %d-byte frame cap; it was read and not kept", size, f.max)
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeOversize, Message: msg}})
	if err != nil {
		f.onDrop(size, err.Error())
		return nil, nil
	}
	f.tap.sawOversize(idKey(id), info)
	return append(out, '\n'), nil
}

// idScan follows one JSON object byte by byte, keeping only its top-level
// "id" value, whether it has a top-level "error", and whether
// result.isError is true.
type idScan struct {
	depth     int
	stack     [3]byte // container kinds at depths 1..3
	inStr     bool
	esc       bool
	expectKey bool
	keyCap    bool
	key       []byte
	keys      [3]string // the current key at depths 1 and 2
	valCap    bool      // capturing the value of keys[valDepth]
	valDepth  int
	val       []byte
	id        []byte
	sawError  bool
	isError   bool
}

const scanKeyMax, scanValMax = 32, 256

func (s *idScan) feed(b []byte) {
	for _, c := range b {
		s.byte1(c)
	}
}

func (s *idScan) byte1(c byte) {
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.keyCap {
				s.keyCap = false
				if s.depth <= 2 {
					s.keys[s.depth] = string(s.key)
				}
				return
			}
		}
		if s.keyCap && len(s.key) < scanKeyMax {
			s.key = append(s.key, c)
		}
		s.capture(c)
		return
	}
	switch c {
	case ' ', '\t', '\r', '\n':
		return
	case '"':
		s.inStr = true
		if s.expectKey {
			s.expectKey, s.keyCap, s.key = false, true, s.key[:0]
			return
		}
	case ':':
		if s.depth == 1 && s.keys[1] == "error" {
			s.sawError = true
		}
		if (s.depth == 1 && s.keys[1] == "id") || (s.depth == 2 && s.keys[1] == "result" && s.keys[2] == "isError") {
			s.valCap, s.valDepth, s.val = true, s.depth, s.val[:0]
		}
		return
	case ',':
		s.endValue()
		if s.depth >= 1 && s.depth <= len(s.stack) && s.stack[s.depth-1] == '{' {
			s.expectKey = true
		}
		return
	case '{', '[':
		s.depth++
		if s.depth <= len(s.stack) {
			s.stack[s.depth-1] = c
		}
		s.expectKey = c == '{'
	case '}', ']':
		s.endValue()
		if s.depth <= 2 && s.depth >= 1 {
			s.keys[s.depth] = ""
		}
		s.depth--
		s.expectKey = false
	}
	s.capture(c)
}

func (s *idScan) capture(c byte) {
	if s.valCap && len(s.val) < scanValMax {
		s.val = append(s.val, c)
	}
}

func (s *idScan) endValue() {
	if !s.valCap || s.depth != s.valDepth || s.inStr {
		return
	}
	s.valCap = false
	switch s.valDepth {
	case 1:
		s.id = bytes.Clone(s.val)
	case 2:
		s.isError = string(s.val) == "true"
	}
}

// jsonrpcID is the frame's id.
func (s *idScan) jsonrpcID() (jsonrpc.ID, error) {
	if len(s.id) == 0 {
		return jsonrpc.ID{}, errors.New("the frame has no top-level id")
	}
	var v any
	if err := json.Unmarshal(s.id, &v); err != nil {
		return jsonrpc.ID{}, fmt.Errorf("the frame's id %q does not parse: %w", clip(string(s.id), 64), err)
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil || !id.IsValid() {
		return jsonrpc.ID{}, fmt.Errorf("the frame's id %q is not a request ID", clip(string(s.id), 64))
	}
	return id, nil
}
