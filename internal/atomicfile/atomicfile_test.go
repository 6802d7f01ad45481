package atomicfile

import (
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
