// Package yamlpos reads a YAML file node by node and reports what is wrong
// with it as "file:line: message" problems, every problem at once. It is
// the one YAML position reporter: the tool catalog (package tools) and the
// binaries' config files (internal/config) read their files through it.
// Any package may import it.
package yamlpos

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a file, located in it.
type Problem struct {
	File string
	// Line is 1-based; 0 when the problem has no line (an unreadable file).
	Line int
	Msg  string
}

// String formats the problem as "file:line: msg".
func (p Problem) String() string {
	if p.Line <= 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
}

// Join returns the problems one per line, each "file:line: what is wrong".
func Join(problems []Problem) string {
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Reader collects the problems found while walking one file's nodes, and
// the warnings: what loads but deserves a look (e.g. a path this machine
// cannot check).
type Reader struct {
	File     string
	Data     []byte // the file's text, for YAML errors that point at the wrong line
	Problems []Problem
	Warnings []Problem
}

// Addf records a problem at n's line (line 0 when n is nil).
func (r *Reader) Addf(n *yaml.Node, format string, args ...any) {
	r.Problems = append(r.Problems, r.at(n, format, args...))
}

// Warnf records a warning at n's line (line 0 when n is nil).
func (r *Reader) Warnf(n *yaml.Node, format string, args ...any) {
	r.Warnings = append(r.Warnings, r.at(n, format, args...))
}

func (r *Reader) at(n *yaml.Node, format string, args ...any) Problem {
	line := 0
	if n != nil {
		line = n.Line
	}
	return Problem{File: r.File, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Sort orders the problems and the warnings by line (stable: those of one
// line keep the order they were found in).
func (r *Reader) Sort() {
	byLine := func(a, b Problem) int { return a.Line - b.Line }
	slices.SortStableFunc(r.Problems, byLine)
	slices.SortStableFunc(r.Warnings, byLine)
}

var yamlErrRE = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)

// YAMLErr records a YAML syntax error at the line it names.
func (r *Reader) YAMLErr(err error) {
	if m := yamlErrRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		if strings.Contains(m[2], "tab character") {
			line = tabLine(r.Data, line)
		}
		r.Problems = append(r.Problems, Problem{File: r.File, Line: line, Msg: "YAML: " + m[2]})
		return
	}
	r.Problems = append(r.Problems, Problem{File: r.File, Msg: "YAML: " + CleanErr(err)})
}

// tabLine is the line of the first tab in indentation at or after line:
// the YAML parser reports a tab that breaks the indentation on the line
// before the one that holds it.
func tabLine(data []byte, line int) int {
	for i, l := range strings.Split(string(data), "\n") {
		if i+1 < line {
			continue
		}
		if indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]; strings.Contains(indent, "\t") {
			return i + 1
		}
	}
	return line
}

// CleanErr is a YAML library error without its "yaml: " prefix.
func CleanErr(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// Document decodes r.Data as exactly one YAML document and returns its
// root node; what names the file in the message about an extra document
// ("a catalog"). It returns nil after a syntax error, and a node of kind 0
// or a null scalar for an empty document.
func (r *Reader) Document(what string) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(r.Data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		r.YAMLErr(err)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		r.Addf(&extra, "%s is one YAML document; remove the extra \"---\" document", what)
	} else if !errors.Is(err, io.EOF) {
		r.YAMLErr(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	return root
}

// Deref follows an alias to the node it names.
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is a null scalar (an empty value).
func IsNull(n *yaml.Node) bool {
	n = Deref(n)
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Empty reports whether a Document root holds nothing.
func Empty(root *yaml.Node) bool {
	return root.Kind == 0 || IsNull(root)
}

// KV is one mapping entry.
type KV struct {
	Key     string
	KeyNode *yaml.Node
	Val     *yaml.Node
}

// IsMapping reports whether n is a mapping; otherwise it records a problem.
func (r *Reader) IsMapping(n *yaml.Node, what string) bool {
	n = Deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		r.Addf(n, "%s: must be a mapping", what)
		return false
	}
	return true
}

// Pairs returns the entries of mapping n in file order, reporting
// duplicate, merge and non-string keys.
func (r *Reader) Pairs(n *yaml.Node, what string) []KV {
	n = Deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	seen := map[string]int{}
	var out []KV
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			r.Addf(n.Content[i], "%s: keys must be plain strings", what)
			continue
		}
		if k.ShortTag() == "!!merge" {
			r.Addf(k, "%s: merge keys (<<) are not supported; write the keys out", what)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			r.Addf(k, "%s: duplicate key %q (first at line %d)", what, k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, KV{Key: k.Value, KeyNode: k, Val: v})
	}
	return out
}

// Fields returns the entries of mapping n by key, reporting keys not in
// allowed. It returns nil (and records a problem) when n is not a mapping.
func (r *Reader) Fields(n *yaml.Node, what string, allowed []string) map[string]KV {
	if !r.IsMapping(n, what) {
		return nil
	}
	out := map[string]KV{}
	for _, e := range r.Pairs(n, what) {
		if !slices.Contains(allowed, e.Key) {
			r.Addf(e.KeyNode, "%s: unknown key %q (known: %s)", what, e.Key, strings.Join(allowed, ", "))
			continue
		}
		out[e.Key] = e
	}
	return out
}
