package audit

import (
	"context"

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
// copy) and then its state against that journal, opening the dir once. The
// data dir is sound only when both reports are OK.
func VerifyAll(ctx context.Context, dataDir string, opts journal.Options) (*journal.Report, *store.StateReport, error) {
	d, err := open(dataDir, opts.Progress)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	rep, err := journal.VerifyWith(d, d.Verifier, opts)
	if err != nil {
		return nil, nil, err
	}
	state, err := d.State(ctx)
	if err != nil {
		return rep, nil, err
	}
	return rep, state, nil
}
