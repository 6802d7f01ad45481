package telemetry

import recordv1 "github.com/latchhq/latch/proto/latch/record/v1"

// Executions is the number of executions in st, as latch_executions says
// it (counted from the store at start, then kept by every commit): the
// console's counts by state, without walking the state index per page.
func (t *Telemetry) Executions(st recordv1.State) int64 { return t.count(st) }
