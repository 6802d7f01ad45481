package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/hostagent/markers"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// Defaults.
const (
	DefaultOutputCap  = 1 << 20
	DefaultSocketMode = 0o660
	stopGrace         = 5 * time.Second
)

var (
	// ErrLocked means another agent holds the data directory.
	ErrLocked = errors.New("agent: data directory is in use by another latch-hostagent")
	// ErrSocketInUse means another process is listening on the socket path.
	ErrSocketInUse = errors.New("agent: socket is in use by a running process")
	// ErrConfig means the configuration is invalid.
	ErrConfig = errors.New("agent: invalid configuration")
	// ErrPeerRefused means the connecting process's uid is not allowed.
	ErrPeerRefused = errors.New("agent: peer uid not allowed (add it with --allow-uid)")

	// errInvalid marks a request the service refuses as InvalidArgument.
	errInvalid = errors.New("agent: invalid request")
)

// Config configures an Agent.
type Config struct {
	// DataDir holds the lock, the marker store and the execution directories.
	DataDir string
	// SocketPath is the unix socket to serve on.
	SocketPath string
	// SocketMode is the socket's permission bits (default 0660; never more
	// than 0660).
	SocketMode os.FileMode
	// Policy decides which peer uids may connect (default: own uid and root).
	Policy *Policy
	// OutputCap bounds the captured output of one execution (default 1 MiB).
	OutputCap int64
	// Logger is the root logger (default: discard).
	Logger hclog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// PollInterval is how often a watcher checks a re-attached process
	// (default 200ms).
	PollInterval time.Duration
	// StartTimeout bounds how long Run waits for the shim to report (default 30s).
	StartTimeout time.Duration
	// Metrics, when set, receives the agent's metrics (observe.go).
	Metrics *Metrics
}

// Agent is the host agent. It implements hostagentv1.HostAgentServer.
type Agent struct {
	hostagentv1.UnsafeHostAgentServer

	cfg    Config
	log    hclog.Logger
	policy Policy

	store       *markers.Store
	notify      *notifier
	scriptLocks [64]sync.Mutex
	// redactors holds, while a command runs, the redactor of its secret
	// env values (execution ID → *redact.Redactor), for the script markers
	// it writes under its ID. Memory only: lost on restart.
	redactors sync.Map
	bg        sync.WaitGroup
	bgCtx     context.Context
	bgStop    context.CancelFunc
	lockFil   *os.File
}

var _ hostagentv1.HostAgentServer = (*Agent)(nil)

// New validates cfg and fills defaults. It opens nothing: Serve does.
func New(cfg Config) (*Agent, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: no data directory (use --data)", ErrConfig)
	}
	if cfg.SocketPath == "" {
		return nil, fmt.Errorf("%w: no socket path (use --socket)", ErrConfig)
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("%w: data directory: %v", ErrConfig, err)
	}
	cfg.DataDir = abs
	if abs, err = filepath.Abs(cfg.SocketPath); err != nil {
		return nil, fmt.Errorf("%w: socket path: %v", ErrConfig, err)
	}
	cfg.SocketPath = abs
	if cfg.SocketMode == 0 {
		cfg.SocketMode = DefaultSocketMode
	}
	if cfg.SocketMode&^0o660 != 0 {
		return nil, fmt.Errorf("%w: socket mode %#o grants more than 0660", ErrConfig, cfg.SocketMode)
	}
	if cfg.OutputCap == 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	if cfg.OutputCap < 0 {
		return nil, fmt.Errorf("%w: negative output cap", ErrConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	policy := DefaultPolicy()
	if cfg.Policy != nil {
		policy = *cfg.Policy
	}
	return &Agent{cfg: cfg, log: cfg.Logger.Named("agent"), policy: policy, notify: newNotifier()}, nil
}

// Serve locks the data directory, opens (or recovers) the marker store,
// reconciles open markers and serves on the socket until ctx is done.
func (a *Agent) Serve(ctx context.Context) error {
	if err := os.MkdirAll(a.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("agent: create data directory: %w", err)
	}
	if err := a.lock(); err != nil {
		return err
	}
	defer a.lockFil.Close()

	if err := a.openStore(); err != nil {
		return err
	}
	a.bgCtx, a.bgStop = context.WithCancel(context.Background())
	defer func() {
		a.bgStop()
		a.bg.Wait()
		if err := a.store.Close(); err != nil {
			a.log.Error("closing marker store", "error", err)
		}
	}()

	a.cfg.Metrics.observeMarkers(a.store)
	if err := a.reconcile(); err != nil {
		return err
	}

	lis, err := Listen(a.cfg.SocketPath, a.cfg.SocketMode)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(
		grpc.Creds(NewPeerCredentials(a.policy)),
		grpc.ChainUnaryInterceptor(a.recoverInterceptor),
	)
	hostagentv1.RegisterHostAgentServer(srv, a)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	a.log.Info("serving", "socket", a.cfg.SocketPath, "data", a.cfg.DataDir, "allowed_uids", a.policy.UIDs())

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("agent: serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		hs.Shutdown()
		done := make(chan struct{})
		go func() { srv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(stopGrace):
			srv.Stop()
		}
		return nil
	})
	err = g.Wait()
	a.log.Info("stopped")
	return err
}

func (a *Agent) lock() error {
	f, err := os.OpenFile(filepath.Join(a.cfg.DataDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("agent: open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s", ErrLocked, a.cfg.DataDir)
		}
		return fmt.Errorf("agent: lock %s: %w", a.cfg.DataDir, err)
	}
	a.lockFil = f
	return nil
}

