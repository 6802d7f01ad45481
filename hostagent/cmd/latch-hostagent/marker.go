package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/client"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

const dialTimeout = 5 * time.Second

// markerCmd holds one parsed marker subcommand.
type markerCmd struct {
	verb   string
	id     string
	op     string
	result string
	reason string
	limit  int
	socket string
}

func parseMarker(args []string, stderr io.Writer) (markerCmd, error) {
	if len(args) == 0 {
		return markerCmd{}, errors.New("marker: missing subcommand (begin, complete, fail, status, list)")
	}
	c := markerCmd{verb: args[0]}
	fs := flag.NewFlagSet("marker "+c.verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.socket, "socket", socketDefault(), "the agent's unix socket")
	switch c.verb {
	case "begin":
		fs.StringVar(&c.op, "op", "", "name of the operation (recorded on the marker)")
	case "complete":
		fs.StringVar(&c.result, "result", "", "result to record, as JSON")
	case "fail":
		fs.StringVar(&c.reason, "reason", "", "why it failed (required)")
	case "status":
	case "list":
		fs.IntVar(&c.limit, "limit", 0, "at most this many markers (0: all)")
	default:
		return c, fmt.Errorf("marker: unknown subcommand %q", c.verb)
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return c, err
	}
	if c.verb == "list" {
		if len(pos) > 0 {
			return c, fmt.Errorf("marker list: unexpected argument %q", pos[0])
		}
		return c, nil
	}
	switch len(pos) {
	case 0:
		c.id = os.Getenv("LATCH_EXECUTION_ID")
		if c.id == "" {
			return c, fmt.Errorf("marker %s: no ID given and LATCH_EXECUTION_ID is not set", c.verb)
		}
	case 1:
		c.id = pos[0]
	default:
		return c, fmt.Errorf("marker %s: unexpected argument %q", c.verb, pos[1])
	}
	if c.verb == "fail" && c.reason == "" {
		return c, errors.New("marker fail: --reason is required")
	}
	if c.result != "" && !json.Valid([]byte(c.result)) {
		return c, errors.New("marker complete: --result is not valid JSON")
	}
	return c, nil
}

func marker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseMarker(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "latch-hostagent %v\n\n%s", err, usage)
		}
		return hostagent.ExitUsage
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	cl, closer, err := client.Dial(dctx, c.socket)
	if err != nil {
		fmt.Fprintf(stderr, "latch-hostagent marker %s: %v (socket %s)\n", c.verb, err, c.socket)
		return hostagent.ExitUnreachable
	}
	defer closer.Close()
	return c.do(ctx, cl, stdout, stderr)
}

func (c markerCmd) do(ctx context.Context, cl hostagentv1.HostAgentClient, stdout, stderr io.Writer) int {
	switch c.verb {
	case "begin":
		resp, err := cl.MarkerBegin(ctx, &hostagentv1.MarkerBeginRequest{ExecutionId: c.id, Op: c.op})
		if err != nil {
			return c.fail(err, stderr)
		}
		printMarker(stdout, resp.GetMarker())
		if resp.GetBegun() {
			return hostagent.ExitOK
		}
		code := exitForState(resp.GetMarker().GetState())
		fmt.Fprintf(stderr, "latch-hostagent marker begin: %s is already %s\n", c.id, stateName(resp.GetMarker().GetState()))
		return code
	case "complete":
		resp, err := cl.MarkerComplete(ctx, &hostagentv1.MarkerCompleteRequest{ExecutionId: c.id, ResultJson: c.result})
		if err != nil {
			return c.fail(err, stderr)
		}
		printMarker(stdout, resp.GetMarker())
	case "fail":
		resp, err := cl.MarkerFail(ctx, &hostagentv1.MarkerFailRequest{ExecutionId: c.id, Reason: c.reason})
		if err != nil {
			return c.fail(err, stderr)
		}
		printMarker(stdout, resp.GetMarker())
	case "status":
		resp, err := cl.Status(ctx, &hostagentv1.StatusRequest{ExecutionId: c.id})
		if err != nil {
			return c.fail(err, stderr)
		}
		printMarker(stdout, resp.GetMarker())
	case "list":
		resp, err := cl.ListMarkers(ctx, &hostagentv1.ListMarkersRequest{Limit: int32(c.limit)})
		if err != nil {
			return c.fail(err, stderr)
		}
		for _, m := range resp.GetMarkers() {
			printMarker(stdout, m)
		}
	}
	return hostagent.ExitOK
}

// exitForState maps an existing script marker to the exit code of a refused begin.
func exitForState(s hostagentv1.MarkerState) int {
	switch s {
	case hostagentv1.MarkerState_MARKER_STATE_COMPLETED:
		return hostagent.ExitAlreadyCompleted
	case hostagentv1.MarkerState_MARKER_STATE_FAILED:
		return hostagent.ExitFailedBefore
	default:
		return hostagent.ExitInProgress
	}
}

func stateName(s hostagentv1.MarkerState) string {
	switch s {
	case hostagentv1.MarkerState_MARKER_STATE_BEGUN:
		return "begun (in progress)"
	case hostagentv1.MarkerState_MARKER_STATE_COMPLETED:
		return "completed"
	case hostagentv1.MarkerState_MARKER_STATE_FAILED:
		return "failed"
	default:
		return s.String()
	}
}

func (c markerCmd) fail(err error, stderr io.Writer) int {
	fmt.Fprintf(stderr, "latch-hostagent marker %s: %s\n", c.verb, status.Convert(err).Message())
	switch client.Reason(err) {
	case hostagent.ReasonAlreadyCompleted:
		return hostagent.ExitAlreadyCompleted
	case hostagent.ReasonInProgress:
		return hostagent.ExitInProgress
	case hostagent.ReasonFailedBefore:
		return hostagent.ExitFailedBefore
	}
	switch status.Code(err) {
	case codes.NotFound:
		return hostagent.ExitNoMarker
	case codes.InvalidArgument:
		return hostagent.ExitUsage
	case codes.Unavailable:
		return hostagent.ExitUnreachable
	}
	return hostagent.ExitRuntime
}

func printMarker(w io.Writer, m *hostagentv1.Marker) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		fmt.Fprintf(w, "{\"error\":%q}\n", err.Error())
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}
