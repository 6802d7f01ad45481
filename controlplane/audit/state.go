package audit

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
)

// State checks every execution record, history and fingerprint index
// entry and stored result of the data dir against its journal (the check
// control-plane start-up runs, here always whole).
func (d *Dir) State(ctx context.Context) (*store.StateReport, error) {
	rep, err := d.st.CheckState(ctx, store.CheckAll)
	if err != nil {
		return nil, err
	}
	return rep, d.checkSecrets(ctx, rep)
}

// StageState is the progress stage VerifyAll reports while the state
// check is still reading the journal after the journal check is done.
const StageState = "checking state against the journal"

// stateProgressEvery is how often VerifyAll reports the state check's
// progress once the journal check is done.
var stateProgressEvery = 250 * time.Millisecond

// VerifyAll verifies the data dir's journal (plus any external checkpoint
// copy) and then its state against that journal, opening the dir once and
// reading the journal once for both. The two checks run side by side (the
// state check starts reading the state while the journal is still being
// read); the progress callback (when set) is called from this goroutine
// only, with StageState after the journal check while the state check
// goes on. The data dir is sound only when both reports are OK.
func VerifyAll(ctx context.Context, dataDir string, opts journal.Options) (*journal.Report, *store.StateReport, error) {
	d, err := openDir(dataDir)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	var (
		state    *store.StateReport
		stateErr error
		read     atomic.Int64 // journal records the state check has been handed
		done     = make(chan struct{})
		// ready is closed once the journal is read (readErr set when it
		// could not be).
		ready   = make(chan struct{})
		readErr error
	)
	leaves := func(fn func(int64, []byte, bool) bool) error {
		<-ready
		if readErr != nil {
			return readErr
		}
		return d.journal.leaves(func(k int64, data []byte, leaf bool) bool {
			read.Add(1)
			return fn(k, data, leaf)
		})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(done)
		state, stateErr = d.st.CheckAllFrom(ctx, leaves)
	}()
	readErr = d.read(opts.Progress)
	close(ready)
	if readErr != nil {
		cancel()
		<-done
		return nil, nil, readErr
	}
	rep, err := journal.VerifyWith(d, d.Verifier, opts)
	if err != nil {
		cancel() // the check cannot be done: the state check's verdict is not needed
	}
	if opts.Progress != nil && err == nil {
		tick := time.NewTicker(stateProgressEvery)
		for waiting := true; waiting; {
			select {
			case <-done:
				waiting = false
			case <-tick.C:
				opts.Progress(journal.Progress{Stage: StageState, Done: read.Load(), Total: d.Size()})
			}
		}
		tick.Stop()
	}
	<-done
	if err != nil {
		return nil, nil, err
	}
	if stateErr == nil {
		stateErr = d.checkSecrets(ctx, state)
	}
	if stateErr != nil {
		return rep, nil, stateErr
	}
	return rep, state, nil
}
