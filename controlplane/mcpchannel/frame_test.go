package mcpchannel

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestFrameReader: lines within the cap pass unchanged; an oversized one is
// replaced by an error answer for its id wherever the id is (a TypeScript
// server writes it after the result), and the tap learns what it was.
func TestFrameReader(t *testing.T) {
	big := strings.Repeat("y", 300)
	for _, tc := range []struct {
		name    string
		line    string
		wantID  string // "" when the frame is dropped
		isError bool
		rpcErr  bool
	}{
		{"id first", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`, "7", false, false},
		{"id last", `{"result":{"content":[{"type":"text","text":"` + big + `"}],"isError":true},"jsonrpc":"2.0","id":"latch-3"}`, "latch-3", true, false},
		{"escaped quotes and nested ids", `{"result":{"id":99,"content":[{"text":"\"id\":5,` + big + `"}]},"id":12}`, "12", false, false},
		{"error", `{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"` + big + `"}}`, "4", false, true},
		{"no id", `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big + `"}}`, "", false, false},
	} {
		for _, bufSize := range []int{16, 64 << 10} {
			t.Run(fmt.Sprintf("%s/buffer %d", tc.name, bufSize), func(t *testing.T) {
				tp := newTap()
				key := map[string]string{"7": "x7", "latch-3": "x3", "12": "x12", "4": "x4"}
				for k, v := range key {
					tp.calls[k] = v
				}
				in := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + tc.line + "\n" + `{"jsonrpc":"2.0","id":2,"result":{}}` + "\n"
				var dropped int
				fr := newFrameReader(io.NopCloser(strings.NewReader(in)), 200, 50, tp, func(int64, string) { dropped++ })
				fr.r = bufio.NewReaderSize(strings.NewReader(in), bufSize) // 16: the line arrives in pieces
				out, err := io.ReadAll(fr)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
				if tc.wantID == "" {
					if len(lines) != 2 || dropped != 1 {
						t.Fatalf("frameReader(%s) = %q (dropped %d), want the frame dropped", tc.name, out, dropped)
					}
					return
				}
				if len(lines) != 3 || lines[0] != `{"jsonrpc":"2.0","id":1,"result":{}}` || lines[2] != `{"jsonrpc":"2.0","id":2,"result":{}}` {
					t.Fatalf("frameReader(%s) = %q, want the short lines unchanged around a replacement", tc.name, out)
				}
				msg, err := jsonrpc.DecodeMessage([]byte(lines[1]))
				resp, ok := msg.(*jsonrpc.Response)
				if err != nil || !ok || idKey(resp.ID) != tc.wantID || resp.Error == nil || !strings.Contains(resp.Error.Error(), "frame cap") {
					t.Fatalf("replacement = %s (%v), want an error answer for id %s", lines[1], err, tc.wantID)
				}
				o := tp.takeOversize(key[tc.wantID])
				if o == nil || o.size != int64(len(tc.line)) || !bytes.Equal(o.head, []byte(tc.line[:50])) || o.isError != tc.isError || o.rpcErr != tc.rpcErr {
					t.Errorf("oversize = %+v, want size %d, the first 50 bytes, isError %v, error %v", o, len(tc.line), tc.isError, tc.rpcErr)
				}
			})
		}
	}
}
