package pgkv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// fencedCode is the SQLSTATE latch_fence raises.
const fencedCode = "LF001"

func (k *KV) readLease(ctx context.Context) (*backend.Lease, error) {
	l := &backend.Lease{}
	err := k.pool.QueryRow(ctx, "SELECT holder, address, epoch, expires_at, acquired_at, renewed_at, now() FROM latch_lease WHERE id = 1").
		Scan(&l.Holder, &l.Address, &l.Epoch, &l.Expires, &l.Acquired, &l.Renewed, &l.Now)
	if err != nil {
		return nil, fmt.Errorf("store: read the lease: %w", err)
	}
	return l, nil
}

// ReadLease reads the lease row without changing it.
func (k *KV) ReadLease(ctx context.Context) (*backend.Lease, error) { return k.readLease(ctx) }

// AcquireLease takes the lease for holder for ttl when it is free or
// expired (by the database's clock), raising the epoch and recording the
// address the holder serves at, and from then on fences every Commit with
// that epoch. While another holder's lease runs it returns the current
// lease (with the database's Now) and ErrLeaseHeld naming the holder and
// the expiry.
func (k *KV) AcquireLease(ctx context.Context, holder, address string, ttl time.Duration) (*backend.Lease, error) {
	if holder == "" || ttl <= 0 {
		return nil, errors.New("store: AcquireLease needs a holder name and a positive ttl")
	}
	l := &backend.Lease{Holder: holder, Address: address}
	err := k.pool.QueryRow(ctx, `UPDATE latch_lease
		SET holder = $1, address = $3, epoch = epoch + 1, acquired_at = now(), renewed_at = now(), expires_at = now() + $2::interval
		WHERE id = 1 AND expires_at < now()
		RETURNING epoch, expires_at, acquired_at, renewed_at, now()`, holder, ttl, address).Scan(&l.Epoch, &l.Expires, &l.Acquired, &l.Renewed, &l.Now)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, rerr := k.readLease(ctx)
		if rerr != nil {
			return nil, rerr
		}
		return cur, fmt.Errorf("%w: %s holds epoch %d until %s", backend.ErrLeaseHeld, cur.Holder, cur.Epoch, cur.Expires.UTC().Format(time.RFC3339Nano))
	}
	if err != nil {
		return nil, fmt.Errorf("store: acquire the lease: %w", err)
	}
	k.epoch.Store(l.Epoch)
	return l, nil
}

// RenewLease extends the lease this backend holds to now + ttl. It returns
// ErrFenced when another replica has taken it.
func (k *KV) RenewLease(ctx context.Context, holder string, ttl time.Duration) (*backend.Lease, error) {
	epoch := k.epoch.Load()
	if epoch == 0 {
		return nil, errors.New("store: RenewLease before AcquireLease")
	}
	l := &backend.Lease{Holder: holder, Epoch: epoch}
	err := k.pool.QueryRow(ctx, `UPDATE latch_lease SET renewed_at = now(), expires_at = now() + $3::interval
		WHERE id = 1 AND holder = $1 AND epoch = $2 RETURNING expires_at, acquired_at, renewed_at`, holder, epoch, ttl).
		Scan(&l.Expires, &l.Acquired, &l.Renewed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w (epoch %d was ours)", backend.ErrFenced, epoch)
	}
	if err != nil {
		return nil, fmt.Errorf("store: renew the lease: %w", err)
	}
	return l, nil
}

// ReleaseLease gives the lease up (expires it now) so a standby need not
// wait out the ttl; commits stay fenced by the old epoch until the next
// acquisition raises it.
func (k *KV) ReleaseLease(ctx context.Context, holder string) error {
	epoch := k.epoch.Load()
	if epoch == 0 {
		return nil
	}
	_, err := k.pool.Exec(ctx, "UPDATE latch_lease SET expires_at = now() - interval '1 microsecond' WHERE id = 1 AND holder = $1 AND epoch = $2", holder, epoch)
	if err != nil {
		return fmt.Errorf("store: release the lease: %w", err)
	}
	return nil
}

// fencedErr maps latch_fence's error to ErrFenced.
func fencedErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == fencedCode {
		return fmt.Errorf("%w: %s", backend.ErrFenced, pe.Message)
	}
	return nil
}

// Epoch is the epoch this backend fences its commits with (0 before it
// acquired the lease).
func (k *KV) Epoch() int64 { return k.epoch.Load() }
