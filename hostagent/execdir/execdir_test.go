package execdir

import (
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/latchhq/latch/hostagent/proc"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

func TestValidID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"act_01HZX3J5K2", true},
		{"migration-2026.11:step1", true},
		{"", false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"a/b", false},
		{"a b", false},
		{"é", false},
		{string(make([]byte, MaxIDLen+1)), false},
	}
	for _, tt := range tests {
		if err := ValidID(tt.id); (err == nil) != tt.ok {
			t.Errorf("ValidID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
		}
	}
}

func FuzzValidID(f *testing.F) {
	f.Add("act_1")
	f.Add("../x")
	f.Fuzz(func(t *testing.T, id string) {
		if ValidID(id) == nil && (id == "." || id == ".." || len(id) == 0) {
			t.Errorf("ValidID(%q) accepted a path that is not a plain name", id)
		}
	})
}

func TestStatusAndArgvRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadStatus(dir); !errors.Is(err, ErrNoStatus) {
		t.Fatalf("ReadStatus(empty) = %v, want ErrNoStatus", err)
	}
	st := &hostagentv1.Marker{ExecutionId: "x", State: hostagentv1.MarkerState_MARKER_STATE_EXITED, ExitCode: -1, Signal: "SIGKILL", OutputSize: 12, OutputTruncated: true}
	if err := WriteStatus(dir, st); err != nil {
		t.Fatal(err)
	}
	got, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, got, protocmp.Transform()); diff != "" {
		t.Errorf("ReadStatus (-want +got):\n%s", diff)
	}
	full := &hostagentv1.Marker{ExecutionId: "x", Argv: []string{"a", "b"}, Cwd: "/", Pid: 9, BootId: "b"}
	if err := WriteArgv(dir, full); err != nil {
		t.Fatal(err)
	}
	argv, err := ReadArgv(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &hostagentv1.Marker{ExecutionId: "x", Argv: []string{"a", "b"}, Cwd: "/"}
	if diff := cmp.Diff(want, argv, protocmp.Transform()); diff != "" {
		t.Errorf("ReadArgv keeps only what runs (-want +got):\n%s", diff)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want 2 (no temp files left)", len(entries))
	}
	if err := os.WriteFile(dir+"/"+StatusFile, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStatus(dir); err == nil || errors.Is(err, ErrNoStatus) {
		t.Errorf("ReadStatus(garbage) = %v, want a decode error", err)
	}
}

func TestIdentityRoundTrip(t *testing.T) {
	dir := t.TempDir()
	id := proc.Identity{PID: 42, StartTicks: 123456, BootID: "0f3c-boot"}
	for _, durable := range []bool{true, false} {
		if err := WriteIdentity(dir, CommandFile, id, durable); err != nil {
			t.Fatal(err)
		}
		got, err := ReadIdentity(dir, CommandFile)
		if err != nil || got != id {
			t.Errorf("ReadIdentity = %+v, %v, want %+v", got, err, id)
		}
	}
	if _, err := ReadIdentity(dir, ShimFile); !errors.Is(err, ErrNoFile) {
		t.Errorf("ReadIdentity(missing) = %v, want ErrNoFile", err)
	}
	if err := os.WriteFile(dir+"/"+ShimFile, []byte("x y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIdentity(dir, ShimFile); err == nil {
		t.Errorf("ReadIdentity(malformed) = nil error")
	}
}
