package tools

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Argument values that would become options.
//
// A command element that begins with an argument reference ("{{file}}",
// "{{name}}.txt") is where a value such as "--force" or "-rf" would be read
// by the program as an option instead of data. Such an element is refused at
// load unless one of these holds for the argument it begins with:
//
//   - the tool lists it in positional_after_double_dash: Latch passes "--"
//     (end of options) just before the first element that begins with one
//     of the listed arguments, so that element and every later one are
//     positional. Nothing after that point may be an option (no literal
//     element starting with "-"), and the command may not also hold a
//     literal "--";
//   - a literal "--" element comes before it in the command;
//   - the input schema pins it so that no accepted value can start with "-":
//     type "string" with a pattern proved by patternNoLeadingDash, an
//     enum/const whose every value is non-empty and does not start with "-",
//     or type integer/number with a minimum (or exclusiveMinimum) >= 0.
//
// Elements whose literal text starts with "-" ("--to={{version}}") are
// options by the catalog's own text and need none of this: joining the
// value to its option is the simplest fix.
//
// At render time every element is checked again whatever the catalog says
// (defence in depth): an element whose template does not start with "-" but
// whose rendered value does is refused unless a "--" comes before it.

// positionalKey is the tool key that lists positional arguments.
const positionalKey = "positional_after_double_dash"

// doubleDashAt returns the index of the command element before which Latch
// inserts "--", or -1: the first element (after the program) that begins
// with a reference to an argument in PositionalAfterDoubleDash.
func (t *Tool) doubleDashAt() int {
	if len(t.PositionalAfterDoubleDash) == 0 {
		return -1
	}
	for i := 1; i < len(t.Command); i++ {
		if name := leadingArg(t.Command[i]); name != "" && slices.Contains(t.PositionalAfterDoubleDash, name) {
			return i
		}
	}
	return -1
}

// leadingArg returns the argument an element's template begins with, or "".
func leadingArg(el string) string {
	segs, err := parseTemplate(el)
	if err != nil || len(segs) == 0 {
		return ""
	}
	return segs[0].arg
}

// literalDoubleDash returns the index of the first literal "--" element
// after the program, or -1.
func literalDoubleDash(argv []string) int {
	for i := 1; i < len(argv); i++ {
		if argv[i] == "--" {
			return i
		}
	}
	return -1
}

// optionArgs parses positional_after_double_dash and applies the load rule
// above to a command tool.
func (p *parser) optionArgs(f map[string]kv, t *Tool, info *schemaInfo, what string) {
	if pe, ok := f[positionalKey]; ok && !isNull(pe.val) {
		names, nodes, _ := p.strList(pe, what+": "+positionalKey)
		for i, name := range names {
			switch {
			case slices.Contains(t.PositionalAfterDoubleDash, name):
				p.addf(nodes[i], "%s: %s lists %q twice", what, positionalKey, name)
			case info != nil && !info.props[name]:
				p.addf(nodes[i], "%s: %s: %q is not a property of input_schema", what, positionalKey, name)
			default:
				t.PositionalAfterDoubleDash = append(t.PositionalAfterDoubleDash, name)
			}
		}
	}
	ce, ok := f["command"]
	if !ok || len(t.Command) == 0 {
		return
	}
	at := ce.keyNode
	if pe, ok := f[positionalKey]; ok {
		for _, name := range t.PositionalAfterDoubleDash {
			found := false
			for _, el := range t.Command[1:] {
				found = found || leadingArg(el) == name
			}
			if !found {
				p.addf(pe.keyNode, "%s: %s lists %s, but no command element begins with {{%s}}; list only arguments that are whole positional elements", what, positionalKey, name, name)
			}
		}
	}
	dd, ins := literalDoubleDash(t.Command), t.doubleDashAt()
	if ins >= 0 && dd >= 0 {
		p.addf(at, "%s: command[%d] is a literal \"--\" and %s makes Latch insert another before command[%d]; keep one: drop the literal \"--\" or %s", what, dd, positionalKey, ins, positionalKey)
		return
	}
	if ins >= 0 {
		for j := ins + 1; j < len(t.Command); j++ {
			if strings.HasPrefix(t.Command[j], "-") {
				p.addf(at, "%s: command[%d] %q comes after the \"--\" Latch inserts before command[%d] (%s), so the program would read it as a positional argument, not an option; move it before command[%d]", what, j, t.Command[j], ins, positionalKey, ins)
			}
		}
	}
	for i := 1; i < len(t.Command); i++ {
		name := leadingArg(t.Command[i])
		if name == "" || (dd >= 0 && i > dd) || (ins >= 0 && i >= ins) {
			continue
		}
		if info == nil {
			return // the schema's own problems are reported
		}
		if !info.props[name] {
			// Not an argument: checkTemplate reports an unknown name, and a
			// variable Latch itself sets (an execution ID) is never an option.
			continue
		}
		if cannotStartWithDash(info.schema.Properties[name]) {
			continue
		}
		p.addf(at, "%s: command[%d] %q: a value of %s starting with \"-\" (like \"--force\") would be read as an option; "+
			"list %s in %s (Latch then passes \"--\" before it), pin it in input_schema (type: string with a pattern anchored like \"^[A-Za-z0-9]\", or an enum), or join it to its option (\"--flag={{%s}}\")",
			what, i, t.Command[i], name, name, positionalKey, name)
	}
}

