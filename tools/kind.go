package tools

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/latchhq/latch/internal/yamlpos"
	"go.yaml.in/yaml/v3"
)

// Kind is the catalog half of a channel kind: the keys its targets and its
// tools' actions take, and how they are parsed and validated. The loader
// parses everything every tool shares (name, target, input_schema, replay,
// approval, attach_window, task, fingerprint, timeout) and the target keys
// credential, timeout and settle when the kind lists them; the kind parses
// the rest, and says which replay classes its Query can back by refusing
// the others.
//
// Implemented by HTTPKind, SSHKind, LocalKind and MCPKind in this package,
// whose settings are structs embedded in Target and Tool (HTTPTarget,
// HostTarget, HTTPAction, CommandAction, UpstreamAction, next to each kind),
// and by the package of any new channel kind (which keeps its own settings
// in Target.Spec and Tool.Action). The control-plane half of a kind (its
// engine.Channel) lives in that kind's package; controlplane/channels lists
// the built-in kinds.
type Kind interface {
	// Channel is the kind's name, the value of a target's channel key.
	Channel() Channel
	// TargetKeys lists the keys a target of this kind may have, channel
	// included; nil when targets of the kind are not declared under
	// targets: (the mcp kind's come from upstreams:).
	TargetKeys() []string
	// ParseTarget parses the kind's own target keys into s.Target.
	ParseTarget(s *TargetSpec)
	// ToolKeys lists the keys of a tool's action for this kind (request:,
	// command:, ...). A tool may hold no action key of another kind.
	ToolKeys() []string
	// ParseTool parses the tool's action keys into s.Tool. It reports
	// every key of s.Foreign() and refuses the replay classes its Query
	// cannot back.
	ParseTool(s *ToolSpec)
}

// HostChecks are the checks of the machine a catalog is loaded on, made by
// the kinds that implement HostChecker (that a local target's socket
// exists). The control plane's loader makes them; Parse and Load of the
// built-in registry do not (its kinds make none).
type HostChecks struct {
	// Skip makes none (latch catalog validate --no-host-checks, on a
	// machine that is not the control plane's).
	Skip bool
	// Own are host agent sockets the loading process serves itself (latch
	// dev's DATA/hostagent.sock): they exist once it runs, so they are not
	// checked.
	Own []string
}

// HostChecker is a kind whose validation checks the machine the catalog is
// loaded on; WithHostChecks returns the kind making checks h. Implemented
// by hostchannel.LocalKind.
type HostChecker interface {
	Kind
	WithHostChecks(h HostChecks) Kind
}

// WithHostChecks returns the registry with its HostChecker kinds making
// checks h (the other kinds as they are).
func (r *Registry) WithHostChecks(h HostChecks) *Registry {
	out := &Registry{byCh: map[Channel]Kind{}}
	for _, k := range r.kinds {
		if hc, ok := k.(HostChecker); ok {
			k = hc.WithHostChecks(h)
		}
		out.byCh[k.Channel()] = k
		out.kinds = append(out.kinds, k)
	}
	return out
}

// BuiltInKinds are the catalog halves of the channel kinds Latch ships,
// the ones Load and Parse accept.
func BuiltInKinds() []Kind {
	return []Kind{HTTPKind{}, SSHKind{}, LocalKind{}, MCPKind{}}
}

// builtIn is the registry of Load and Parse, and of Target.Kind for a
// target built outside the loader.
var builtIn = mustRegistry(BuiltInKinds()...)

func mustRegistry(kinds ...Kind) *Registry {
	r, err := NewRegistry(kinds...)
	if err != nil {
		panic(err)
	}
	return r
}

// Registry is a set of channel kinds a catalog may use.
type Registry struct {
	kinds []Kind
	byCh  map[Channel]Kind
}

// NewRegistry returns the registry of kinds; two kinds with one name are
// an error.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r := &Registry{byCh: map[Channel]Kind{}}
	for _, k := range kinds {
		ch := k.Channel()
		if !nameRE.MatchString(string(ch)) {
			return nil, fmt.Errorf("tools: channel kind name %q: must match %s", ch, nameRE)
		}
		if _, dup := r.byCh[ch]; dup {
			return nil, fmt.Errorf("tools: channel kind %q registered twice", ch)
		}
		r.byCh[ch] = k
		r.kinds = append(r.kinds, k)
	}
	return r, nil
}

// Kind returns the kind named ch (nil when the registry has none).
func (r *Registry) Kind(ch Channel) Kind { return r.byCh[ch] }

// Kinds returns the registry's kinds in registration order.
func (r *Registry) Kinds() []Kind { return slices.Clone(r.kinds) }

// Known reports whether ch is a kind of the registry.
func (r *Registry) Known(ch Channel) bool { return r.byCh[ch] != nil }

// targetChannels are the names a target's channel key may take.
func (r *Registry) targetChannels() []string {
	var out []string
	for _, k := range r.kinds {
		if k.TargetKeys() != nil {
			out = append(out, string(k.Channel()))
		}
	}
	return out
}

