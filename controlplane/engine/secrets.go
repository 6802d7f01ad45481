package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Secret arguments across restarts.
//
// A tool's secret arguments (fingerprint.secret) are kept in clear only in
// memory (Engine.secrets). So that an execution accepted before a restart
// can still be sent after it, the whole argument map is also sealed by
// Config.Sealer (AEAD under a key derived from the vault, bound to the
// execution ID) and stored at k/<id> in the same commit that accepts the
// execution. It is deleted when the execution can no longer be sent
// (completed, needs_review, cancelled, rejected, or not_executed with its
// dispatches used up). Nothing in clear reaches the disk.
//
// After a restart, dispatch and recovery open the box when they need the
// arguments. While the vault is locked they cannot: the execution waits
// (authorized, or outcome_unknown with its next recovery postponed) and
// nothing is cancelled; ResumeSealed, called when the vault is unlocked,
// takes them up again. A box that does not open with an unlocked vault (a
// vault created anew) cancels the execution with that reason, as does a
// missing box (an execution accepted without a Sealer).

// Sealer seals data at rest. Implemented by *vault.ArgumentSealer.
type Sealer interface {
	// Ready reports whether Seal and Open can work now (the vault is
	// unlocked).
	Ready() bool
	// Seal returns plain sealed and bound to ad (the execution ID).
	Seal(ad, plain []byte) ([]byte, error)
	// Open returns the plaintext of a box sealed with the same ad.
	Open(ad, sealed []byte) ([]byte, error)
}

var (
	errSecretsGone   = errors.New("the tool's secret arguments are no longer available (held in memory only, and the control plane restarted before dispatch); call the tool again")
	errSecretsLocked = errors.New("the tool's secret arguments are sealed with the vault's key and the vault is locked; the execution waits for latch vault unlock")
)

// sealWait is how long recovery postpones an execution whose sealed
// arguments wait for the vault (ResumeSealed takes it up at unlock).
const sealWait = time.Minute

// sealArguments seals args for execution id, or returns nil when there is no
// Sealer or it is not ready (the arguments then live in memory only, as
// before sealing existed, and the reason is logged).
func (e *Engine) sealArguments(id string, args map[string]any) []byte {
	if e.cfg.Sealer == nil {
		return nil
	}
	plain, err := json.Marshal(args)
	if err != nil {
		e.log.Warn("secret arguments kept in memory only: they do not encode", "execution_id", id, "error", err)
		return nil
	}
	defer clear(plain)
	if !e.cfg.Sealer.Ready() {
		e.log.Warn("secret arguments kept in memory only: the vault is locked, so they cannot be sealed; a restart before dispatch cancels the execution", "execution_id", id)
		return nil
	}
	box, err := e.cfg.Sealer.Seal([]byte(id), plain)
	if err != nil {
		e.log.Warn("secret arguments kept in memory only: sealing failed", "execution_id", id, "error", err)
		return nil
	}
	return box
}

// unsealArguments opens the sealed arguments of x and keeps them in memory
// for the rest of its dispatch (and for redaction).
func (e *Engine) unsealArguments(x *recordv1.Execution) (map[string]any, error) {
	if e.cfg.Sealer == nil {
		return nil, errSecretsGone
	}
	box, err := e.st.SealedArguments(x.GetId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, errSecretsGone
	}
	if err != nil {
		return nil, fmt.Errorf("sealed secret arguments cannot be read: %w", err)
	}
	if !e.cfg.Sealer.Ready() {
		e.waitForUnlock(x.GetId())
		return nil, errSecretsLocked
	}
	plain, err := e.cfg.Sealer.Open([]byte(x.GetId()), box)
	if err != nil {
		if !e.cfg.Sealer.Ready() {
			e.waitForUnlock(x.GetId())
			return nil, errSecretsLocked
		}
		return nil, fmt.Errorf("the sealed secret arguments do not open with this vault (%v); call the tool again", err)
	}
	defer clear(plain)
	var args map[string]any
	if err := json.Unmarshal(plain, &args); err != nil {
		return nil, fmt.Errorf("the sealed secret arguments do not decode; call the tool again")
	}
	e.secretsMu.Lock()
	e.secrets[x.GetId()] = args
	e.secretsMu.Unlock()
	return args, nil
}

// waitsForVault reports whether id waits for ResumeSealed.
func (e *Engine) waitsForVault(id string) bool {
	e.secretsMu.Lock()
	defer e.secretsMu.Unlock()
	_, ok := e.sealedWaiting[id]
	return ok
}

func (e *Engine) waitForUnlock(id string) {
	e.secretsMu.Lock()
	e.sealedWaiting[id] = struct{}{}
	e.secretsMu.Unlock()
}

// ResumeSealed takes up the executions that waited for the vault to open
// their sealed arguments: authorized ones are dispatched, outcome_unknown
// ones are recovered now. Call it when the vault is unlocked.
func (e *Engine) ResumeSealed() {
	e.secretsMu.Lock()
	ids := make([]string, 0, len(e.sealedWaiting))
	for id := range e.sealedWaiting {
		ids = append(ids, id)
	}
	clear(e.sealedWaiting)
	e.secretsMu.Unlock()
	for _, id := range ids {
		x, err := e.st.Execution(id)
		if err != nil {
			continue
		}
		switch x.GetState() {
		case recordv1.State_STATE_AUTHORIZED, recordv1.State_STATE_NOT_EXECUTED:
			e.log.Info("vault unlocked: dispatching the execution that waited for its sealed arguments", "execution_id", id)
			e.startDispatch(id)
		case recordv1.State_STATE_OUTCOME_UNKNOWN:
			e.hurry(x) // now, not at the postponed NextRecoveryAt
		}
	}
}

// sealedGone reports whether an execution moving to state to can no longer
// be sent, so its sealed arguments are deleted in the same commit.
func sealedGone(to recordv1.State) bool {
	switch to {
	case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NEEDS_REVIEW,
		recordv1.State_STATE_CANCELLED, recordv1.State_STATE_REJECTED:
		return true
	}
	return false
}

// hasSecrets reports whether x's tool marks arguments secret.
func (e *Engine) hasSecrets(x *recordv1.Execution) bool {
	t, ok := e.cfg.Catalog.Tools[x.GetTool()]
	return ok && len(t.Fingerprint.Secret) > 0
}

// forgetSecrets drops x's secret arguments from memory and their sealed box
// from the store: nothing will send it again.
func (e *Engine) forgetSecrets(ctx context.Context, id string) {
	e.dropSecrets(id)
	if e.cfg.Sealer == nil {
		return
	}
	if err := e.st.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		tx.DeleteSealedArguments(id)
		return nil
	}); err != nil {
		e.log.Debug("sealed secret arguments not deleted", "execution_id", id, "error", err)
	}
}