// cannotStartWithDash reports whether the schema of one property proves that
// every accepted value renders to a non-empty string not starting with "-".
func cannotStartWithDash(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	valueOK := func(v any) bool {
		str, err := plainString(v)
		return err == nil && str != "" && str[0] != '-'
	}
	if s.Const != nil {
		return valueOK(*s.Const)
	}
	if len(s.Enum) > 0 {
		for _, v := range s.Enum {
			if !valueOK(v) {
				return false
			}
		}
		return true
	}
	onlyString := s.Type == "string" || (s.Type == "" && len(s.Types) == 1 && s.Types[0] == "string")
	if onlyString {
		return s.Pattern != "" && patternNoLeadingDash(s.Pattern)
	}
	return nonNegativeNumber(s)
}

// nonNegativeNumber reports whether the schema accepts only numbers (type
// integer or number) bounded below by zero (minimum >= 0 or exclusiveMinimum
// >= 0): their JSON text starts with a digit. The one exception, a negative
// zero ("-0", which such a bound accepts), is caught at render time like any
// value that starts with "-": the call is refused, nothing runs.
func nonNegativeNumber(s *jsonschema.Schema) bool {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) == 0 {
		return false
	}
	for _, ty := range types {
		if ty != "integer" && ty != "number" {
			return false
		}
	}
	return (s.Minimum != nil && *s.Minimum >= 0) || (s.ExclusiveMinimum != nil && *s.ExclusiveMinimum >= 0)
}

// patternNoLeadingDash proves, conservatively, that every string the
// pattern matches (JSON Schema patterns are unanchored searches, compiled
// with Go's regexp as jsonschema-go does) is non-empty and does not start
// with "-". The proof accepts only patterns anchored at the start of the
// text ("^" without the m flag, or \A), in every alternative, followed by
// an element that consumes at least one character from a set without "-":
// a literal, a character class, or one of those repeated at least once (+,
// {n,} with n >= 1), possibly inside groups. Anything else, however
// harmless, is not proved: "(?m)^a" matches "-x\na", "^a?" matches "".
func patternNoLeadingDash(pattern string) bool {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return false
	}
	return anchoredNoDash(re.Simplify())
}

func anchoredNoDash(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpCapture:
		return anchoredNoDash(re.Sub[0])
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if !anchoredNoDash(sub) {
				return false
			}
		}
		return len(re.Sub) > 0
	case syntax.OpConcat:
		if len(re.Sub) > 0 && re.Sub[0].Op == syntax.OpBeginText {
			return startsNoDash(re.Sub[1:])
		}
	}
	return false
}

// startsNoDash: the concatenation seq begins by consuming a character that
// is not "-".
func startsNoDash(seq []*syntax.Regexp) bool {
	if len(seq) == 0 {
		return false
	}
	a := seq[0]
	switch a.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginText:
		return startsNoDash(seq[1:]) // consumes nothing, decides nothing
	case syntax.OpLiteral:
		return len(a.Rune) > 0 && a.Rune[0] != '-'
	case syntax.OpCharClass:
		return len(a.Rune) > 0 && !classHas(a.Rune, '-')
	case syntax.OpPlus:
		return startsNoDash(flat(a.Sub[0]))
	case syntax.OpRepeat:
		return a.Min >= 1 && startsNoDash(flat(a.Sub[0]))
	case syntax.OpCapture, syntax.OpConcat:
		return startsNoDash(flat(a))
	case syntax.OpAlternate:
		for _, sub := range a.Sub {
			if !startsNoDash(flat(sub)) {
				return false
			}
		}
		return len(a.Sub) > 0
	}
	return false
}

// flat returns re as a sequence: a concatenation's parts, a group's
// contents, or re alone.
func flat(re *syntax.Regexp) []*syntax.Regexp {
	switch re.Op {
	case syntax.OpCapture:
		return flat(re.Sub[0])
	case syntax.OpConcat:
		return re.Sub
	}
	return []*syntax.Regexp{re}
}

// classHas reports whether a character class (pairs of lo, hi) holds r.
func classHas(ranges []rune, r rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// checkOptionValue is the render-time rule: element i of argv (template el,
// rendered s) may start with "-" only if its template does, or a "--" came
// before it.
func (t *Tool) checkOptionValue(i int, el, s string, dashed bool) error {
	if dashed || !strings.HasPrefix(s, "-") || strings.HasPrefix(el, "-") {
		return nil
	}
	names, _ := templateArgs(el)
	return argError("argument %s: the value starts with \"-\", so %s would read command element %d as an option, not as data; pass a value that does not start with \"-\"",
		quotedList(names), t.Command[0], i)
}

func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// plainSSHSecrets refuses secret arguments in the env of a tool on a plain
// SSH target (no hostagent_socket). Without a host agent, env is applied by
// env(1) on the remote command line, so every value is in the argv of a
// process on the host, visible to all its users (/proc/<pid>/cmdline) and
// to sshd's logs; through a host agent env travels over its socket.
func (p *parser) plainSSHSecrets(f map[string]kv, t *Tool, tg *Target, what string) {
	if !tg.PlainSSH() || len(t.Fingerprint.Secret) == 0 {
		return
	}
	for _, k := range sortedKeys(t.Env) {
		names, _ := templateArgs(t.Env[k])
		for _, n := range names {
			if slices.Contains(t.Fingerprint.Secret, n) {
				p.addf(f["env"].keyNode, "%s: secret argument %s must not appear in env.%s: target %s is plain SSH (no hostagent_socket), where env is set on the remote command line and visible to every user of the host; run a host agent there", what, n, k, tg.Name)
			}
		}
	}
}
