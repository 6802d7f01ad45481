package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestBenchOutputShape runs `latch bench --count 50` on its own in-process
// stack and checks the shape of the report (never the timings): one row per
// path with all 50 calls, a rate, p50/p99, the ratio to the direct call and
// the CPU time per call.
func TestBenchOutputShape(t *testing.T) {
	out, code := runCLI(t, "bench", "--count", "50", "--concurrency", "4")
	if code != ExitOK {
		t.Fatalf("latch bench = %d:\n%s", code, out)
	}
	row := `\s+%s\s+50\s+\d+\.\d\s+\d+\.\d\dms\s+\d+\.\d\dms\s+\d+\.\d\d×\s+%s\s+\d+\.\d\d\dms`
	for _, tc := range []struct{ path, over string }{
		{"direct", "—"},
		{"bare", `[+-]\d+\.\d\dms`},
		{"durable", `[+-]\d+\.\d\dms`},
		{"mcp", `[+-]\d+\.\d\dms`},
	} {
		re := regexp.MustCompile(`(?m)^` + sprintfRe(row, tc.path, tc.over) + `\s*$`)
		if !re.MatchString(out) {
			t.Errorf("no %s row matching %s in:\n%s", tc.path, re, out)
		}
	}
	if !strings.Contains(out, "50 deploy_release calls per path and round, 1 round(s) interleaved, at concurrency 4") {
		t.Errorf("header missing count, rounds and concurrency:\n%s", out)
	}
	if !regexp.MustCompile(`mcp against bare\): p50 [+-]\d+\.\d\dms, rate \d+\.\d\d×, CPU/call \d+\.\d\d\dms against \d+\.\d\d\dms \(\d+\.\d\d×\)`).MatchString(out) {
		t.Errorf("no mcp-against-bare line in:\n%s", out)
	}
	if !regexp.MustCompile(`Durability floor on this disk: a synced commit p50 \d+\.\d\dms on a fresh store, a lower bound \(append\+fsync p50 \d+\.\d\dms\)`).MatchString(out) {
		t.Errorf("no durability floor line in:\n%s", out)
	}
	if !strings.Contains(out, "At concurrency 4 calls share commits and queue for the CPU") {
		t.Errorf("at concurrency 4 the p50 must not be split into syncs and the rest:\n%s", out)
	}
	// What the store wrote per call, read from the dev stack's /metrics:
	// every durable call journals at least accepted, authorized,
	// dispatched and completed, and the mcp path also its delivery.
	w := regexp.MustCompile(`Store writes per call \(its /metrics\): durable (\d+\.\d\d) commits of (\d+\.\d) updates, (\d+\.\d) keys, (\d+\.\d\d) KB; receipt [^;]+; mcp (\d+\.\d\d) commits of \d+\.\d updates, (\d+\.\d) keys, (\d+\.\d\d) KB\.`).FindStringSubmatch(out)
	if w == nil {
		t.Fatalf("no store writes line in:\n%s", out)
	}
	num := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
	if commits, updates := num(w[1]), num(w[2]); commits <= 0 || commits > 2 || updates < 1 {
		t.Errorf("durable path: %v commits per call of %v updates each; want (0, 2] commits of at least one update", commits, updates)
	}
	if keys, kb := num(w[3]), num(w[4]); keys < 4 || kb*1000 < 4*keys {
		t.Errorf("durable path: %v keys and %v KB per call; want at least the 4 journal records, bytes above their keys", keys, kb)
	}
	if d, m := num(w[3]), num(w[6]); m <= d {
		t.Errorf("mcp path writes %v keys per call, durable %v: the delivery records are missing", m, d)
	}
}

