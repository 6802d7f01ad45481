// Package config reads the binaries' config files (YAML, --config FILE)
// into their flag sets. The keys are derived from the flag set, so a new
// flag has a key without anyone listing it:
//
//   - a flag's key is its name with "-" written "_"; a name starting with
//     "tls-" is a key of the tls: section (--tls-cert-file is
//     tls: {cert_file: ...});
//   - its environment variable is the binary's prefix (LATCH_SERVE_,
//     LATCH_MCP_, LATCH_HOSTAGENT_) and the key in upper case with "." and
//     "-" written "_" (LATCH_MCP_TLS_CERT_FILE);
//   - precedence: defaults < file < environment < flags;
//   - unknown keys and wrong types are refused with file:line
//     (internal/yamlpos), every problem at once;
//   - secrets only by reference: a key whose value would be a secret is
//     refused, and the message names the *_file key to use;
//   - deprecated flag names stay as aliases (Alias) and have no key.
//
// The three binaries import it (controlplane/cli for latch serve,
// mcpfront/cmd/latch-mcp, hostagent/cmd/latch-hostagent); it imports only
// internal/yamlpos and YAML.
package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/latchhq/latch/internal/yamlpos"
)

// FlagName is the flag naming the config file.
const FlagName = "config"

// MaxFileSize is the largest config file read.
const MaxFileSize = 1 << 20

// deprecatedPrefix starts the usage of an alias flag (Alias).
const deprecatedPrefix = "deprecated alias of --"

// removedPrefix starts the usage of a flag kept only to explain it was
// removed: such a flag has no key.
const removedPrefix = "removed:"

var (
	// ErrInvalid is matched by every error Parse and Load return for a
	// bad file or environment variable (errors.Is).
	ErrInvalid = errors.New("config: invalid configuration")
)

// Binary says how one binary's flags become config keys.
type Binary struct {
	// Name is the command as users type it ("latch serve").
	Name string
	// EnvPrefix is put before every key's environment name ("LATCH_SERVE_").
	EnvPrefix string
	// NoKey names flags that are about one invocation, not a configuration
	// (--version, --stdio); --config and removed flags never have a key.
	NoKey []string
	// Reloadable are the keys a running process applies when it re-reads
	// the file on SIGHUP; every other changed key needs a restart.
	Reloadable []string
	// Secret, when set, refuses a value written inline in the file: it
	// returns what to write instead, or "" when the value is fine.
	Secret func(key, value string) string
}

// Error lists what is wrong with a configuration: problems of the file
// (file:line) and of the environment.
type Error struct {
	Problems []yamlpos.Problem
}

func (e *Error) Error() string { return yamlpos.Join(e.Problems) }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Key is the config key of the flag named name.
func Key(name string) string {
	if rest, ok := strings.CutPrefix(name, "tls-"); ok {
		return "tls." + strings.ReplaceAll(rest, "-", "_")
	}
	return strings.ReplaceAll(name, "-", "_")
}

// EnvName is the environment variable of key for a binary with prefix.
func (b Binary) EnvName(key string) string {
	return b.EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// Register adds --config FILE to fs and returns its value.
func Register(fs *flag.FlagSet) *string {
	return fs.String(FlagName, "", "read settings from this YAML file (keys: docs/reference/config.md); the environment and flags override it")
}

// Alias registers old as a deprecated name of the flag canonical, which
// must be defined already. It shares canonical's value and has no key.
func Alias(fs *flag.FlagSet, old, canonical string) {
	f := fs.Lookup(canonical)
	if f == nil {
		panic("config: Alias of undefined flag --" + canonical) // a programming error at start-up
	}
	fs.Var(f.Value, old, deprecatedPrefix+canonical)
}

// AliasOf returns the canonical name of a deprecated alias flag.
func AliasOf(f *flag.Flag) (string, bool) {
	return strings.CutPrefix(f.Usage, deprecatedPrefix)
}

// Entry is one key of a binary.
type Entry struct {
	Key  string
	Flag *flag.Flag
	// Type is how the file writes it: string, bool, int, duration, list.
	Type string
	// Reload is whether a running process applies a change on SIGHUP.
	Reload bool
}

// Keys returns the binary's keys in fs, sorted, with the aliases of each.
func (b Binary) Keys(fs *flag.FlagSet) []Entry {
	var out []Entry
	fs.VisitAll(func(f *flag.Flag) {
		if !b.hasKey(f) {
			return
		}
		k := Key(f.Name)
		out = append(out, Entry{Key: k, Flag: f, Type: valueType(f), Reload: slices.Contains(b.Reloadable, k)})
	})
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Aliases returns the deprecated flag names of canonical in fs.
func Aliases(fs *flag.FlagSet, canonical string) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if c, ok := AliasOf(f); ok && c == canonical {
			out = append(out, f.Name)
		}
	})
	return out
}

