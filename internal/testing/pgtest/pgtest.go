// Package pgtest runs a real PostgreSQL server for tests: initdb and
// postgres from the installed binaries, in a temporary directory, on a
// loopback port, as an unprivileged user (PostgreSQL refuses to run as
// root, and CI runs as root: then the server runs as the "postgres" user).
// One server per test process, started on first use; each test gets a
// fresh database. Test code only: internal/testing/testbin.TestSupport keeps it out
// of binaries.
//
// The server is stopped when the tests end through testbin.Main or
// testbin.Exit; a package with no other TestMain uses Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// (If the test process dies first, the server gets SIGQUIT as its
// parent-death signal.)
//
// When the binaries are absent, tests that ask for a database skip, unless
// CI is set (CI=true), where they fail: CI installs the postgresql package.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchhq/latch/internal/cputime"
	"github.com/latchhq/latch/internal/testing/testbin"
)

// Server is a running PostgreSQL.
type Server struct {
	dir  string // owned by the server's user; removed by Stop
	data string // the data directory, under dir
	bin  string
	cred *syscall.Credential
	port int
	cmd  *exec.Cmd
	exit chan struct{}
}

var (
	once    sync.Once
	shared  *Server
	initErr error
	absent  bool
	dbSeq   atomic.Int64
)

// Main runs the tests, then stops the server if one was started, and exits.
func Main(m *testing.M) { testbin.Exit(m.Run()) }

// binDir finds the directory with initdb and postgres: $LATCH_PG_BIN, then
// PATH, then the newest /usr/lib/postgresql/*/bin (Debian's layout).
func binDir() (string, error) {
	if d := os.Getenv("LATCH_PG_BIN"); d != "" {
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL binaries (initdb, postgres) on PATH, in $LATCH_PG_BIN or under /usr/lib/postgresql/*/bin: install them with `apt-get install postgresql`")
}

// Shared returns the process's server, starting it on first use. It skips
// tb when the binaries are absent outside CI.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	once.Do(func() {
		bin, err := binDir()
		if err != nil {
			absent, initErr = true, err
			return
		}
		shared, initErr = Start(bin)
		if initErr == nil {
			testbin.AtExit(shared.Stop)
		}
	})
	if absent {
		if os.Getenv("CI") != "" && os.Getenv("CI") != "false" {
			tb.Fatalf("pgtest: CI is set and %v", initErr)
		}
		tb.Skipf("pgtest: skipping the PostgreSQL tests: %v", initErr)
	}
	if initErr != nil {
		tb.Fatalf("pgtest: %v", initErr)
	}
	return shared
}

// URL returns the URL of a new, empty database on the shared server. The
// database is dropped when tb ends.
func URL(tb testing.TB) string {
	tb.Helper()
	s := Shared(tb)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := s.exec("CREATE DATABASE " + name); err != nil {
		tb.Fatalf("pgtest: create database: %v\nserver log:\n%s", err, s.Log())
	}
	tb.Cleanup(func() {
		// WITH (FORCE) ends the connections a test left open.
		if err := s.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			tb.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.URLFor(name)
}

// URLFor is the URL of the named database.
func (s *Server) URLFor(db string) string {
	return fmt.Sprintf("postgres://latch@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Port is the server's loopback TCP port.
func (s *Server) Port() int { return s.port }

// Log returns the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return string(b)
}

func (s *Server) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URLFor("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// runAs returns the credential to run PostgreSQL with: none when this
// process is not root, else the postgres user's.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no postgres user to run PostgreSQL as (the postgresql package creates it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func command(cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	// The parent-death signal is set after the credential change, so the
	// server goes when the test process dies without calling Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before postgres binds it; Start then tries again.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start runs initdb and postgres from bin in a new temporary directory.
// Stop it with Stop.
func Start(bin string) (*Server, error) {
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "latch-pgtest-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := command(cred, filepath.Join(bin, "initdb"), "-D", data, "-U", "latch", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 3 {
		s, err := startServer(cred, bin, dir, data, 0)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// startServer runs postgres on data, on port (0: a free one), with extra
// settings ("-c", "name=value", ...).
func startServer(cred *syscall.Credential, bin, dir, data string, port int, extra ...string) (*Server, error) {
	if port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	logf, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	if cred != nil {
		if err := logf.Chown(int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	// fsync stays on: the benchmarks compare durable commits with Badger's.
	cmd := command(cred, filepath.Join(bin, "postgres"), append([]string{"-D", data,
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(port),
		"-c", "unix_socket_directories=" + dir, "-c", "max_connections=300",
		"-c", "logging_collector=off", "-c", "log_min_messages=warning"}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{dir: dir, data: data, bin: bin, cred: cred, port: port, cmd: cmd, exit: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exit) }() //nolint:errcheck // the exit is observed through s.exit
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.exit:
			return nil, fmt.Errorf("postgres exited while starting on port %d:\n%s", port, s.Log())
		default:
		}
		if err := s.exec("SELECT 1"); err == nil {
			return s, nil
		} else if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("postgres on port %d not ready after 30s: %v\n%s", port, err, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) kill() {
	s.cmd.Process.Signal(syscall.SIGQUIT) //nolint:errcheck // it may have exited
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill() //nolint:errcheck // likewise
		<-s.exit
	}
}

// Stop stops the server by its PID (fast shutdown, then SIGKILL after 10s)
// and removes its directory.
func (s *Server) Stop() {
	s.cmd.Process.Signal(syscall.SIGINT) //nolint:errcheck // it may have exited
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill() //nolint:errcheck // likewise
		<-s.exit
	}
	os.RemoveAll(s.dir)
}

// DSN is the key/value form of the URL of db, to test that form too.
func (s *Server) DSN(db string) string {
	return strings.Join([]string{"host=127.0.0.1", "port=" + strconv.Itoa(s.port), "user=latch", "dbname=" + db, "sslmode=disable"}, " ")
}

// CPU is the processor time (user and system) the server's processes
// have used so far: the postmaster and every process it started that is
// still running (backends, WAL writer, checkpointer, autovacuum), read
// from /proc. A benchmark reads it before and after a run to report the
// database's share per operation, which unlike throughput does not depend
// on what else the machine is doing. Processes that exited in between are
// not counted (a pool keeps its connections, so a benchmark's backends
// stay). Linux only: elsewhere it returns an error.
func (s *Server) CPU() (time.Duration, error) {
	pid := s.cmd.Process.Pid
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("pgtest: read the server's CPU time: %w", err)
	}
	var total time.Duration
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := cputime.Process(p)
		if !ok || (p != pid && st.PPID != pid) {
			continue // exited meanwhile, or not the server's
		}
		total += st.CPU
	}
	return total, nil
}
