package mcpfront

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/internal/atomicfile"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// The front's state dir (Config.StateDir) holds what the front must not
// lose when it stops while the control plane is away:
//
//	STATE/lock            flock(2)ed by the front using the dir (one per dir)
//	STATE/deliveries.pb   the delivery reports not yet taken by the control
//	                      plane: one controlplanev1.DeliveryQueue, written
//	                      whole (temp file, fsync, rename, fsync of the dir)
//	                      while the control plane is away, removed once it
//	                      took them all; read when the front starts
//
// A file that does not decode is moved aside (deliveries.pb.bad-<time>)
// with a warning, never fatal: the reports in it are lost, which leaves
// their executions reading "delivery not recorded".

const (
	queueFile = "deliveries.pb"
	lockFile  = "lock"
)

// ErrStateDirInUse is returned by New when another front holds the state dir.
var ErrStateDirInUse = errors.New("mcpfront: state dir in use by another front")

// diskQueue is the delivery queue file in a locked state dir.
type diskQueue struct {
	dir  string
	lock *os.File
}

// openDiskQueue locks dir (creating it) and reads the reports kept in it.
// note, when not "", says what was wrong with a file moved aside.
func openDiskQueue(dir string) (q *diskQueue, kept []*controlplanev1.DeliveryReport, note string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, "", fmt.Errorf("mcpfront: create state dir %s: %w (pass --state-dir a directory this user may write)", dir, err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, "", fmt.Errorf("mcpfront: open %s: %w (pass --state-dir a directory this user may write)", filepath.Join(dir, lockFile), err)
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = lf.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, "", fmt.Errorf("%w: %s (each front needs its own --state-dir)", ErrStateDirInUse, dir)
		}
		return nil, nil, "", fmt.Errorf("mcpfront: lock state dir %s: %w", dir, err)
	}
	q = &diskQueue{dir: dir, lock: lf}
	path := filepath.Join(dir, queueFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return q, nil, "", nil
	case err != nil:
		q.close()
		return nil, nil, "", fmt.Errorf("mcpfront: read %s: %w", path, err)
	}
	var dq controlplanev1.DeliveryQueue
	if err := proto.Unmarshal(data, &dq); err != nil {
		aside := fmt.Sprintf("%s.bad-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(path, aside); rerr != nil {
			q.close()
			return nil, nil, "", fmt.Errorf("mcpfront: %s does not decode (%w) and cannot be moved aside: %w; move it away by hand", path, err, rerr)
		}
		return q, nil, fmt.Sprintf("%s did not decode (%v); moved aside to %s: the delivery reports in it are lost (those executions read 'delivery not recorded')", path, err, aside), nil
	}
	return q, dq.GetReports(), "", nil
}

// write replaces the file with rs, durably; no reports removes it.
func (q *diskQueue) write(rs []*controlplanev1.DeliveryReport) error {
	path := filepath.Join(q.dir, queueFile)
	if len(rs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return atomicfile.SyncDir(q.dir)
	}
	data, err := proto.Marshal(&controlplanev1.DeliveryQueue{Reports: rs})
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600, true)
}

func (q *diskQueue) close() {
	_ = q.lock.Close() // releases the flock
}

// reportSize is what r adds to the encoded queue (field 1, length-delimited).
func reportSize(r *controlplanev1.DeliveryReport) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(r))
}

// persistLocked writes the queue to the state dir (no reports: removes the
// file) and reports whether it is there now; without a state dir it does
// nothing. A write that fails keeps the reports in memory, logged.
// deliverMu is held.
func (f *Front) persistLocked() bool {
	if f.queue == nil {
		return false
	}
	if err := f.queue.write(f.deliverQ); err != nil {
		f.log.Error("cannot keep delivery reports on disk; they are kept in memory only until the control plane takes them", "state_dir", f.cfg.StateDir, "reports", len(f.deliverQ), "error", err)
		return false
	}
	f.onDisk = len(f.deliverQ) > 0
	return true
}
