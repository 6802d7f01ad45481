package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: a new file and a replaced one get the data and the mode, and
// no temporary file is left behind; a missing directory is an error.
func TestWrite(t *testing.T) {
	for _, durable := range []bool{false, true} {
		dir := t.TempDir()
		p := filepath.Join(dir, "f")
		for _, data := range []string{"one", "two, longer"} {
			if err := Write(p, []byte(data), 0o600, durable); err != nil {
				t.Fatalf("Write(durable=%v): %v", durable, err)
			}
			got, err := os.ReadFile(p)
			if err != nil || string(got) != data {
				t.Fatalf("after Write(%q): read %q, %v", data, got, err)
			}
			if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("directory holds %d entries, want only the file", len(ents))
		}
	}
	if err := Write(filepath.Join(t.TempDir(), "missing", "f"), []byte("x"), 0o600, true); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}

// TestWriteNew: the first write creates the file; a second finds it there
// (fs.ErrExist), leaves its contents alone and leaves no temporary file.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteNew(p, []byte("first"), 0o600); err != nil {
		t.Fatalf("WriteNew: %v", err)
	}
	err := WriteNew(p, []byte("second"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second WriteNew = %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "first" {
		t.Errorf("after the refused WriteNew the file holds %q, want %q", got, "first")
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(ents))
	}
}

// TestCommitOpen: the returned file names the target and appends after the
// committed contents; an aborted Pending leaves the target as it was and
// no temporary file; a second Commit is refused.
func TestCommitOpen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "log")
	if err := Write(p, []byte("old"), 0o600, false); err != nil {
		t.Fatal(err)
	}
	aborted, err := Create(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aborted.WriteString("never"); err != nil {
		t.Fatal(err)
	}
	aborted.Abort()
	aborted.Abort()
	if err := aborted.Commit(true); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Fatalf("after Abort the file holds %q, want %q", got, "old")
	}
	pend, err := Create(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pend.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	f, err := pend.CommitOpen()
	if err != nil {
		t.Fatalf("CommitOpen: %v", err)
	}
	pend.Abort() // deferred by callers: a no-op once committed
	if _, err := f.WriteString("+more"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "new+more" {
		t.Errorf("file holds %q, want %q", got, "new+more")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(ents))
	}
}
