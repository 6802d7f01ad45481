package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	receiptv1 "github.com/latchhq/latch/proto/latch/receipt/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/receipt"
)

// ToolReceipt is the built-in tool that returns an execution's receipt.
const ToolReceipt = "latch_receipt"

// attachReceipt adds exec's receipt to a tool call's answer at rest: in
// structuredContent.receipt, and as one line in a second text block, for
// the many clients that drop structuredContent. rc is the receipt the
// control plane sent with the execution; without one it is asked for
// (the execution came to rest through a watch). A receipt that cannot be
// had leaves the answer as it is: what the execution did does not depend
// on it, and latch_receipt asks again.
func (f *Front) attachReceipt(ctx context.Context, cc callContext, res *mcp.CallToolResult, exec *recordv1.Execution, rc *receiptv1.Receipt) {
	if f.cfg.NoReceipts || exec == nil || lifecycle.Pending(exec.GetState()) {
		return
	}
	cr, ok := res.StructuredContent.(CallResult)
	if !ok {
		return
	}
	if rc == nil {
		g, err := f.cfg.ControlPlane.Get(ctx, &controlplanev1.GetRequest{ExecutionId: exec.GetId(), Actor: cc.actor, Credential: cc.credential, Receipt: true})
		if err != nil || g.GetReceipt() == nil {
			f.log.Debug("no receipt", "execution_id", exec.GetId(), "error", err)
			return
		}
		rc = g.GetReceipt()
	}
	r := receipt.FromProto(rc)
	cr.Receipt = r
	res.StructuredContent = cr
	res.Content = append(res.Content, &mcp.TextContent{Text: r.Line()})
}

// addReceiptTool registers latch_receipt.
func (f *Front) addReceiptTool(srv *mcp.Server, fixedActor string) {
	no := false
	srv.AddTool(&mcp.Tool{
		Name: ToolReceipt,
		Description: "Return the receipt of one of your executions: its journal record, an inclusion proof and a checkpoint signed by Latch's journal key, " +
			"which anyone can check offline (latch receipt verify FILE --key PUB, or Latch's receipt.mjs). Use it for an execution answered without one.",
		InputSchema: json.RawMessage(`{"type":"object","required":["execution_id"],"additionalProperties":false,"properties":{"execution_id":{"type":"string","description":"An execution_id (act_…) returned by an earlier call."}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
	}, f.receiptHandler(fixedActor))
}

func (f *Front) receiptHandler(fixedActor string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cc, id, err := f.executionArg(req, fixedActor)
		if err != nil {
			return handlerError(err)
		}
		g, err := f.cfg.ControlPlane.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id, Actor: cc.actor, Credential: cc.credential, Receipt: true})
		if err != nil {
			return f.rpcToolError(id, err), nil
		}
		if g.GetReceipt() == nil {
			return toolError(fmt.Sprintf("latch has no receipt for execution %s right now (its control plane did not issue one: see its log); try again in a moment.", id)), nil
		}
		r := receipt.FromProto(g.GetReceipt())
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: r.Line()}, &mcp.TextContent{Text: string(receipt.Marshal(r))}},
			StructuredContent: map[string]any{"receipt": r},
		}, nil
	}
}
