package explain

import (
	"fmt"
	"strings"
)

// lastQuery is the sentence of the last recovery query, "" when there
// was none: its own sentence, never run on from the target's answer.
func lastQuery(qs []Query) string {
	if len(qs) == 0 {
		return ""
	}
	q := qs[len(qs)-1]
	return fmt.Sprintf("Last recovery query at %s: %s", q.Time, sentence(q.Saw))
}

// retries says, when calls attached to the execution (the agent's
// retries), that they did and that none of them was sent to the target:
// an attached call gets the execution's answer; only recovery re-sends.
func retries(calls []Call, sends []Send) string {
	attached := 0
	for _, c := range calls {
		if strings.HasSuffix(c.Call, "(attached)") {
			attached++
		}
	}
	if attached == 0 {
		return ""
	}
	what := "1 retry of the agent attached to this execution"
	if attached > 1 {
		what = fmt.Sprintf("%d retries of the agent attached to this execution", attached)
	}
	resent := 0
	for _, s := range sends {
		if s.Kind != "dispatch" {
			resent++
		}
	}
	switch {
	case len(sends) == 0:
		return what + "; nothing was sent to the target for them (nothing has been sent at all yet)."
	case resent == 0:
		return what + "; nothing was re-sent: the target got the request once, and the retries get its answer."
	}
	return fmt.Sprintf("%s; no retry was sent to the target (the %d re-send(s) were recovery's, journaled as such).", what, resent)
}

// sentence ends s with a full stop unless it ends a sentence already.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}
