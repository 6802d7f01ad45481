package execdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/latchhq/latch/hostagent/proc"
	"github.com/latchhq/latch/internal/atomicfile"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// File names inside an execution directory.
const (
	ArgvFile    = "argv.json"
	ShimFile    = "shim.pid"
	CommandFile = "command.pid"
	OutputFile  = "output"
	LogFile     = "shim.log"
	StatusFile  = "status"
)

// MaxIDLen bounds an execution ID (it names a directory).
const MaxIDLen = 128

var (
	// ErrBadID means an execution ID cannot name a directory safely.
	ErrBadID = errors.New("execdir: execution id must be 1-128 characters of [A-Za-z0-9_.:-] and not start with '.'")
	// ErrNoStatus means the shim has not written a status file.
	ErrNoStatus = errors.New("execdir: no status file")
	// ErrNoFile means an identity or argv file is missing.
	ErrNoFile = errors.New("execdir: file missing")
)

// ValidID checks that id can name a directory.
func ValidID(id string) error {
	if id == "" || len(id) > MaxIDLen || id[0] == '.' {
		return ErrBadID
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.', r == ':':
		default:
			return ErrBadID
		}
	}
	return nil
}

// Root returns DIR/exec.
func Root(dataDir string) string { return filepath.Join(dataDir, "exec") }

// Path returns DIR/exec/<id>.
func Path(dataDir, id string) string { return filepath.Join(Root(dataDir), id) }

// WriteFileAtomic writes data to dir/name durably: temp file, fsync, rename,
// fsync of dir.
func WriteFileAtomic(dir, name string, data []byte, perm os.FileMode) error {
	return writeFile(dir, name, data, perm, true)
}

// writeFile writes dir/name atomically (temp file and rename); durable adds
// the fsyncs of the file and the directory.
func writeFile(dir, name string, data []byte, perm os.FileMode, durable bool) error {
	if err := atomicfile.Write(filepath.Join(dir, name), data, perm, durable); err != nil {
		return fmt.Errorf("execdir: %w", err)
	}
	return nil
}

// SyncDir fsyncs a directory so that a rename or create in it is durable.
func SyncDir(dir string) error { return atomicfile.SyncDir(dir) }

func writeMarker(dir, name string, m *hostagentv1.Marker) error {
	b, err := protojson.MarshalOptions{Multiline: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("execdir: encode %s: %w", name, err)
	}
	return WriteFileAtomic(dir, name, append(b, '\n'), 0o600)
}

func readMarker(dir, name string, missing error) (*hostagentv1.Marker, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, missing
	}
	if err != nil {
		return nil, fmt.Errorf("execdir: read %s: %w", name, err)
	}
	m := &hostagentv1.Marker{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("execdir: decode %s in %s: %w", name, dir, err)
	}
	return m, nil
}

// WriteArgv records what the execution runs (no environment).
func WriteArgv(dir string, m *hostagentv1.Marker) error {
	return writeMarker(dir, ArgvFile, &hostagentv1.Marker{
		ExecutionId:     m.GetExecutionId(),
		Argv:            m.GetArgv(),
		Cwd:             m.GetCwd(),
		PeerUid:         m.GetPeerUid(),
		CreatedUnixNano: m.GetCreatedUnixNano(),
	})
}

// ReadArgv reads argv.json; ErrNoFile when absent.
func ReadArgv(dir string) (*hostagentv1.Marker, error) { return readMarker(dir, ArgvFile, ErrNoFile) }

// WriteStatus writes the status file durably.
func WriteStatus(dir string, m *hostagentv1.Marker) error {
	return writeMarker(dir, StatusFile, m)
}

// ReadStatus reads the status file; ErrNoStatus when absent.
func ReadStatus(dir string) (*hostagentv1.Marker, error) {
	return readMarker(dir, StatusFile, ErrNoStatus)
}

// ApplyStatus copies the outcome fields of a status file into m.
func ApplyStatus(m, status *hostagentv1.Marker) {
	m.State = status.GetState()
	m.ExitCode = status.GetExitCode()
	m.Signal = status.GetSignal()
	if status.GetReason() != "" {
		m.Reason = status.GetReason()
	}
	m.OutputSize = status.GetOutputSize()
	m.OutputTruncated = status.GetOutputTruncated()
}

// WriteIdentity writes "<pid> <start_ticks> <boot_id>" to dir/name
// atomically, and durably when durable is set. command.pid must be durable
// (a rebuilt store trusts its absence to mean "never reached the gate");
// shim.pid only matters on the same boot.
func WriteIdentity(dir, name string, id proc.Identity, durable bool) error {
	line := fmt.Sprintf("%d %d %s\n", id.PID, id.StartTicks, id.BootID)
	return writeFile(dir, name, []byte(line), 0o600, durable)
}

// ReadIdentity reads a file written by WriteIdentity; ErrNoFile when absent.
func ReadIdentity(dir, name string) (proc.Identity, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return proc.Identity{}, ErrNoFile
	}
	if err != nil {
		return proc.Identity{}, fmt.Errorf("execdir: read %s: %w", name, err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return proc.Identity{}, fmt.Errorf("execdir: malformed %s in %s", name, dir)
	}
	pid, err1 := strconv.Atoi(f[0])
	ticks, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return proc.Identity{}, fmt.Errorf("execdir: malformed %s in %s", name, dir)
	}
	return proc.Identity{PID: pid, StartTicks: ticks, BootID: f[2]}, nil
}

// MirrorLog returns DIR/scripts.log, the append-only mirror log of script
// markers (package markers writes and reads it).
func MirrorLog(dataDir string) string { return filepath.Join(dataDir, "scripts.log") }

// ScriptsDir returns DIR/scripts, where agents before the mirror log kept
// each script marker as <execution_id>.json. Only a rebuild reads it now.
func ScriptsDir(dataDir string) string { return filepath.Join(dataDir, "scripts") }

// ReadScriptMirrors reads every mirrored script marker; unreadable files are
// returned as errors alongside the markers that could be read.
func ReadScriptMirrors(dataDir string) ([]*hostagentv1.Marker, []error) {
	dir := ScriptsDir(dataDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("execdir: read %s: %w", dir, err)}
	}
	var (
		out  []*hostagentv1.Marker
		errs []error
	)
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || ValidID(id) != nil {
			continue
		}
		m, err := readMarker(dir, e.Name(), ErrNoFile)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.ExecutionId = id
		out = append(out, m)
	}
	return out, errs
}
