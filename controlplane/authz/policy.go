// Package authz decides which caller may call which RPC of the control
// plane's gRPC API, on every listener (the unix socket, TCP and the
// console's in-process connection).
//
// Every RPC has one class in one table (policy_data.json, embedded):
//
//	agent-facing  fronts, operators and local callers (Submit, Get, Watch, …)
//	operator      operators and local callers (approvals, sessions, resolve, vault, tokens)
//	local         only local callers: the unix socket, an allowed uid (VaultUnlock)
//
// A caller is identified by how it connects (see Caller): the unix socket's
// peer uid (SO_PEERCRED), the verified mTLS client certificate's identity
// on TCP, or, on the console's in-process connection, the console session
// each call names (console.go). An RPC without an entry is refused to
// everyone. Every refusal is a gRPC PermissionDenied naming the RPC and the
// caller, and is journaled (deduplicated, see Refusal). Only the control plane's server package
// imports it (and controlplane/console, for ConsoleSessionKey: the console
// reaches the API over its own in-process connection, see console.go);
// handlers read the caller with CallerFrom.
package authz

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Class is the authorization class of an RPC.
type Class string

// Classes.
const (
	ClassAgent    Class = "agent-facing"
	ClassOperator Class = "operator"
	ClassLocal    Class = "local"
)

// Errors.
var (
	// ErrPolicy: the policy table is malformed.
	ErrPolicy = errors.New("authz: bad policy table")
	// ErrIdentity: an identity given in the configuration is malformed.
	ErrIdentity = errors.New("authz: bad identity")
	// ErrConfig: the configuration contradicts itself.
	ErrConfig = errors.New("authz: bad configuration")
)

//go:embed policy_data.json
var policyData []byte

// Entry is one RPC of the table.
type Entry struct {
	FullMethod string `json:"full_method"`
	Class      Class  `json:"class"`
	// Pending marks an RPC another change is adding: its class is decided
	// here first, and the table test tolerates that it is not registered yet.
	Pending bool `json:"pending,omitempty"`
}

// Policy is the parsed table.
type Policy struct {
	entries []Entry
	byName  map[string]Class
}

// DefaultPolicy is the embedded table.
func DefaultPolicy() (*Policy, error) { return ParsePolicy(policyData) }

// ParsePolicy parses a table: every entry names a full method
// ("/package.Service/Method") once, with a known class.
func ParsePolicy(data []byte) (*Policy, error) {
	var doc struct {
		Comment string  `json:"comment"`
		RPCs    []Entry `json:"rpcs"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	p := &Policy{byName: map[string]Class{}}
	for i, e := range doc.RPCs {
		if _, _, ok := splitMethod(e.FullMethod); !ok {
			return nil, fmt.Errorf("%w: entry %d: full_method %q is not /package.Service/Method", ErrPolicy, i, e.FullMethod)
		}
		switch e.Class {
		case ClassAgent, ClassOperator, ClassLocal:
		default:
			return nil, fmt.Errorf("%w: %s: class %q is not agent-facing, operator or local", ErrPolicy, e.FullMethod, e.Class)
		}
		if _, dup := p.byName[e.FullMethod]; dup {
			return nil, fmt.Errorf("%w: %s is listed twice", ErrPolicy, e.FullMethod)
		}
		p.byName[e.FullMethod] = e.Class
		p.entries = append(p.entries, e)
	}
	return p, nil
}

// Class returns an RPC's class; false when the table has no entry.
func (p *Policy) Class(fullMethod string) (Class, bool) {
	c, ok := p.byName[fullMethod]
	return c, ok
}

// Entries returns the table, sorted by full method.
func (p *Policy) Entries() []Entry {
	out := append([]Entry(nil), p.entries...)
	sort.Slice(out, func(i, j int) bool { return out[i].FullMethod < out[j].FullMethod })
	return out
}

// splitMethod splits "/pkg.Service/Method" into "Service" and "Method".
func splitMethod(full string) (service, method string, ok bool) {
	rest, found := strings.CutPrefix(full, "/")
	if !found {
		return "", "", false
	}
	svc, m, found := strings.Cut(rest, "/")
	if !found || svc == "" || m == "" || strings.Contains(m, "/") {
		return "", "", false
	}
	if i := strings.LastIndex(svc, "."); i >= 0 {
		svc = svc[i+1:]
	}
	return svc, m, svc != ""
}

// ShortMethod names an RPC as "Service/Method" (Admin/VaultPut), the way
// refusals and the CLI say it.
func ShortMethod(full string) string {
	s, m, ok := splitMethod(full)
	if !ok {
		return full
	}
	return s + "/" + m
}
