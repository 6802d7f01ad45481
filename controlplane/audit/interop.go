package audit

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Export formats of `latch audit export --format`. FormatJournal is the
// journal's own export (journal.ExportFormat), the one `latch audit verify
// --export` reads. The others are drafts: the field layouts of the
// proposed MCP audit record and of decision/outcome records, so that
// tools built for those proposals can read Latch's journal. They are
// derived views; the journal export stays the evidence.
const (
	FormatJournal  = "journal"
	FormatMCPAudit = "mcp-audit-draft"
	FormatDecision = "mcp-decision-draft"
)

// Formats are the export formats, the default first.
var Formats = []string{FormatJournal, FormatMCPAudit, FormatDecision}

// AuditRecord is one line of FormatMCPAudit: one per journal record, in
// journal order, chained. Every line is RFC 8785 (JCS) canonical JSON;
// event_hash is the SHA-256 (hex) of the line's canonical JSON without
// the event_hash member;
// previous_hash is the event_hash of the line before ("" on the first).
// latch ties the line to the Merkle journal: the record's leaf hash, which
// `latch audit verify` and receipts check.
type AuditRecord struct {
	EventID      string     `json:"event_id"`
	EventHash    string     `json:"event_hash,omitempty"`
	EventType    string     `json:"event_type"`
	Latch        AuditLatch `json:"latch"`
	Outcome      string     `json:"outcome"`
	PreviousHash string     `json:"previous_hash"`
	Principal    string     `json:"principal"`
	Time         string     `json:"time"`
	Tool         string     `json:"tool,omitempty"`
}

// AuditLatch is the Latch part of an AuditRecord.
type AuditLatch struct {
	ExecutionID  string `json:"execution_id,omitempty"`
	JournalIndex int64  `json:"journal_index"`
	LeafHash     string `json:"leaf_hash"`
	State        string `json:"state,omitempty"`
}

// DecisionRecord is a line of FormatDecision for a record that decided
// whether an execution may run: allow (authorized), deny (rejected), hold
// (awaiting approval) or cancel.
type DecisionRecord struct {
	Type         string `json:"type"` // "decision"
	DecisionID   string `json:"decision_id"`
	ExecutionID  string `json:"execution_id"`
	Time         string `json:"time"`
	Principal    string `json:"principal"`
	Tool         string `json:"tool"`
	Decision     string `json:"decision"`
	DecidedBy    string `json:"decided_by"`
	Reason       string `json:"reason,omitempty"`
	JournalIndex int64  `json:"journal_index"`
	LeafHash     string `json:"leaf_hash"`
}

// OutcomeRecord is a line of FormatDecision for a record that settled what
// an execution did: succeeded, failed (at the target), unknown, not
// executed, or review (an operator decides).
type OutcomeRecord struct {
	Type         string `json:"type"` // "outcome"
	OutcomeID    string `json:"outcome_id"`
	ExecutionID  string `json:"execution_id"`
	Time         string `json:"time"`
	Principal    string `json:"principal"`
	Tool         string `json:"tool"`
	Outcome      string `json:"outcome"`
	TargetStatus int32  `json:"target_status,omitempty"`
	ResultSHA256 string `json:"result_sha256,omitempty"`
	JournalIndex int64  `json:"journal_index"`
	LeafHash     string `json:"leaf_hash"`
}

// ExportAs writes the journal of src (a data dir or --store URL) in format.
func ExportAs(src string, w io.Writer, format string) error {
	if format == FormatJournal || format == "" {
		return Export(src, w)
	}
	if format != FormatMCPAudit && format != FormatDecision {
		return fmt.Errorf("audit: unknown export format %q (want %s)", format, strings.Join(Formats, ", "))
	}
	d, err := Open(src)
	if err != nil {
		return err
	}
	defer d.Close()
	origin := "latch"
	if i := strings.IndexByte(d.Verifier, '+'); i > 0 {
		origin = d.Verifier[:i]
	}
	bw := bufio.NewWriter(w)
	prev := ""
	for i := range d.Size() {
		data, err := d.Entry(i)
		if err != nil {
			return fmt.Errorf("audit: export record %d: %w (latch audit verify says more)", i, err)
		}
		e, err := journal.DecodeEntry(data)
		if err != nil {
			return fmt.Errorf("audit: export record %d: %w (latch audit verify says more)", i, err)
		}
		lh := journal.LeafHash(data)
		leaf := hex.EncodeToString(lh[:])
		var line any
		switch format {
		case FormatMCPAudit:
			a := auditRecord(origin, i, leaf, e)
			a.PreviousHash = prev
			b, err := canonical(a)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			a.EventHash = hex.EncodeToString(sum[:])
			prev = a.EventHash
			line = a
		case FormatDecision:
			line = decisionOrOutcome(origin, i, leaf, e)
		}
		if line == nil {
			continue
		}
		b, err := canonical(line)
		if err != nil {
			return err
		}
		if _, err := bw.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// canonical is v's RFC 8785 (JCS) form.
func canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return fingerprint.Canonicalize(b)
}

func stateName(s recordv1.State) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STATE_"))
}

