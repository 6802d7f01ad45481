package cli

import (
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/status"

	explainpkg "github.com/latchhq/latch/controlplane/explain"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// explain prints the five investigation questions' answers (package
// explain), in order, from an execution's journal records.
func explain(w io.Writer, x *recordv1.Execution, hist []*recordv1.JournalEntry) {
	r := explainpkg.Explain(x, hist)
	fmt.Fprintf(w, "%s\n\n", r.Headline)
	for i, a := range r.Answers {
		fmt.Fprintf(w, "%d. %s\n", i+1, a.Question)
		for _, l := range a.Lines {
			fmt.Fprintf(w, "   %s\n", l)
		}
	}
}

// rpcError turns a gRPC status into a message for a terminal.
func rpcError(err error) error {
	if st, ok := status.FromError(err); ok {
		return fmt.Errorf("%s (%s)", st.Message(), strings.ToLower(st.Code().String()))
	}
	return err
}
