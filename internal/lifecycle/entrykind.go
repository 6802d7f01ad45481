package lifecycle

import (
	"strings"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const entryKindPrefix = "ENTRY_KIND_"

// EntryKindName is the kind's lowercase name, as records before
// JournalEntry.entry_kind wrote it in JournalEntry.kind and as explain, the
// CLI and the console show it ("transition", "recovery_query"); "" for
// unspecified.
func EntryKindName(k recordv1.EntryKind) string {
	if k == recordv1.EntryKind_ENTRY_KIND_UNSPECIFIED {
		return ""
	}
	if _, known := recordv1.EntryKind_name[int32(k)]; !known {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(k.String(), entryKindPrefix))
}

// EntryKindOf is what e is about: its entry_kind, or, on a record written
// before entry_kind existed, the kind its kind text names. This is the one
// place the old text is read; UNSPECIFIED when neither says (or the text
// is none a version wrote).
func EntryKindOf(e *recordv1.JournalEntry) recordv1.EntryKind {
	if k := e.GetEntryKind(); k != recordv1.EntryKind_ENTRY_KIND_UNSPECIFIED {
		return k
	}
	name := e.GetKind()
	if name == "" {
		return recordv1.EntryKind_ENTRY_KIND_UNSPECIFIED
	}
	if v, known := recordv1.EntryKind_value[entryKindPrefix+strings.ToUpper(name)]; known && EntryKindName(recordv1.EntryKind(v)) == name {
		return recordv1.EntryKind(v)
	}
	return recordv1.EntryKind_ENTRY_KIND_UNSPECIFIED
}

// EntryKindNameOf is EntryKindName(EntryKindOf(e)).
func EntryKindNameOf(e *recordv1.JournalEntry) string { return EntryKindName(EntryKindOf(e)) }
