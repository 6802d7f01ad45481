// Package atomicfile replaces a file so that a crash leaves the old
// contents or the new, never a mix: a temporary file in the same
// directory, renamed over the target.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data (mode perm) through a temporary file in
// its directory and a rename. Durable adds an fsync of the file before the
// rename and of the directory after it, so the new contents survive a
// power loss once Write returns.
func Write(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create a temporary file next to %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // gone after the rename; cleans up on failure
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return fmt.Errorf("fsync %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	if !durable {
		return nil
	}
	return SyncDir(dir)
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
