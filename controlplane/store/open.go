package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
)

// ErrStoreSpec is returned by OpenKV for a --store value that names no
// backend.
var ErrStoreSpec = errors.New("store: --store takes a PostgreSQL connection string")

// OpenKV opens the backend a --store value names: empty for the Badger
// store in badgerDir (the default), else a PostgreSQL URL
// (postgres://user@host/db?...) or libpq key/value string ("host=a,b
// dbname=latch target_session_attrs=read-write"). A PostgreSQL database
// missing migrations is migrated first; one migrated by a newer latch is
// refused.
func OpenKV(ctx context.Context, spec, badgerDir string, log hclog.Logger) (KV, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	switch {
	case spec == "":
		return OpenBadger(badgerDir, BadgerOptions{Logger: log.Named("badger")})
	case IsPostgresURL(spec):
		return OpenPostgres(ctx, spec, PostgresOptions{Logger: log.Named("postgres"), Migrate: true})
	}
	return nil, fmt.Errorf("%w (postgres://user@host:5432/db or \"host=... dbname=...\"), not %q; leave --store out for the embedded Badger store in DATA/db", ErrStoreSpec, spec)
}
