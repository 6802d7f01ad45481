package lifecycle

import (
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestEntryKindOf: every kind reads back from entry_kind and from the kind
// text a record written before entry_kind holds; entry_kind wins over the
// text; text no version wrote is unspecified.
func TestEntryKindOf(t *testing.T) {
	for v := range recordv1.EntryKind_name {
		k := recordv1.EntryKind(v)
		if k == recordv1.EntryKind_ENTRY_KIND_UNSPECIFIED {
			continue
		}
		name := EntryKindName(k)
		if name == "" {
			t.Errorf("EntryKindName(%v) = \"\", want its name", k)
		}
		if got := EntryKindOf(&recordv1.JournalEntry{EntryKind: k}); got != k {
			t.Errorf("EntryKindOf(entry_kind %v) = %v", k, got)
		}
		if got := EntryKindOf(&recordv1.JournalEntry{Kind: name}); got != k {
			t.Errorf("EntryKindOf(kind %q) = %v, want %v", name, got, k)
		}
	}
	if got := EntryKindOf(&recordv1.JournalEntry{Kind: "attach", EntryKind: recordv1.EntryKind_ENTRY_KIND_TRANSITION}); got != recordv1.EntryKind_ENTRY_KIND_TRANSITION {
		t.Errorf("EntryKindOf(both) = %v, want entry_kind's", got)
	}
	for _, text := range []string{"", "Transition", "ENTRY_KIND_TRANSITION", "unspecified", "nope"} {
		if got := EntryKindOf(&recordv1.JournalEntry{Kind: text}); got != recordv1.EntryKind_ENTRY_KIND_UNSPECIFIED {
			t.Errorf("EntryKindOf(kind %q) = %v, want unspecified", text, got)
		}
	}
}
