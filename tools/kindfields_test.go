package tools

import (
	"reflect"
	"slices"
	"testing"
)

// TestKindSettingsEmbedded pins the shape of Target and Tool: besides what
// every target or tool shares they hold only the built-in kinds' settings
// structs, embedded, and no field of one of those structs shares a name
// with another field (an embedded field of the same name as a direct one
// would be silently shadowed, two embedded ones would not be readable).
func TestKindSettingsEmbedded(t *testing.T) {
	for _, tc := range []struct {
		typ              reflect.Type
		common, embedded []string
	}{
		{reflect.TypeFor[Target](), []string{"Name", "Channel", "Credential", "Timeout", "Mode", "Settle", "Spec", "kind"},
			[]string{"HTTPTarget", "HostTarget"}},
		{reflect.TypeFor[Tool](), []string{"Name", "Description", "InputSchema", "Defaults", "Target", "Timeout", "Action",
			"Mode", "Replay", "AttachWindow", "UntilResolved", "Approval", "Task", "Fingerprint", "NotifyCompleted"},
			[]string{"HTTPAction", "CommandAction", "UpstreamAction"}},
	} {
		var common, embedded []string
		seen := map[string]string{}
		for i := range tc.typ.NumField() {
			f := tc.typ.Field(i)
			if !f.Anonymous {
				common = append(common, f.Name)
				seen[f.Name] = tc.typ.Name()
				continue
			}
			embedded = append(embedded, f.Name)
			for j := range f.Type.NumField() {
				name := f.Type.Field(j).Name
				if owner, dup := seen[name]; dup {
					t.Errorf("%s: field %s of %s is also a field of %s", tc.typ.Name(), name, f.Name, owner)
				}
				seen[name] = f.Name
			}
		}
		if !slices.Equal(common, tc.common) {
			t.Errorf("%s fields = %v, want %v (a kind's settings go in its own struct, next to its Kind)", tc.typ.Name(), common, tc.common)
		}
		if !slices.Equal(embedded, tc.embedded) {
			t.Errorf("%s embedded = %v, want %v", tc.typ.Name(), embedded, tc.embedded)
		}
	}
}
