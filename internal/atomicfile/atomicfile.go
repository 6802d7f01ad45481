// Package atomicfile replaces a file so that a crash leaves the old
// contents or the new, never a mix: a temporary file in the same
// directory, renamed over the target (or hard-linked to it, when the
// target must not exist yet).
//
// It is the module's one write-temp-then-rename: a structure test fails
// when production code elsewhere renames a file it has just written.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data (mode perm) through a temporary file in
// its directory and a rename. Durable adds an fsync of the file before the
// rename and of the directory after it, so the new contents survive a
// power loss once Write returns.
func Write(path string, data []byte, perm os.FileMode, durable bool) error {
	return write(path, data, perm, func(p *Pending) error { return p.Commit(durable) })
}

// WriteNew writes path (mode perm) only if it does not exist yet: the
// complete temporary file is hard-linked to path, so a reader, or a racing
// writer, sees all of one writer's data or no file. An existing path gives
// an error wrapping fs.ErrExist and leaves it alone. Always durable.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, (*Pending).CommitNew)
}

// write writes data to a Pending of path and installs it with commit.
func write(path string, data []byte, perm os.FileMode, commit func(*Pending) error) error {
	p, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer p.Abort()
	if _, err := p.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", p.Name(), err)
	}
	return commit(p)
}

// Pending is the next version of a file, written through its embedded
// *os.File (a temporary file next to the target) and installed by one of
// the Commit methods. Abort, deferred after Create, removes it unless a
// Commit installed it.
type Pending struct {
	*os.File
	path string
	done bool // installed or aborted: Abort does nothing more
}

// Create starts the next version of path: a temporary file with mode perm
// in path's directory, which must exist.
func Create(path string, perm os.FileMode) (*Pending, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create a temporary file next to %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	return &Pending{File: f, path: path}, nil
}

// Commit closes the file and renames it over the target. Durable adds an
// fsync of the file before the rename and of the directory after it.
func (p *Pending) Commit(durable bool) error {
	if err := p.finish(durable, true); err != nil {
		return err
	}
	if err := os.Rename(p.Name(), p.path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", p.Name(), p.path, err)
	}
	p.done = true
	if !durable {
		return nil
	}
	return SyncDir(filepath.Dir(p.path))
}

// CommitOpen is a durable Commit that keeps the file open: it returns the
// *os.File, which now names the target, positioned after what was written,
// for the caller to go on appending to and to close.
func (p *Pending) CommitOpen() (*os.File, error) {
	if err := p.finish(true, false); err != nil {
		return nil, err
	}
	if err := os.Rename(p.Name(), p.path); err != nil {
		return nil, fmt.Errorf("rename %s to %s: %w", p.Name(), p.path, err)
	}
	p.done = true
	if err := SyncDir(filepath.Dir(p.path)); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p.File, nil
}

// CommitNew closes the file and installs it only if the target does not
// exist (a hard link, then the temporary name is removed); an existing
// target gives an error wrapping fs.ErrExist. Always durable.
func (p *Pending) CommitNew() error {
	if err := p.finish(true, true); err != nil {
		return err
	}
	if err := os.Link(p.Name(), p.path); err != nil {
		if os.IsExist(err) {
			return fmt.Errorf("%s: %w", p.path, fs.ErrExist)
		}
		return fmt.Errorf("link %s to %s: %w", p.Name(), p.path, err)
	}
	p.Abort() // the temporary name; the target keeps the data
	return SyncDir(filepath.Dir(p.path))
}

// Abort closes and removes the temporary file, unless a Commit installed
// it. Safe to call more than once.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	_ = p.Close()
	_ = os.Remove(p.Name())
}

// finish fsyncs (durable) and closes (closeIt) the temporary file; on an
// error it aborts.
func (p *Pending) finish(durable, closeIt bool) error {
	if p.done {
		return fmt.Errorf("%s: already committed or aborted", p.Name())
	}
	if durable {
		if err := p.Sync(); err != nil {
			p.Abort()
			return fmt.Errorf("fsync %s: %w", p.Name(), err)
		}
	}
	if closeIt {
		if err := p.Close(); err != nil {
			p.Abort()
			return fmt.Errorf("close %s: %w", p.Name(), err)
		}
	}
	return nil
}

// SyncDir fsyncs a directory so that a rename, create or remove in it is
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