// TestBenchRoundsAndProfile: --rounds runs every path that many times
// (each row counts all rounds' calls, one rate per round is listed) and
// --profile --trace writes a CPU profile, the allocation profiles before and
// after, a block profile and a trace per path and round.
func TestBenchRoundsAndProfile(t *testing.T) {
	dir := t.TempDir()
	out, code := runCLI(t, "bench", "--count", "10", "--rounds", "2", "--profile", dir, "--trace")
	if code != ExitOK {
		t.Fatalf("latch bench = %d:\n%s", code, out)
	}
	// At concurrency 1 the p50 over the baseline is split into the two
	// synced commits and the rest.
	for _, pair := range []string{"durable over direct", "mcp over bare"} {
		if !regexp.MustCompile(pair + ` p50 [+-]\d+\.\d\dms: \d+\.\d\dms the two syncs, [+-]\d+\.\d\dms the rest`).MatchString(out) {
			t.Errorf("no %q split of the p50 into syncs and the rest in:\n%s", pair, out)
		}
	}
	for _, path := range []string{"direct", "bare", "durable", "mcp"} {
		if !regexp.MustCompile(`(?m)^\s+` + path + `\s+20\s`).MatchString(out) {
			t.Errorf("no %s row with 20 calls (2 rounds of 10) in:\n%s", path, out)
		}
		if !regexp.MustCompile(`(?m)^  ` + path + `\s+\d+\.\d\s+\d+\.\d\s*$`).MatchString(out) {
			t.Errorf("no per-round rates for %s in:\n%s", path, out)
		}
		for _, f := range []string{"cpu-" + path + "-r1.pprof", "allocs-" + path + "-r1.before.pprof", "allocs-" + path + "-r2.pprof", "block-" + path + "-r2.pprof", "trace-" + path + "-r2.out"} {
			if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
				t.Errorf("profile %s: %v (want a non-empty file)", f, err)
			}
		}
	}
}

func sprintfRe(format string, a ...string) string {
	for _, s := range a {
		format = strings.Replace(format, "%s", s, 1)
	}
	return format
}

// TestBenchRefusals: bounds are usage errors, and a dev.json naming a target
// off this machine is refused before any call.
func TestBenchRefusals(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--count", "0"},
		{"bench", "--count", "100001"},
		{"bench", "--concurrency", "0"},
		{"bench", "--concurrency", "1000"},
		{"bench", "--max-duration", "1h"},
		{"bench", "--rounds", "0"},
		{"bench", "--rounds", "11"},
		{"bench", "--trace"},
		{"bench", "extra"},
	} {
		if out, code := runCLI(t, args...); code != ExitUsage {
			t.Errorf("latch %v = %d, want %d:\n%s", args, code, ExitUsage, out)
		}
	}
	dir := t.TempDir()
	info := `{"mcp_url":"http://192.0.2.10:7411/mcp","demo_url":"http://127.0.0.1:7412","token":"x"}`
	if err := os.WriteFile(filepath.Join(dir, "dev.json"), []byte(info), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "bench", "--data", dir, "--count", "1")
	if code == ExitOK || !strings.Contains(out, "only calls loopback targets") {
		t.Errorf("latch bench against 192.0.2.10 = %d, want a refusal naming loopback:\n%s", code, out)
	}
}

// TestBenchProfileWithoutTrace: --profile alone writes CPU and allocation
// profiles, not the block profile and trace that skew them.
func TestBenchProfileWithoutTrace(t *testing.T) {
	dir := t.TempDir()
	if out, code := runCLI(t, "bench", "--count", "5", "--profile", dir); code != ExitOK {
		t.Fatalf("latch bench = %d:\n%s", code, out)
	}
	for _, f := range []string{"cpu-mcp.pprof", "allocs-mcp.before.pprof", "allocs-mcp.pprof"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v (want a non-empty file)", f, err)
		}
	}
	for _, f := range []string{"block-mcp.pprof", "trace-mcp.out"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s written without --trace", f)
		}
	}
}

// TestBenchServersApart: latch bench --data against a running latch dev
// runs the bare MCP server in a process of its own and reports each
// server's CPU per call apart from the clients', per round too (with the
// median of what Latch adds); the bare server's process is gone afterwards.
func TestBenchServersApart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "dev")
	startDev(t, data)
	out, err := exec.Command(latchBin, "bench", "--data", data, "--count", "30", "--concurrency", "2", "--rounds", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("latch bench --data: %v\n%s", err, out)
	}
	for _, want := range []string{"bare CPU/call", "of the bare MCP server's process", "Server CPU per call", "Latch adds", "Store writes per call (its /metrics): durable",
		"Server CPU per call per round", "  round 2: bare ", "Latch adds: median "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("latch bench --data output lacks %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`bare MCP server's process (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no pid of the bare server's process in:\n%s", out)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the bare server's process %d after latch bench: kill -0 = %v, want it gone", pid, err)
	}
}
