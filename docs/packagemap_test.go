package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goPackages lists the directories of the tree that hold a Go package
// (non-test .go files, or test files only), as slash paths from the root.
func goPackages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "static", "templates":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			if rel = filepath.ToSlash(rel); rel != "." && !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var mapRowRE = regexp.MustCompile("^\\| `([^`]+)` \\|")

// TestPackageMapMatchesTree keeps contributing/package-map.md one row per
// package: every package of the tree is listed, and every listed one exists.
func TestPackageMapMatchesTree(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("contributing", "package-map.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := mapRowRE.FindStringSubmatch(line); m != nil {
			listed[m[1]] = true
		}
	}
	for _, p := range goPackages(t) {
		if !listed[p] {
			t.Errorf("package %s is not in docs/contributing/package-map.md: add a row saying what it owns and who may import it", p)
		}
		delete(listed, p)
	}
	for p := range listed {
		t.Errorf("docs/contributing/package-map.md lists %s, which is not a package of the tree: remove or rename its row", p)
	}
}
