package cli

import (
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/status"

	explainpkg "github.com/latchhq/latch/controlplane/explain"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// explain prints an execution's story (package explain): the five
// investigation questions' answers, in order, then the steps they rest on,
// the evidence a decision rests on and what can be done now. The CLI has no
// catalog, so it says nothing of the idempotency key (the console does).
func explain(w io.Writer, x *recordv1.Execution, hist []*recordv1.JournalEntry) {
	r := explainpkg.Tell(x, hist, explainpkg.Contract{})
	fmt.Fprintf(w, "%s\n\n", r.Headline)
	for i, a := range r.Answers {
		fmt.Fprintf(w, "%d. %s\n", i+1, a.Question)
		for _, l := range a.Lines {
			fmt.Fprintf(w, "   %s\n", l)
		}
	}
	if len(r.Sends) > 0 {
		fmt.Fprintf(w, "\nSends:\n")
		for _, s := range r.Sends {
			fmt.Fprintf(w, "   %d. %s at %s (journal #%d): %s\n", s.N, s.Kind, s.Time, s.Index, s.Answer)
		}
	}
	if len(r.Queries) > 0 {
		fmt.Fprintf(w, "\nRecovery queries:\n")
		for _, q := range r.Queries {
			fmt.Fprintf(w, "   %s %s (journal #%d): %s; %s\n", q.Time, q.Kind, q.Index, q.Saw, q.Verdict)
		}
	}
	if len(r.Trail) > 0 {
		fmt.Fprintf(w, "\nApprovals:\n")
		for _, d := range r.Trail {
			fmt.Fprintf(w, "   %s %s: %s\n", d.Time, d.What, d.Reason)
		}
	}
	fmt.Fprintf(w, "\nEvidence:\n   %s\n", r.Sent)
	for _, line := range []string{r.Answered, r.LastQuery, r.Retries} {
		if line != "" {
			fmt.Fprintf(w, "   %s\n", line)
		}
	}
	if len(r.Next) > 0 {
		fmt.Fprintf(w, "\nWhat to do:\n")
		for _, a := range r.Next {
			fmt.Fprintf(w, "   - %s\n", a.Says)
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
