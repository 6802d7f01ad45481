package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store"
)

// The key rows against the journal (store/secretcheck.go): the bytes of
// each key row as loaded are held against the row's latest journal
// record before the control plane serves with them, and recorded on
// first use when the store has none (a store written before the records;
// a key file made at this start). The vault document is held by the
// vault itself, through Config.VaultWitness.

// checkSecrets holds the key rows loaded (ks.rows) against the journal.
// Run on the active replica (fenced on PostgreSQL): it records a row on
// first use.
func checkSecrets(ctx context.Context, log hclog.Logger, st *store.Store, ks *keySet) error {
	names := make([]string, 0, len(ks.rows))
	for row := range ks.rows {
		names = append(names, row)
	}
	slices.Sort(names)
	for _, row := range names {
		err := st.CheckSecret(row, ks.rows[row])
		if errors.Is(err, store.ErrNotFound) {
			if err := st.RecordSecret(ctx, row, ks.rows[row], time.Now()); err != nil {
				return fmt.Errorf("server: record the %s row in the journal: %w", row, err)
			}
			log.Named("server").Info("recorded the key row in the journal on first use; a later change to it stops the control plane", "row", row)
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %w (the %s row the control plane signs or fingerprints with is not the one journaled: not serving with it)", ErrStateMismatch, err, row)
		}
	}
	return nil
}
