package yamlpos

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReader: every problem of a file at its line, in line order.
func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"keys", "b: 1\na: 2\nb: 3\nzz: 4\n", []string{
			`f.yaml:3: top: duplicate key "b" (first at line 1)`,
			`f.yaml:4: top: unknown key "zz" (known: a, b)`,
		}},
		{"tab", "a:\n  x: 1\n\ty: 2\n", []string{"f.yaml:3: YAML: found a tab character that violates indentation"}},
		{"merge", "x: &x {a: 1}\n<<: *x\n", []string{
			`f.yaml:1: top: unknown key "x" (known: a, b)`,
			"f.yaml:2: top: merge keys (<<) are not supported; write the keys out",
		}},
		{"two documents", "a: 1\n---\nb: 2\n", []string{`f.yaml:2: a test file is one YAML document; remove the extra "---" document`}},
		{"not a mapping", "[a]\n", []string{"f.yaml:1: top: must be a mapping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reader{File: "f.yaml", Data: []byte(tc.text)}
			if root := r.Document("a test file"); root != nil && !Empty(root) {
				r.Fields(root, "top", []string{"a", "b"})
			}
			r.Sort()
			var got []string
			for _, p := range r.Problems {
				got = append(got, p.String())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("problems of %q (-want +got):\n%s", tc.text, d)
			}
		})
	}
}
