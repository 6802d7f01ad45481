package bench

import (
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/internal/loadgen"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/receipt"
)

// receiptStats is what the receipt path's answers carried: their sizes
// with and without the receipt, and the checkpoints the receipts were
// proven against (one signature each).
type receiptStats struct {
	mu              sync.Mutex
	with, without   int64 // SubmitResponse bytes (protobuf) on the receipt and durable paths
	nWith, nWithout int64
	receiptJSON     int64 // the receipt's canonical JSON bytes (structuredContent.receipt)
	checkpoints     map[string]bool
}

func newReceiptStats() *receiptStats { return &receiptStats{checkpoints: map[string]bool{}} }

func (s *receiptStats) observe(resp *controlplanev1.SubmitResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(proto.Size(resp))
	r := resp.GetReceipt()
	if r == nil {
		s.without += n
		s.nWithout++
		return
	}
	s.with += n
	s.nWith++
	s.receiptJSON += int64(len(receipt.Marshal(receipt.FromProto(r))))
	s.checkpoints[r.GetCheckpoint()] = true
}

// print reports the receipt path against the durable one.
func (s *receiptStats) print(out io.Writer, r loadgen.Result, rc benchCPU, d loadgen.Result, dc benchCPU) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nWith == 0 || s.nWithout == 0 || r.Ops == 0 || d.Ops == 0 {
		return
	}
	extraCPU := rc.total().Seconds()/float64(r.Ops) - dc.total().Seconds()/float64(d.Ops)
	fmt.Fprintf(out, "Receipts (receipt against durable): p50 %s, rate %s, CPU/call %s (%+.0fµs); answer %d bytes against %d (%.2fx), the receipt %d bytes as JSON; %d checkpoints signed for %d receipts (%.3f signatures per call).\n",
		overP50(r, d, false), ratio(r, d), cpuRatio(rc, r, dc, d), extraCPU*1e6,
		s.with/s.nWith, s.without/s.nWithout, float64(s.with/s.nWith)/float64(s.without/s.nWithout),
		s.receiptJSON/s.nWith, len(s.checkpoints), s.nWith, float64(len(s.checkpoints))/float64(s.nWith))
}
