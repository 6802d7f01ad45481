// Package deptest checks import rules over the module's packages, in the
// manner of Tailscale's tstest/deptest: it loads the import graph once with
// `go list -deps` and reports each forbidden dependency with the chain of
// imports that reaches it, so a failure names the file to change. Only
// tests import it.
package deptest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
)

// Package is one node of the graph.
type Package struct {
	ImportPath string
	Imports    []string
	// Standard is true for the standard library's packages.
	Standard bool
}

// Graph is the import graph of the packages a pattern matched and of
// everything they link, without test files.
type Graph struct {
	pkgs map[string]*Package
	// Roots are the packages the pattern matched, in go list's order.
	Roots []string
}

// Load runs `go list -deps` on patterns in dir ("": the current directory).
func Load(dir string, patterns ...string) (*Graph, error) {
	args := append([]string{"list", "-deps", "-json=ImportPath,Imports,Standard,DepOnly"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("deptest: go list: %w\n%s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("deptest: go list: %w", err)
	}
	g := &Graph{pkgs: map[string]*Package{}}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			Package
			DepOnly bool
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("deptest: go list output: %w", err)
		}
		pkg := p.Package
		g.pkgs[pkg.ImportPath] = &pkg
		if !p.DepOnly {
			g.Roots = append(g.Roots, pkg.ImportPath)
		}
	}
	return g, nil
}

// Package is the node of path (nil when the graph does not hold it).
func (g *Graph) Package(path string) *Package { return g.pkgs[path] }

// Rule forbids the packages a rule covers to depend on others.
type Rule struct {
	// Name says what the rule keeps, for the failure message.
	Name string
	// From covers the packages the rule applies to: an import path prefix
	// (the package and every package under it).
	From []string
	// Skip are import path prefixes under From the rule does not cover.
	Skip []string
	// Forbid are import path prefixes the covered packages must not reach.
	Forbid []string
	// Allow are exact import paths reachable although Forbid covers them:
	// one package each, never a tree, so whatever it starts to import is
	// checked like the rest.
	Allow []string
	// Direct checks only the covered packages' own imports, not what
	// those link in turn (a rule about where code lives, not what links).
	Direct bool
}

// Violation is one forbidden dependency and how it is reached.
type Violation struct {
	Rule string
	// Chain runs from the covered package to the forbidden one, each
	// importing the next.
	Chain []string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s", v.Rule, strings.Join(v.Chain, " -> "))
}

// HasPrefix reports whether path is prefix or a package under it.
func HasPrefix(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func anyPrefix(path string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return HasPrefix(path, p) })
}

// Check applies r to every root the rule covers and returns one violation
// per forbidden package reached, with the shortest chain to it.
func (g *Graph) Check(r Rule) []Violation {
	var out []Violation
	for _, root := range g.Roots {
		if !anyPrefix(root, r.From) || anyPrefix(root, r.Skip) {
			continue
		}
		for _, chain := range g.reach(root, r) {
			out = append(out, Violation{Rule: r.Name, Chain: chain})
		}
	}
	return out
}

// reach walks from root breadth-first and returns the shortest chain to
// each forbidden package (not walking on through it).
func (g *Graph) reach(root string, r Rule) [][]string {
	forbidden := func(p string) bool { return anyPrefix(p, r.Forbid) && !slices.Contains(r.Allow, p) }
	prev := map[string]string{root: ""}
	queue := []string{root}
	var found [][]string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		pkg := g.pkgs[cur]
		if pkg == nil {
			continue
		}
		for _, imp := range pkg.Imports {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = cur
			if forbidden(imp) {
				var chain []string
				for p := imp; p != ""; p = prev[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				found = append(found, chain)
				continue
			}
			if !r.Direct {
				queue = append(queue, imp)
			}
		}
	}
	return found
}