func entryTime(e *recordv1.JournalEntry) string {
	if e.GetTime() == nil {
		return ""
	}
	return e.GetTime().AsTime().UTC().Format(time.RFC3339Nano)
}

func principal(e *recordv1.JournalEntry) string {
	if a := e.GetActor(); a != "" {
		return a
	}
	return e.GetExecution().GetActor()
}

func auditRecord(origin string, i int64, leaf string, e *recordv1.JournalEntry) *AuditRecord {
	x := e.GetExecution()
	a := &AuditRecord{
		EventID: fmt.Sprintf("%s/%d", origin, i), EventType: eventType(e), Principal: principal(e), Time: entryTime(e),
		Tool:  x.GetTool(),
		Latch: AuditLatch{ExecutionID: e.GetExecutionId(), JournalIndex: i, LeafHash: leaf},
	}
	if x != nil {
		a.Latch.State = stateName(e.GetTo())
		a.Outcome = outcomeOf(e)
	} else {
		a.Outcome = "recorded"
	}
	return a
}

// eventType is the record's kind, prefixed by what it is about:
// "tool_call.transition", "session.session_started", "token.token_created".
func eventType(e *recordv1.JournalEntry) string {
	kind := lifecycle.EntryKindNameOf(e)
	if kind == "" {
		kind = "transition"
	}
	switch {
	case e.GetExecution() != nil:
		return "tool_call." + kind
	case e.GetSession() != nil:
		return "session." + kind
	case e.GetToken() != nil:
		return "token." + kind
	case e.GetCatalog() != nil:
		return "catalog." + kind
	case e.GetUpstreamToolPin() != nil:
		return "upstream_tool." + kind
	case e.GetSecret() != nil:
		return "secret." + kind
	}
	return "latch." + kind
}

// outcomeOf is the draft's outcome of an execution record: the decision
// or result it records, else the state it is in.
func outcomeOf(e *recordv1.JournalEntry) string {
	if d := decisionOf(e); d != "" {
		return d
	}
	if o := resultOf(e); o != "" {
		return o
	}
	return stateName(e.GetTo())
}

func decisionOf(e *recordv1.JournalEntry) string {
	if e.GetFrom() == e.GetTo() {
		return ""
	}
	switch e.GetTo() {
	case recordv1.State_STATE_AUTHORIZED:
		if e.GetFrom() == recordv1.State_STATE_DISPATCHED {
			return "" // back from a send that reached nothing: not a decision
		}
		return "allow"
	case recordv1.State_STATE_REJECTED:
		return "deny"
	case recordv1.State_STATE_AWAITING_APPROVAL:
		return "hold"
	case recordv1.State_STATE_CANCELLED:
		return "cancel"
	}
	return ""
}

func resultOf(e *recordv1.JournalEntry) string {
	if e.GetFrom() == e.GetTo() {
		return ""
	}
	switch e.GetTo() {
	case recordv1.State_STATE_COMPLETED:
		if e.GetExecution().GetOutcome() == recordv1.Outcome_OUTCOME_FAILED_AT_TARGET {
			return "failed"
		}
		return "succeeded"
	case recordv1.State_STATE_OUTCOME_UNKNOWN:
		return "unknown"
	case recordv1.State_STATE_NOT_EXECUTED:
		return "not_executed"
	case recordv1.State_STATE_NEEDS_REVIEW:
		return "review"
	}
	return ""
}

func decisionOrOutcome(origin string, i int64, leaf string, e *recordv1.JournalEntry) any {
	x := e.GetExecution()
	if x == nil {
		return nil
	}
	id := fmt.Sprintf("%s/%d", origin, i)
	if d := decisionOf(e); d != "" {
		by := "latch"
		if op := e.GetCredential().GetOperator(); op != "" {
			by = op
		}
		return &DecisionRecord{Type: "decision", DecisionID: id, ExecutionID: x.GetId(), Time: entryTime(e), Principal: principal(e),
			Tool: x.GetTool(), Decision: d, DecidedBy: by, Reason: e.GetReason(), JournalIndex: i, LeafHash: leaf}
	}
	if o := resultOf(e); o != "" {
		r := &OutcomeRecord{Type: "outcome", OutcomeID: id, ExecutionID: x.GetId(), Time: entryTime(e), Principal: principal(e),
			Tool: x.GetTool(), Outcome: o, TargetStatus: x.GetTargetStatus(), JournalIndex: i, LeafHash: leaf}
		if s := x.GetResultSha256(); len(s) > 0 {
			r.ResultSHA256 = hex.EncodeToString(s)
		}
		return r
	}
	return nil
}
