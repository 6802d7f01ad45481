package audit

import (
	"context"
	"sync"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
)

// State checks every execution record, history and fingerprint index
// entry and stored result of the data dir against its journal (the check
// control-plane start-up runs, here always whole).
func (d *Dir) State(ctx context.Context) (*store.StateReport, error) {
	return d.st.CheckState(ctx, store.CheckAll)
}

// VerifyAll verifies the data dir's journal (plus any external checkpoint
// copy) and then its state against that journal, opening the dir once and
// reading the journal once for both. The two checks run side by side. The
// data dir is sound only when both reports are OK.
func VerifyAll(ctx context.Context, dataDir string, opts journal.Options) (*journal.Report, *store.StateReport, error) {
	d, err := open(dataDir, opts.Progress)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	var (
		state    *store.StateReport
		stateErr error
		wg       sync.WaitGroup
	)
	wg.Go(func() { state, stateErr = d.st.CheckAllFrom(ctx, d.journal.leaves) })
	rep, err := journal.VerifyWith(d, d.Verifier, opts)
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	if stateErr != nil {
		return rep, nil, stateErr
	}
	return rep, state, nil
}
