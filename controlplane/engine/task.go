package engine

import (
	"context"
	"fmt"
	"time"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// taskRecordWait bounds how long recording a target's task ID may take when
// the engine is stopping: the write is worth finishing (it is what lets the
// next start ask the target), but a stop must not hang on it.
const taskRecordWait = 5 * time.Second

// taskRecorder is Call.RecordTask for execution id: it journals the target's
// task ID (kind "target_task") on the execution while it is dispatched (or
// outcome_unknown, for a recovery re-send). It runs on a context that
// survives the engine's stop for up to taskRecordWait: a dispatch that got a
// handle while the control plane was stopping should still leave it behind.
func (e *Engine) taskRecorder(ctx context.Context, id string) func(string) error {
	return func(taskID string) error {
		if taskID == "" {
			return fmt.Errorf("engine: the target gave an empty task ID for %s", id)
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskRecordWait)
		defer cancel()
		x := &recordv1.Execution{Id: id}
		_, err := e.journalIf(wctx, x, recordv1.EntryKind_ENTRY_KIND_TARGET_TASK, "the target accepted the call as task "+taskID, func(cur *recordv1.Execution) error {
			if err := requireState(recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_OUTCOME_UNKNOWN)(cur); err != nil {
				return err
			}
			cur.TargetTaskId = taskID
			return nil
		})
		if err != nil {
			return fmt.Errorf("engine: recording task %s of %s: %w", taskID, id, err)
		}
		return nil
	}
}
