package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/devstack"
	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// devInfo is what `latch dev` leaves in its data dir for `latch demo`.
type devInfo = devstack.Info

// runDemo drives a running `latch dev` through the story of a dropped
// connection: the target accepted the work, the agent never saw the answer,
// re-issued the call with a new request id, and Latch attached it to the
// original execution instead of deploying twice.
func runDemo(ctx context.Context, env *Env, args []string) error {
	var t target
	fs := newFlagSet(env, "demo", "demo [--data DIR]")
	t.flags(fs, env)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	raw, err := os.ReadFile(datadir.DevInfo(t.data))
	if err != nil {
		return fmt.Errorf("no `latch dev` runs with data dir %s (%v): start `latch dev` first, or pass --data", t.data, err)
	}
	var info devInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return fmt.Errorf("%s: %w", datadir.DevInfo(t.data), err)
	}
	if info.Catalog != "" && info.Catalog != devstack.CatalogExample {
		return fmt.Errorf("latch demo needs latch dev's example catalog (its deploy_release tool and the demo target), but this latch dev runs with --catalog %s: restart latch dev without --catalog (a separate --data keeps your data apart) and run latch demo again", info.Catalog)
	}
	cp, closeFn, err := t.dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	w := env.Stdout
	step := func(n int, format string, a ...any) { fmt.Fprintf(w, "\n%d. %s\n", n, fmt.Sprintf(format, a...)) }
	version := time.Now().UTC().Format("2006.0102.150405")
	callArgs := map[string]any{"service": "checkout", "version": version}
	before, err := demoEffects(ctx, info.DemoURL)
	if err != nil {
		return err
	}

	step(1, "An agent calls deploy_release(service=checkout, version=%s) through Latch's MCP front.", version)
	fmt.Fprintln(w, "   The demo target accepts the deployment at once but answers only after 3 s.")
	if err := demoDelay(ctx, info.DemoURL, 3*time.Second); err != nil {
		return err
	}
	defer demoDelay(context.Background(), info.DemoURL, 0) //nolint:errcheck // best effort reset

	step(2, "The connection drops after the target accepted the work (the agent gives up after 1 s).")
	firstCtx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = demoCall(firstCtx, info, callArgs)
	cancel()
	if err == nil {
		return errors.New("the first call was expected to be cut off, but it returned; is the demo target delay honoured?")
	}
	fmt.Fprintf(w, "   the agent saw: %v\n", shortErr(err))
	list, err := cp.List(ctx, &controlplanev1.ListRequest{Tool: "deploy_release", Limit: 1})
	if err != nil || len(list.GetExecutions()) == 0 {
		return fmt.Errorf("the execution is not in the control plane: %v", err)
	}
	first := list.GetExecutions()[0]
	fmt.Fprintf(w, "   Latch recorded execution %s, state %s, dispatched at %s\n", first.GetId(), lifecycle.Name(first.GetState()), ts(first.GetDispatchedAt()))

	step(3, "The agent re-issues the call: a new connection, a new JSON-RPC request id, the same intent.")
	res, err := demoCall(ctx, info, callArgs)
	if err != nil {
		return fmt.Errorf("re-issued call: %w", err)
	}
	fmt.Fprintf(w, "   disposition %v, execution %v, state %v, target_status %v\n   note: %v\n",
		res["disposition"], res["execution_id"], res["state"], res["target_status"], res["note"])

	step(4, "Latch attached the retry to the original execution and returned its stored result.")
	if res["execution_id"] != first.GetId() {
		return fmt.Errorf("the retry got execution %v, not the original %s", res["execution_id"], first.GetId())
	}
	after, err := demoEffects(ctx, info.DemoURL)
	if err != nil {
		return err
	}
	deployed := after["release"] - before["release"]
	step(5, "The demo target performed %d deployment(s) for this story.", deployed)
	if deployed != 1 {
		return fmt.Errorf("the target shows %d deployments, want exactly 1", deployed)
	}

	step(6, "latch exec explain %s", first.GetId())
	// The front records the delivery just after it wrote the answer of
	// step 3: wait (a few seconds at most) for that record, so the story
	// is told from it, and say so when it has not landed.
	var got *controlplanev1.GetResponse
	for deadline := time.Now().Add(demoDeliveryWait); ; {
		got, err = cp.Get(ctx, &controlplanev1.GetRequest{ExecutionId: first.GetId()})
		if err != nil {
			return rpcError(err)
		}
		if lifecycle.DeliveryOf(got.GetExecution()) == recordv1.Delivery_DELIVERY_DELIVERED || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	x := got.GetExecution()
	if d := lifecycle.DeliveryOf(x); d == recordv1.Delivery_DELIVERY_DELIVERED {
		fmt.Fprintf(w, "   The front recorded the answer of step 3 as delivered at %s.\n\n", ts(x.GetDeliveredAt()))
	} else {
		fmt.Fprintf(w, "   The front's delivery record has not landed after %s (%s so far); the story tells what is recorded now.\n\n", demoDeliveryWait, lifecycle.DescribeDelivery(d))
	}
	hist, err := cp.History(ctx, &controlplanev1.HistoryRequest{ExecutionId: first.GetId()})
	if err != nil {
		return rpcError(err)
	}
	explain(w, x, hist.GetEntries())
	return nil
}

// demoDeliveryWait bounds the wait for the front's delivery record.
const demoDeliveryWait = 5 * time.Second

// demoCall makes one tools/call on a fresh MCP connection, as a re-issuing
// agent would, and returns the result's structured content.
func demoCall(ctx context.Context, info devInfo, args map[string]any) (map[string]any, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "latch-demo", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: info.MCPURL, HTTPClient: &http.Client{Transport: info.Bearer(http.DefaultTransport)}, MaxRetries: -1}
	sess, err := client.Connect(ctx, tr, nil)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: args})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func demoDelay(ctx context.Context, base string, d time.Duration) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/_demo/delay?ms=%d", base, d.Milliseconds()), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("demo target at %s: %w", base, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("demo target refused the delay: %s", resp.Status)
	}
	return nil
}

func demoEffects(ctx context.Context, base string) (map[string]int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_demo/effects", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("demo target at %s: %w", base, err)
	}
	defer resp.Body.Close()
	var out map[string]int
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("demo target effects: %w", err)
	}
	return out, nil
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "\n"); i > 0 {
		s = s[:i]
	}
	return s
}
