package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// standbyName is the standby's application_name, which
// synchronous_standby_names names in synchronous mode.
const standbyName = "latch_standby"

// Pair is a primary and its streaming standby, each a server of its own
// (not the shared one), made for one test that fails the primary over.
type Pair struct {
	Primary *Server
	Standby *Server
	// Sync is whether the primary waits for the standby to flush every
	// commit (synchronous_standby_names names it, synchronous_commit=on):
	// then a commit the primary acknowledged survives its loss.
	Sync bool
	// DB is the database the test uses, created before the standby was
	// cloned, so it exists on both.
	DB string
}

// StartPair starts a primary (initdb, postgres) and a streaming standby
// cloned from it with pg_basebackup, waits until the standby streams, and,
// with sync, makes it the primary's synchronous standby. Both are stopped
// by PID and removed when tb ends. It skips tb like Shared when the
// binaries are absent outside CI.
func StartPair(tb testing.TB, sync bool) *Pair {
	tb.Helper()
	bin, err := binDir()
	if err != nil {
		if os.Getenv("CI") != "" && os.Getenv("CI") != "false" {
			tb.Fatalf("pgtest: CI is set and %v", err)
		}
		tb.Skipf("pgtest: skipping the PostgreSQL tests: %v", err)
	}
	primary, err := Start(bin)
	if err != nil {
		tb.Fatalf("pgtest: primary: %v", err)
	}
	tb.Cleanup(primary.Stop)
	p := &Pair{Primary: primary, Sync: sync, DB: "latch"}
	if err := primary.exec("CREATE DATABASE " + p.DB); err != nil {
		tb.Fatalf("pgtest: create database on the primary: %v\n%s", err, primary.Log())
	}
	standby, err := primary.cloneStandby()
	if err != nil {
		tb.Fatalf("pgtest: standby: %v", err)
	}
	tb.Cleanup(standby.Stop)
	p.Standby = standby
	if err := primary.waitStreaming(30 * time.Second); err != nil {
		tb.Fatalf("pgtest: %v\nprimary log:\n%s\nstandby log:\n%s", err, primary.Log(), standby.Log())
	}
	if sync {
		if err := primary.exec("ALTER SYSTEM SET synchronous_standby_names = '" + standbyName + "'"); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		if err := primary.exec("SELECT pg_reload_conf()"); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		if err := primary.waitSyncState("sync", 30*time.Second); err != nil {
			tb.Fatalf("pgtest: %v\n%s", err, primary.Log())
		}
	}
	return p
}

// MultiHostDSN is the key/value connection string that lists both
// servers, primary first, with target_session_attrs=read-write: a client
// reaches whichever is the writable primary, and finds the promoted
// standby after a failover.
func (p *Pair) MultiHostDSN() string {
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=latch dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=2",
		p.Primary.port, p.Standby.port, p.DB)
}

// cloneStandby takes a base backup of s into a new directory and runs it
// as a hot standby streaming from s, on a free port.
func (s *Server) cloneStandby() (*Server, error) {
	dir, err := os.MkdirTemp("", "latch-pgtest-standby-")
	if err != nil {
		return nil, err
	}
	if s.cred != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	bb := command(s.cred, tool(s.bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "latch",
		"-D", data, "-X", "stream", "-c", "fast", "--no-sync")
	if out, err := bb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_basebackup from port %d: %v\n%s", s.port, err, out)
	}
	// standby.signal makes it a standby; primary_conninfo (on the command
	// line, so no file edit) says where it streams from and under which
	// name the primary's synchronous_standby_names knows it.
	sig, err := os.Create(filepath.Join(data, "standby.signal"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	sig.Close()
	if s.cred != nil {
		if err := os.Chown(sig.Name(), int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=latch application_name=%s", s.port, standbyName)
	var lastErr error
	for range 3 {
		st, err := startServer(s.cred, s.bin, dir, data, 0, "-c", "primary_conninfo="+conninfo, "-c", "hot_standby=on")
		if err == nil {
			return st, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// tool finds one of PostgreSQL's client programs: in bin, else next to
// the file bin/postgres links to (initdb and postgres may be links on PATH
// into the real directory, without the rest).
func tool(bin, name string) string {
	p := filepath.Join(bin, name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(bin, "postgres")); err == nil {
		return filepath.Join(filepath.Dir(real), name)
	}
	return p
}

// query runs one query returning one text value on the server's postgres
// database.
func (s *Server) query(sql string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URLFor("postgres"))
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	var v string
	err = c.QueryRow(ctx, sql).Scan(&v)
	return v, err
}

// waitStreaming waits until s has a walsender streaming to the standby.
func (s *Server) waitStreaming(bound time.Duration) error {
	return s.waitSyncState("", bound)
}

// waitSyncState waits until the standby streams from s and, unless want is
// empty, its sync_state is want.
func (s *Server) waitSyncState(want string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	var last string
	var lastErr error
	for time.Now().Before(deadline) {
		v, err := s.query("SELECT coalesce(string_agg(state || '/' || sync_state, ','), '') FROM pg_stat_replication WHERE application_name = '" + standbyName + "'")
		last, lastErr = v, err
		if err == nil && strings.HasPrefix(v, "streaming/") && (want == "" || v == "streaming/"+want) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the standby is not streaming (want sync_state %q) after %s: pg_stat_replication says %q, %v", want, bound, last, lastErr)
}

// Kill SIGKILLs the server's postmaster by its PID and waits for it: the
// abrupt loss of a database host. Its backends notice their parent's death
// and exit, closing every client connection. The directory stays until
// Stop (which then only removes it).
func (s *Server) Kill() {
	s.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // it may have exited
	<-s.exit
}

// Exited reports whether the server's postmaster has exited.
func (s *Server) Exited() bool {
	select {
	case <-s.exit:
		return true
	default:
		return false
	}
}

// Promote ends recovery on a standby (pg_promote, waiting up to 30s): it
// becomes a writable primary on a new timeline.
func (s *Server) Promote() error {
	v, err := s.query("SELECT pg_promote(true, 30)::text")
	if err != nil {
		return fmt.Errorf("pgtest: pg_promote on port %d: %w\n%s", s.port, err, s.Log())
	}
	if v != "true" {
		return fmt.Errorf("pgtest: pg_promote on port %d returned %s (not promoted within 30s)\n%s", s.port, v, s.Log())
	}
	return nil
}

// InRecovery reports whether the server is a standby (pg_is_in_recovery).
func (s *Server) InRecovery() (bool, error) {
	v, err := s.query("SELECT pg_is_in_recovery()::text")
	if err != nil {
		return false, err
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("pgtest: pg_is_in_recovery returned " + v)
}