// allTargetKeys is every key some kind's targets take, in first-seen order.
func (r *Registry) allTargetKeys() []string {
	out := []string{"channel", "mode"}
	for _, k := range r.kinds {
		for _, key := range k.TargetKeys() {
			if !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	return out
}

// actionKeys is every key of some kind's tool actions.
func (r *Registry) actionKeys() []string {
	var out []string
	for _, k := range r.kinds {
		for _, key := range k.ToolKeys() {
			if !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	return out
}

// Load reads and validates the catalog at path with the registry's kinds.
// A bad catalog is refused whole: the error is a *LoadError listing every
// problem.
func (r *Registry) Load(path string) (*Catalog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tools: open catalog (set its path with --catalog): %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxCatalogSize+1))
	if err != nil {
		return nil, fmt.Errorf("tools: read catalog %s: %w", path, err)
	}
	return r.Parse(path, data)
}

// Parse validates a catalog held in memory with the registry's kinds;
// filename is used in messages. It returns a *LoadError (errors.Is(err,
// ErrInvalid)) listing every problem as "file:line: what is wrong" when the
// catalog is refused.
func (r *Registry) Parse(filename string, data []byte) (*Catalog, error) {
	p := &parser{Reader: yamlpos.Reader{File: filename}, kinds: r}
	cat := p.parse(data)
	p.Sort()
	if len(p.Problems) > 0 {
		return nil, &LoadError{Problems: p.Problems}
	}
	cat.Source = filename
	cat.Warnings = p.Warnings
	return cat, nil
}

// Kind returns the target's channel kind: the one it was loaded with, or
// the built-in kind of its channel for a target built in code (nil when
// there is none).
func (t *Target) Kind() Kind {
	if t.kind != nil {
		return t.kind
	}
	return builtIn.Kind(t.Channel)
}

// Fields are the keys of one catalog entry (a target or a tool) handed to
// a kind: typed accessors that record a problem, at the key's line and
// prefixed with the entry ("target jobs: ..."), when a value is malformed.
type Fields struct {
	p    *parser
	f    map[string]kv
	at   *yaml.Node // the entry's key
	what string
}

// Has reports whether the entry has key.
func (s *Fields) Has(key string) bool { _, ok := s.f[key]; return ok }

// Problemf records a problem at key's line (the entry's line when the
// entry has no such key, or key is ""), prefixed with the entry's name.
func (s *Fields) Problemf(key, format string, args ...any) {
	n := s.at
	if e, ok := s.f[key]; ok {
		n = e.keyNode
	}
	s.p.addf(n, "%s: %s", s.what, fmt.Sprintf(format, args...))
}

// Warnf records a warning at key's line (as Problemf): something the
// loader cannot check from here; the catalog still loads.
func (s *Fields) Warnf(key, format string, args ...any) {
	n := s.at
	if e, ok := s.f[key]; ok {
		n = e.keyNode
	}
	s.p.Warnf(n, "%s: %s", s.what, fmt.Sprintf(format, args...))
}

// Require records "KEY is required (why)" unless the entry has key, and
// reports whether it has.
func (s *Fields) Require(key, why string) bool {
	if s.Has(key) {
		return true
	}
	msg := key + " is required"
	if why != "" {
		msg += " (" + why + ")"
	}
	s.Problemf("", "%s", msg)
	return false
}

// String returns key's value, a non-empty string.
func (s *Fields) String(key string) (string, bool) {
	e, ok := s.f[key]
	if !ok {
		return "", false
	}
	return s.p.str(e, s.what+": "+key)
}

// Strings returns key's value, a list of non-empty strings.
func (s *Fields) Strings(key string) ([]string, bool) {
	e, ok := s.f[key]
	if !ok {
		return nil, false
	}
	out, _, ok := s.p.strList(e, s.what+": "+key)
	return out, ok
}

// Bool returns key's value, true or false.
func (s *Fields) Bool(key string) (bool, bool) {
	e, ok := s.f[key]
	if !ok {
		return false, false
	}
	return s.p.boolean(e, s.what+": "+key)
}

// Duration returns key's value, a positive duration like 30s.
func (s *Fields) Duration(key string) (time.Duration, bool) {
	e, ok := s.f[key]
	if !ok {
		return 0, false
	}
	return s.p.duration(e, s.what+": "+key)
}

// TargetSpec is a target being loaded, handed to its kind's ParseTarget.
type TargetSpec struct {
	Fields
	// Target has Name, Channel, Credential, Timeout and Settle parsed; the
	// kind fills the rest (its own settings in Spec).
	Target *Target
	entry  kv
}

// ToolSpec is a tool being loaded, handed to the kind of its target's
// ParseTool.
type ToolSpec struct {
	Fields
	// Tool has everything but its action parsed; the kind fills the action
	// (its own in Action).
	Tool *Tool
	// Target is the tool's target, of this kind.
	Target *Target
	// ReplayOK says Tool.Replay parsed; a kind checks the replay class only
	// then.
	ReplayOK bool
	info     *schemaInfo
	foreign  []string
}

// Foreign lists the action keys of other kinds the tool has, each to be
// reported by the kind.
func (s *ToolSpec) Foreign() []string { return s.foreign }

// Template returns key's value, a string template whose {{arg}}
// references must name arguments of input_schema that always have a value.
func (s *ToolSpec) Template(key string) (string, bool) {
	v, ok := s.String(key)
	if !ok {
		return "", false
	}
	before := len(s.p.Problems)
	s.p.checkTemplate(s.f[key].keyNode, v, s.what+": "+key, s.info, refAlways)
	return v, len(s.p.Problems) == before
}

// ReportForeign records the generic problem for each key of s.Foreign().
func (s *ToolSpec) ReportForeign() {
	for _, k := range s.foreign {
		s.Problemf(k, "%s does not apply to %s tools (target %s is %s); its keys are %s", k, s.Target.Channel, s.Target.Name, s.Target.Channel, strings.Join(s.Target.Kind().ToolKeys(), ", "))
	}
}
