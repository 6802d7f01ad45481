package vault

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Storage keeps the vault document (the format doc.go describes) where the
// control plane can reach it: a file (FileStorage, the default), or a
// shared database, so that every replica of a control plane on one store
// opens the same vault (pgkv.KV.VaultStorage). The document holds
// only sealed entries, so a Storage never sees a secret in clear.
type Storage interface {
	// Load returns the stored document, or an error wrapping
	// fs.ErrNotExist when there is none yet.
	Load() ([]byte, error)
	// Create stores the first document. When one is already stored
	// (another process created it first), it fails with an error wrapping
	// ErrExists and stores nothing.
	Create(data []byte) error
	// Replace stores data over the document last loaded, created or
	// replaced through this Storage.
	Replace(data []byte) error
	// String names the place in logs, errors and Status.Path.
	String() string
}

// FileStorage keeps the vault document in one file, mode 0600, written
// atomically (temporary file, fsync, rename, fsync of the directory).
type FileStorage string

// Load reads the file.
func (p FileStorage) Load() ([]byte, error) {
	fh, err := os.Open(string(p))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("vault: read %s: %w", p, err)
	}
	return data, nil
}

// Create writes the file unless it exists (a hard link of the temporary
// file, which fails when the path is taken).
func (p FileStorage) Create(data []byte) error {
	if err := os.MkdirAll(filepath.Dir(string(p)), 0o700); err != nil {
		return fmt.Errorf("vault: create vault directory: %w", err)
	}
	return writeAtomic(string(p), data, true)
}

// Replace rewrites the file.
func (p FileStorage) Replace(data []byte) error { return writeAtomic(string(p), data, false) }

func (p FileStorage) String() string { return string(p) }

// exists reports whether s holds a document.
func exists(s Storage) (bool, error) {
	if p, ok := s.(FileStorage); ok {
		// Lstat: a dangling symlink at the path counts as taken.
		_, err := os.Lstat(string(p))
		return err == nil, nil
	}
	_, err := s.Load()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}
