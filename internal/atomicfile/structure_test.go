package atomicfile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"regexp"
	"testing"

	"github.com/latchhq/latch/internal/testing/srctree"
)

// tempLiteral matches a string literal that names a temporary file.
var tempLiteral = regexp.MustCompile(`(?i)tmp|temp`)

// tempRenames returns the lines of src (a Go file) where a function renames
// (or hard-links) a temporary file: the first argument of os.Rename or
// os.Link is the Name() of a file
// from os.CreateTemp, or an expression holding a string literal with "tmp"
// or "temp" in it, or a variable of the same function assigned one of
// those. Renaming a file aside (a damaged store, a rebuilt log) names no
// temporary file and is not reported.
func tempRenames(fset *token.FileSet, f *ast.File) []int {
	var lines []int
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		defs := map[string][]ast.Expr{} // variable -> every expression assigned to it
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					id, ok := l.(*ast.Ident)
					if !ok {
						continue
					}
					if len(n.Rhs) == len(n.Lhs) {
						defs[id.Name] = append(defs[id.Name], n.Rhs[i])
					} else if len(n.Rhs) == 1 && i == 0 {
						defs[id.Name] = append(defs[id.Name], n.Rhs[0]) // f, err := os.CreateTemp(...)
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						defs[id.Name] = append(defs[id.Name], n.Values[i])
					}
				}
			}
			return true
		})
		var isTemp func(e ast.Expr, depth int) bool
		isTemp = func(e ast.Expr, depth int) bool {
			if depth > 8 {
				return false
			}
			found := false
			ast.Inspect(e, func(n ast.Node) bool {
				if found {
					return false
				}
				switch n := n.(type) {
				case *ast.BasicLit:
					if n.Kind == token.STRING && tempLiteral.MatchString(n.Value) {
						found = true
					}
				case *ast.CallExpr:
					name := types.ExprString(n.Fun)
					if name == "os.CreateTemp" || name == "ioutil.TempFile" {
						found = true
					}
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Name" && len(n.Args) == 0 && isTemp(sel.X, depth+1) {
						found = true
					}
				case *ast.Ident:
					for _, d := range defs[n.Name] {
						if d != e && isTemp(d, depth+1) {
							found = true
						}
					}
				}
				return !found
			})
			return found
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if fun := types.ExprString(call.Fun); (fun == "os.Rename" || fun == "os.Link") && isTemp(call.Args[0], 0) {
				lines = append(lines, fset.Position(call.Pos()).Line)
			}
			return true
		})
	}
	return lines
}

// TestTempRenamesFindsCopies: the check finds the shapes a hand-written
// atomic replace takes, and leaves renames aside alone, so that
// TestOnlyAtomicfileRenamesTemps can fail.
func TestTempRenamesFindsCopies(t *testing.T) {
	const src = `package p

import (
	"fmt"
	"os"
	"path/filepath"
)

func suffix(path string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path) // line 14
}

func createTemp(dir, path string) error {
	f, err := os.CreateTemp(dir, ".x-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Rename(f.Name(), path) // line 23
}

func alias(dir, path string) error {
	f, _ := os.CreateTemp(dir, "x")
	name := f.Name()
	var other string
	other = name
	return os.Rename(other, path) // line 31
}

func inline(dir string) {
	os.Rename(filepath.Join(dir, "pid.tmp"), filepath.Join(dir, "pid")) // line 35
	os.Rename(fmt.Sprintf("%s.temp-%d", dir, 1), dir)                  // line 36
}

func aside(path string) error {
	rebuilding := path + ".rebuilding"
	if err := os.WriteFile(rebuilding, nil, 0o600); err != nil {
		return err
	}
	if err := os.Rename(path, path+".corrupt-1"); err != nil {
		return err
	}
	return os.Rename(rebuilding, path+".rebuilt")
}

func link(dir, path string) error {
	f, _ := os.CreateTemp(dir, "x")
	return os.Link(f.Name(), path) // line 52
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := tempRenames(fset, f)
	want := []int{14, 23, 31, 35, 36, 52}
	if len(got) != len(want) {
		t.Fatalf("tempRenames reported lines %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tempRenames reported lines %v, want %v", got, want)
		}
	}
}

// TestOnlyAtomicfileRenamesTemps enforces the package's rule: no
// production code outside internal/atomicfile writes a temporary file and
// renames it into place; it calls Write, WriteNew or Create instead, so
// every replace has the same crash and durability rules.
func TestOnlyAtomicfileRenamesTemps(t *testing.T) {
	for _, file := range srctree.Production(t, "../..", "internal/atomicfile") {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file.Path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range tempRenames(fset, f) {
			t.Errorf("%s:%d renames a temporary file into place: use internal/atomicfile (Write, WriteNew or Create and Commit)", file.Rel, line)
		}
	}
}
