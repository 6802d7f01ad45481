// Package srctree lists the module's production Go files, for the
// structure tests that hold a rule over all of them (only internal/egress
// builds HTTP clients, only internal/atomicfile renames temporary files).
package srctree

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// File is one production Go file: Rel is its slash-separated path from the
// module root, Path where it is on disk.
type File struct {
	Rel, Path string
}

// minFiles is fewer files than the module has: a walk that finds fewer
// started from the wrong directory.
const minFiles = 50

// Production returns every non-test .go file of the module whose root is
// root (relative to the test's package directory, e.g. "../.."), outside
// hidden directories, testdata, node_modules and the directories skip
// names (slash-separated, from the module root). It fails t when root is
// not the module root or the walk finds too few files to be the module.
func Production(t testing.TB, root string, skip ...string) []File {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", abs, err)
	}
	var files []File
	err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(abs, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			for _, s := range skip {
				if rel == s {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			files = append(files, File{Rel: rel, Path: path})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < minFiles {
		t.Fatalf("found %d production Go files under %s, want the whole module", len(files), abs)
	}
	return files
}