// openStore opens the marker store; one that will not open is moved aside and
// a fresh store is rebuilt from the execution directories (run markers) and
// the script markers' mirror log (plus the JSON mirrors older agents kept),
// so a damaged store never makes the agent crash-loop.
//
// A rebuild keeps the mirror log it reads from at DIR/scripts.log.rebuilding
// until every marker is in the fresh store; an agent that finds that file
// at start was cut off in a rebuild, so it moves the partial store aside
// too and rebuilds again from the same sources.
func (a *Agent) openStore() error {
	dir := filepath.Join(a.cfg.DataDir, "markers")
	mirror := execdir.MirrorLog(a.cfg.DataDir)
	rebuilding := mirror + ".rebuilding"
	cfg := markers.Config{Dir: dir, Logger: a.cfg.Logger, MirrorLog: mirror, Now: a.cfg.Now}
	var (
		st  *markers.Store
		err error
	)
	if _, serr := os.Stat(rebuilding); serr == nil {
		err = fmt.Errorf("%w: an earlier rebuild did not finish (%s is still there)", markers.ErrOpen, rebuilding)
	} else {
		st, err = markers.Open(cfg)
	}
	if err == nil {
		a.store = st
		return nil
	}
	if !errors.Is(err, markers.ErrOpen) {
		return err
	}
	moved, merr := markers.MoveAside(dir, a.cfg.Now())
	if merr != nil {
		return fmt.Errorf("agent: marker store will not open (%v) and cannot be moved aside: %w", err, merr)
	}
	a.log.Error("MARKER STORE WOULD NOT OPEN: moved aside, starting with a fresh store rebuilt from execution directories and script marker mirrors; check the rebuilt markers",
		"error", err, "moved_to", moved)
	// Keep the log to read from out of the fresh store's way (it writes
	// its own at DIR/scripts.log).
	if _, serr := os.Stat(rebuilding); serr != nil {
		if err := os.Rename(mirror, rebuilding); errors.Is(err, os.ErrNotExist) {
			err = os.WriteFile(rebuilding, nil, 0o600) // no log: the flag alone
		} else if err != nil {
			return fmt.Errorf("agent: keep the mirror log aside for the rebuild: %w", err)
		}
		if err := execdir.SyncDir(a.cfg.DataDir); err != nil {
			return fmt.Errorf("agent: rebuild: %w", err)
		}
	}
	// The JSON mirrors of older agents first, then the log (newer).
	scripts, errs := execdir.ReadScriptMirrors(a.cfg.DataDir)
	logged, lerr := markers.ReadMirror(rebuilding)
	if lerr != nil {
		errs = append(errs, lerr)
	}
	scripts = append(scripts, logged...)
	_ = os.Remove(mirror) // a partial rebuild's log: the fresh store writes a new one
	st, err = markers.Open(cfg)
	if err != nil {
		return fmt.Errorf("agent: fresh marker store will not open either: %w", err)
	}
	a.store = st
	n, err := a.rebuild()
	if err != nil {
		return err
	}
	for _, m := range scripts {
		if err := a.store.Put(markers.Scripts, m); err != nil {
			return fmt.Errorf("agent: rebuild script marker %s: %w", m.GetExecutionId(), err)
		}
	}
	for _, e := range errs {
		a.log.Error("script marker mirror unreadable; markers after the damage are NOT recovered", "error", e)
	}
	kept := fmt.Sprintf("%s.rebuilt-%d", mirror, a.cfg.Now().Unix())
	if err := os.Rename(rebuilding, kept); err != nil {
		return fmt.Errorf("agent: rebuild done but %s cannot be renamed (the next start would rebuild again): %w", rebuilding, err)
	}
	if err := execdir.SyncDir(a.cfg.DataDir); err != nil {
		return fmt.Errorf("agent: rebuild: %w", err)
	}
	a.log.Error("marker store rebuilt", "run_markers", n, "script_markers", len(scripts), "unreadable_script_mirrors", len(errs), "moved_to", moved, "mirror_log_read_kept_as", kept)
	return nil
}

// Listen creates the unix socket at path with mode (never wider than asked:
// the umask is tightened around bind), replacing a stale socket file but
// never one a live process is listening on.
func Listen(path string, mode os.FileMode) (net.Listener, error) {
	// Linux's sockaddr_un holds 108 bytes with the terminating NUL.
	if len(path) > 107 {
		return nil, fmt.Errorf("agent: the socket path %s is %d bytes, and Linux allows at most 107 for a unix socket: use a shorter --socket path", path, len(path))
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("agent: %s exists and is not a socket; remove it or choose another --socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("%w: %s", ErrSocketInUse, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("agent: remove stale socket %s: %w", path, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("agent: create socket directory: %w", err)
	}
	old := syscall.Umask(0o177)
	lis, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("agent: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("agent: chmod socket: %w", err)
	}
	return lis, nil
}

// notifier wakes Wait calls when a marker changes.
type notifier struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(map[string]chan struct{})} }

// changed returns a channel closed at the next change of id.
func (n *notifier) changed(id string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.ch[id]
	if !ok {
		c = make(chan struct{})
		n.ch[id] = c
	}
	return c
}

func (n *notifier) fire(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.ch[id]; ok {
		close(c)
		delete(n.ch, id)
	}
}
