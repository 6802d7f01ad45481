package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	explainpkg "github.com/latchhq/latch/controlplane/explain"
	"github.com/latchhq/latch/internal/buildinfo"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Every command's --json output is one Go type, documented with an example
// in docs/reference/cli-json.md (TestJSONShapes runs each command and
// decodes its output strictly into its type, and checks the page lists
// every command that has --json). Records (executions, journal entries,
// sessions, tokens, upstream listings) are jsonRecord values: the proto
// message in the jsonView convention, its field names those of the .proto.

// jsonRecord is a record of message type M as --json prints it (jsonView).
// Decoding checks every field name against M's descriptor, nested
// messages included: a field that is not in the .proto is an error.
type jsonRecord[M proto.Message] struct {
	msg M
	// Fields are the decoded record's fields (set by UnmarshalJSON).
	Fields map[string]json.RawMessage
}

func recordOf[M proto.Message](m M) jsonRecord[M] { return jsonRecord[M]{msg: m} }

func (r jsonRecord[M]) MarshalJSON() ([]byte, error) { return json.Marshal(jsonView(r.msg)) }

func (r *jsonRecord[M]) UnmarshalJSON(b []byte) error {
	var zero M
	fields, err := checkRecord(zero.ProtoReflect().Descriptor(), b)
	if err != nil {
		return err
	}
	r.Fields = fields
	return nil
}

// checkRecord decodes b as a record of md, refusing a field md lacks.
func checkRecord(md protoreflect.MessageDescriptor, b []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("%s: %w", md.FullName(), err)
	}
	for name, v := range fields {
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return nil, fmt.Errorf("json: unknown field %q of %s", name, md.FullName())
		}
		if err := checkValue(fd, v); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

func checkValue(fd protoreflect.FieldDescriptor, v json.RawMessage) error {
	switch {
	case fd.IsList():
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return fmt.Errorf("%s: want a list: %w", fd.FullName(), err)
		}
		for _, it := range items {
			if err := checkScalar(fd, it); err != nil {
				return err
			}
		}
		return nil
	case fd.IsMap():
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("%s: want an object: %w", fd.FullName(), err)
		}
		for _, mv := range m {
			if err := checkScalar(fd.MapValue(), mv); err != nil {
				return err
			}
		}
		return nil
	}
	return checkScalar(fd, v)
}

func checkScalar(fd protoreflect.FieldDescriptor, v json.RawMessage) error {
	if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
		return nil
	}
	if fd.Message().FullName() == "google.protobuf.Timestamp" {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("%s: want an RFC 3339 time string: %w", fd.FullName(), err)
		}
		return nil
	}
	_, err := checkRecord(fd.Message(), v)
	return err
}

// jsonFlag defines --json on fs, with help, when sub is one of subs (the
// subcommands that print JSON; none given: every one). The others get no
// --json, so a flag that would do nothing is refused.
func jsonFlag(fs *flag.FlagSet, sub, help string, subs ...string) *bool {
	if len(subs) > 0 && !slices.Contains(subs, sub) {
		return new(bool)
	}
	return fs.Bool("json", false, help+" (docs/reference/cli-json.md)")
}

// The --json types of the commands that print records.
type (
	// execLine is one line of `latch exec list --json` and of `latch
	// exec watch --json`.
	execLine = jsonRecord[*recordv1.Execution]
	// execShowJSON is `latch exec show --json` and `latch approvals show
	// --json`.
	execShowJSON struct {
		Execution jsonRecord[*recordv1.Execution]      `json:"execution"`
		Result    *jsonRecord[*recordv1.Result]        `json:"result,omitempty"`
		Journal   []jsonRecord[*recordv1.JournalEntry] `json:"journal"`
	}
	// explainJSON is `latch exec explain --json`.
	explainJSON = explainpkg.Report
	// sessionLine is one line of `latch session list --json`.
	sessionLine = jsonRecord[*recordv1.Session]
	// tokenLine is one line of `latch token list --json` and `latch
	// operator token list --json`.
	tokenLine = jsonRecord[*recordv1.AgentToken]
	// upstreamToolsJSON is `latch catalog upstream-tools NAME --json`.
	upstreamToolsJSON = jsonRecord[*controlplanev1.ListUpstreamToolsResponse]
	// eventsListJSON is `latch events list --json`.
	eventsListJSON = jsonRecord[*controlplanev1.ListEventsResponse]
	// observeReportJSON is `latch observe report --json`.
	observeReportJSON = jsonRecord[*controlplanev1.ObserveReportResponse]
	// versionJSON is `latch version --json`.
	versionJSON = buildinfo.Info
)

// approvalCardJSON is one line of `latch approvals list --json`: the
// execution's record with waits_for, what it waits for, beside its fields.
type approvalCardJSON struct {
	Execution jsonRecord[*recordv1.Execution]
	WaitsFor  string
}

func (c approvalCardJSON) MarshalJSON() ([]byte, error) {
	v := jsonView(c.Execution.msg)
	v["waits_for"] = c.WaitsFor
	return json.Marshal(v)
}

func (c *approvalCardJSON) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	w, ok := fields["waits_for"]
	if !ok {
		return fmt.Errorf("json: approval card without waits_for")
	}
	if err := json.Unmarshal(w, &c.WaitsFor); err != nil {
		return err
	}
	delete(fields, "waits_for")
	rest, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	return c.Execution.UnmarshalJSON(rest)
}

// vaultStatusJSON is `latch vault status --json`.
type vaultStatusJSON struct {
	Locked      bool   `json:"locked"`
	Initialized bool   `json:"initialized"`
	Epoch       uint64 `json:"epoch"`
	// Names is how many credentials the vault holds.
	Names int32  `json:"names"`
	Path  string `json:"path"`
	// Method is how it was unlocked ("" while locked).
	Method string `json:"method"`
}

func vaultStatusView(st *controlplanev1.VaultStatusResponse) vaultStatusJSON {
	return vaultStatusJSON{Locked: st.GetLocked(), Initialized: st.GetInitialized(), Epoch: st.GetEpoch(), Names: st.GetNames(), Path: st.GetPath(), Method: st.GetMethod()}
}

// vaultListJSON is `latch vault list --json`: the credentials' names,
// never a value.
type vaultListJSON struct {
	Names []string `json:"names"`
}