func (b Binary) hasKey(f *flag.Flag) bool {
	if f.Name == FlagName || strings.HasPrefix(f.Usage, removedPrefix) || slices.Contains(b.NoKey, f.Name) {
		return false
	}
	_, alias := AliasOf(f)
	return !alias
}

func valueType(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		if strings.Contains(f.Usage, "repeat") {
			return "list"
		}
		return "string"
	}
	switch g.Get().(type) {
	case bool:
		return "bool"
	case int, int64, uint, uint64:
		return "int"
	case float64:
		return "number"
	case time.Duration:
		return "duration"
	default:
		return "string"
	}
}

// Parse parses args into fs (which holds Register's --config), then fills
// every flag not given on the command line from the environment and then
// from the file --config names: defaults < file < environment < flags. It
// returns the file's path ("" without --config). Flag syntax errors are
// returned as fs.Parse returns them; everything else matches ErrInvalid.
func (b Binary) Parse(fs *flag.FlagSet, args []string, getenv func(string) string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	file := ""
	if f := fs.Lookup(FlagName); f != nil {
		file = f.Value.String()
	}
	return file, b.Apply(fs, file, getenv)
}

// Apply fills the flags of fs not set on the command line: from the
// environment, then from file (none when "").
func (b Binary) Apply(fs *flag.FlagSet, file string, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if c, ok := AliasOf(f); ok {
			name = c
		}
		given[name] = true
	})
	var problems []yamlpos.Problem
	keys := b.Keys(fs)
	for _, e := range keys {
		if given[e.Flag.Name] || getenv == nil {
			continue
		}
		env := b.EnvName(e.Key)
		v := getenv(env)
		if v == "" {
			continue
		}
		if err := fs.Set(e.Flag.Name, v); err != nil {
			problems = append(problems, yamlpos.Problem{File: "environment", Msg: fmt.Sprintf("%s: %v (it sets --%s)", env, err, e.Flag.Name)})
			continue
		}
		given[e.Flag.Name] = true
	}
	if file != "" {
		problems = append(problems, b.applyFile(fs, file, keys, given)...)
	}
	if len(problems) > 0 {
		return &Error{Problems: problems}
	}
	return nil
}

// Load reads file into fs as if no flag and no environment variable were
// given (latch config validate, a reload).
func (b Binary) Load(fs *flag.FlagSet, file string) error {
	return b.Apply(fs, file, nil)
}

func (b Binary) applyFile(fs *flag.FlagSet, file string, keys []Entry, given map[string]bool) []yamlpos.Problem {
	data, err := os.ReadFile(file)
	if err != nil {
		return []yamlpos.Problem{{File: file, Msg: fmt.Sprintf("cannot read the config file: %v (give the path of a readable YAML file with --%s)", err, FlagName)}}
	}
	if len(data) > MaxFileSize {
		return []yamlpos.Problem{{File: file, Msg: fmt.Sprintf("the config file is larger than %d bytes", MaxFileSize)}}
	}
	r := &yamlpos.Reader{File: file, Data: data}
	root := r.Document("a config file")
	if root == nil || yamlpos.Empty(root) {
		return r.Problems // an empty file sets nothing
	}
	byKey := map[string]Entry{}
	var top []string
	sections := map[string][]string{}
	for _, e := range keys {
		byKey[e.Key] = e
		if sec, k, ok := strings.Cut(e.Key, "."); ok {
			if _, seen := sections[sec]; !seen {
				top = append(top, sec)
			}
			sections[sec] = append(sections[sec], k)
			continue
		}
		top = append(top, e.Key)
	}
	slices.Sort(top)
	for _, kv := range sortedPairs(r.Fields(root, b.Name+" config", top)) {
		sub, isSection := sections[kv.Key]
		if !isSection {
			b.set(r, fs, byKey[kv.Key], kv, given)
			continue
		}
		if yamlpos.IsNull(kv.Val) {
			continue
		}
		for _, skv := range sortedPairs(r.Fields(kv.Val, kv.Key, sub)) {
			b.set(r, fs, byKey[kv.Key+"."+skv.Key], skv, given)
		}
	}
	r.Sort()
	return r.Problems
}

// sortedPairs returns m's entries in file order.
func sortedPairs(m map[string]yamlpos.KV) []yamlpos.KV {
	out := make([]yamlpos.KV, 0, len(m))
	for _, kv := range m {
		out = append(out, kv)
	}
	slices.SortFunc(out, func(a, b yamlpos.KV) int { return a.KeyNode.Line - b.KeyNode.Line })
	return out
}

