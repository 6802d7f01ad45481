package proc

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    Stat
		wantErr bool
	}{
		{
			name: "plain",
			line: "123 (sleep) S 1 123 123 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 98765 1000 100",
			want: Stat{State: 'S', StartTicks: 98765},
		},
		{
			name: "command with spaces and parens",
			line: "123 (a) b (c)) R 1 123 123 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 42 1000 100",
			want: Stat{State: 'R', StartTicks: 42},
		},
		{name: "no paren", line: "123 sleep S 1", wantErr: true},
		{name: "short", line: "123 (x) S 1 2 3", wantErr: true},
		{name: "bad ticks", line: "123 (x) S 1 123 123 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 zz 1000", wantErr: true},
		{name: "empty", line: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat(tt.line)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseStat(%q) error = %v, wantErr %v", tt.line, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Errorf("ParseStat(%q) = %+v, want %+v", tt.line, got, tt.want)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add("1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20")
	f.Add(")")
	f.Fuzz(func(t *testing.T, s string) { _, _ = ParseStat(s) })
}

func TestAliveSelfAndExited(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := Alive(self); err != nil || !ok {
		t.Fatalf("Alive(self) = %v, %v, want true", ok, err)
	}
	other := self
	other.StartTicks++
	if ok, _ := Alive(other); ok {
		t.Errorf("Alive(self with other start time) = true, want false")
	}
	other = self
	other.BootID = "another-boot"
	if ok, _ := Alive(other); ok {
		t.Errorf("Alive(self on another boot) = true, want false")
	}

	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := Of(cmd.Process.Pid)
	if err != nil && !errors.Is(err, ErrGone) {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := Alive(id); ok {
		t.Errorf("Alive(reaped child) = true, want false")
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, ErrGone) {
		t.Errorf("ReadStat(huge pid) error = %v, want ErrGone", err)
	}
	_ = os.Getpid()
}