// set checks one key's value in the file and, unless the environment or a
// flag gave it, sets the flag.
func (b Binary) set(r *yamlpos.Reader, fs *flag.FlagSet, e Entry, kv yamlpos.KV, given map[string]bool) {
	n := yamlpos.Deref(kv.Val)
	if yamlpos.IsNull(n) {
		return // "key:" with no value leaves the default
	}
	var values []string
	switch e.Type {
	case "list":
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				c = yamlpos.Deref(c)
				if !isScalar(c, "!!str", "!!int") {
					r.Addf(c, "%s[%d]: must be a string", e.Key, i)
					return
				}
				values = append(values, c.Value)
			}
			break
		}
		if !isScalar(n, "!!str", "!!int") {
			r.Addf(kv.KeyNode, "%s: must be a string or a list of strings", e.Key)
			return
		}
		values = []string{n.Value}
	case "bool":
		if !isScalar(n, "!!bool") {
			r.Addf(kv.KeyNode, "%s: must be true or false", e.Key)
			return
		}
		var v bool
		if err := n.Decode(&v); err != nil {
			r.Addf(kv.KeyNode, "%s: must be true or false", e.Key)
			return
		}
		values = []string{strconv.FormatBool(v)}
	case "int":
		if !isScalar(n, "!!int") {
			r.Addf(kv.KeyNode, "%s: must be a whole number, got %q", e.Key, n.Value)
			return
		}
		values = []string{strings.ReplaceAll(n.Value, "_", "")}
	case "number":
		if !isScalar(n, "!!int", "!!float") {
			r.Addf(kv.KeyNode, "%s: must be a number, got %q", e.Key, n.Value)
			return
		}
		values = []string{n.Value}
	case "duration":
		if !isScalar(n, "!!str") {
			r.Addf(kv.KeyNode, "%s: must be a duration like 30s, 10m or 2h (a string), got %q", e.Key, n.Value)
			return
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			r.Addf(kv.KeyNode, "%s: %q is not a duration like 30s, 10m or 2h", e.Key, n.Value)
			return
		}
		values = []string{n.Value}
	default:
		if !isScalar(n, "!!str") {
			r.Addf(kv.KeyNode, "%s: must be a string (quote it)", e.Key)
			return
		}
		values = []string{n.Value}
	}
	for _, v := range values {
		if msg := b.secret(e.Key, v); msg != "" {
			r.Addf(kv.KeyNode, "%s: %s", e.Key, msg)
			return
		}
	}
	if given[e.Flag.Name] {
		return
	}
	for _, v := range values {
		if err := fs.Set(e.Flag.Name, v); err != nil {
			r.Addf(kv.KeyNode, "%s: %v", e.Key, err)
			return
		}
	}
}

func isScalar(n *yaml.Node, tags ...string) bool {
	return n != nil && n.Kind == yaml.ScalarNode && slices.Contains(tags, n.ShortTag())
}

// secretWords end the names of keys whose values are secrets themselves.
var secretWords = []string{"password", "passphrase", "secret", "token", "key", "credential"}

// secret is what to write instead of an inline secret value ("" when fine).
func (b Binary) secret(key, value string) string {
	name := key[strings.LastIndex(key, ".")+1:]
	for _, w := range secretWords {
		if strings.HasSuffix(name, w) {
			return fmt.Sprintf("a secret is never written in the config file: put it in a file readable only by the service and give its path as %s_file", key)
		}
	}
	if b.Secret != nil {
		return b.Secret(key, value)
	}
	return ""
}

// Changed returns the keys whose values differ between two flag sets of
// the same binary (the running configuration and the re-read one).
func (b Binary) Changed(running, reread *flag.FlagSet) (reload, restart []string) {
	for _, e := range b.Keys(running) {
		f := reread.Lookup(e.Flag.Name)
		if f == nil || f.Value.String() == e.Flag.Value.String() {
			continue
		}
		if e.Reload {
			reload = append(reload, e.Key)
		} else {
			restart = append(restart, e.Key)
		}
	}
	return reload, restart
}

// Reread builds a fresh flag set with build, parses the same args and
// environment into it (the file is read again), and says which keys
// differ from running: the ones a running process applies and the ones
// that need a restart. On error nothing should change.
func (b Binary) Reread(running *flag.FlagSet, build func() *flag.FlagSet, args []string, getenv func(string) string) (reread *flag.FlagSet, reload, restart []string, err error) {
	fs := build()
	if _, err := b.Parse(fs, args, getenv); err != nil {
		return nil, nil, nil, err
	}
	reload, restart = b.Changed(running, fs)
	return fs, reload, restart, nil
}
