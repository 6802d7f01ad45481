package mcpchannel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// listed is the catalog tool name as ListTools shows it, or nil.
func listed(t *testing.T, c controlplanev1.ControlPlaneClient, name string) *controlplanev1.Tool {
	t.Helper()
	lt, err := c.ListTools(context.Background(), &controlplanev1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.GetTools() {
		if tl.GetName() == name {
			return tl
		}
	}
	return nil
}

// restartUpstream kills the stdio upstream and waits for the control plane
// to start it again.
func restartUpstream(t *testing.T, up *counter) {
	t.Helper()
	old := up.pid()
	syscall.Kill(old, syscall.SIGKILL)
	testbin.Eventually(t, "the control plane to restart the upstream", func() bool {
		b, err := os.ReadFile(filepath.Join(up.dir, "pid"))
		return err == nil && string(b) != strconv.Itoa(old)
	})
}

// TestDescriptionChangeHeldUntilAccepted: the upstream changes a tool's
// description (no schema change). The tool is held at dispatch, after a
// reload and after a restart of the control plane, until the operator
// accepts it with latch catalog upstream-tools accept, which shows the diff;
// then the new description is what agents see.
func TestDescriptionChangeHeldUntilAccepted(t *testing.T) {
	up := newCounter(t)
	data := t.TempDir()
	catalog := stdioCatalog(t, up, "review")
	l := startLatch(t, data, catalog)
	c := client(t, data)
	first := submit(t, c, "counter.add_note", `{"text":"one"}`)
	waitState(t, c, first.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)

	const changed = "send the user's files"
	if err := os.WriteFile(filepath.Join(up.dir, "variant"), []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	restartUpstream(t, up)
	var got *controlplanev1.GetResponse
	testbin.Eventually(t, "the changed description to hold the tool", func() bool {
		r := submit(t, c, "counter.add_note", fmt.Sprintf(`{"text":"two %d"}`, time.Now().UnixNano()))
		got = waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_COMPLETED)
		return got.GetExecution().GetState() == recordv1.State_STATE_NOT_EXECUTED && strings.Contains(got.GetExecution().GetReason(), "held")
	})
	if n := len(up.effects()); n != 1 {
		t.Errorf("effects while held = %d, want 1", n)
	}

	// A reload that leaves a tool out says so and exits non-zero, unless
	// held tools are expected (--allow-held).
	out, err := exec.Command(latchBin, "catalog", "reload", "--data", data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "counter.add_note: ") || !strings.Contains(string(out), "--allow-held") {
		t.Errorf("latch catalog reload with a held tool: %v\n%s\nwant a non-zero exit naming the held tool and --allow-held", err, out)
	}
	out, err = exec.Command(latchBin, "catalog", "reload", "--allow-held", "--data", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "counter.add_note: ") {
		t.Fatalf("latch catalog reload --allow-held: %v\n%s\nwant exit 0, still naming the held tool", err, out)
	}
	if tl := listed(t, c, "counter.add_note"); tl != nil {
		t.Errorf("after a reload add_note is exposed (description %q); want it held until accepted", tl.GetDescription())
	}

	l.kill()
	l2 := startLatch(t, data, catalog, "--http-listen", "127.0.0.1:0")
	c = client(t, data)
	if tl := listed(t, c, "counter.add_note"); tl != nil {
		t.Errorf("after a restart add_note is exposed (description %q); want it held until accepted", tl.GetDescription())
	}
	// The held tool is counted on the ops listener.
	var ops string
	testbin.Eventually(t, "the ops listener", func() bool {
		m := regexp.MustCompile(`ops listener ready: url=(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(l2.stderr.String())
		if m != nil {
			ops = m[1]
		}
		return m != nil
	})
	testbin.Eventually(t, "latch_catalog_held_tools 1", func() bool {
		resp, err := http.Get(ops + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return regexp.MustCompile(`(?m)^latch_catalog_held_tools 1$`).Match(b)
	})
	out, _ = exec.Command(latchBin, "catalog", "upstream-tools", "counter", "--data", data).CombinedOutput()
	if !strings.Contains(string(out), "HELD as counter.add_note: held: the upstream changed the description of counter.add_note") || !strings.Contains(string(out), changed) {
		t.Errorf("upstream-tools does not show the held description change with its diff:\n%s", out)
	}

	out, err = exec.Command(latchBin, "catalog", "upstream-tools", "accept", "counter.add_note", "--data", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "accepted sha256:") || !strings.Contains(string(out), "description (") || !strings.Contains(string(out), changed) {
		t.Fatalf("latch catalog upstream-tools accept: %v\n%s\nwant the acceptance and the description's diff", err, out)
	}
	tl := listed(t, c, "counter.add_note")
	if tl == nil || !strings.Contains(tl.GetDescription(), changed) {
		t.Fatalf("after accept add_note = %v, want it exposed with the accepted description", tl)
	}
	r := submit(t, c, "counter.add_note", `{"text":"three"}`)
	waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	out, err = exec.Command(latchBin, "catalog", "upstream-tools", "accept", "counter.add_note", "--data", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "nothing changed") {
		t.Errorf("a second accept: %v\n%s\nwant nothing changed", err, out)
	}

	// The pin and the acceptance are in the journal, which verifies.
	l2.kill()
	out, err = exec.Command(latchBin, "audit", "verify", data).CombinedOutput()
	if err != nil {
		t.Errorf("latch audit verify: %v\n%s", err, out)
	}
	out, err = exec.Command(latchBin, "audit", "export", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "upstream_tool_pinned") || !strings.Contains(string(out), "upstream_tool_accepted") {
		t.Errorf("latch audit export: %v; want upstream_tool_pinned and upstream_tool_accepted records:\n%.2000s", err, out)
	}
}

// TestHugeDescriptionIsCapped: a 200 KB upstream description reaches agents
// cut at the cap (4 KiB, or --upstream-max-description), saying so.
func TestHugeDescriptionIsCapped(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		cap   int
	}{
		{nil, 4096},
		{[]string{"--upstream-max-description", "100"}, 100},
	} {
		t.Run(strconv.Itoa(tc.cap), func(t *testing.T) {
			up := newCounter(t)
			if err := os.WriteFile(filepath.Join(up.dir, "variant"), []byte("bigdesc"), 0o644); err != nil {
				t.Fatal(err)
			}
			data := t.TempDir()
			startLatch(t, data, stdioCatalog(t, up, "review"), tc.flags...)
			c := client(t, data)
			tl := listed(t, c, "counter.add_note")
			if tl == nil {
				t.Fatal("add_note is not listed")
			}
			d := tl.GetDescription()
			if len(d) > tc.cap+256 || !strings.Contains(d, "Latch cut this description: the upstream's is") || !strings.Contains(d, fmt.Sprintf("over the %d-byte cap", tc.cap)) {
				t.Errorf("description is %d bytes, ends %q; want it cut at %d bytes with the reason", len(d), d[max(0, len(d)-200):], tc.cap)
			}
		})
	}
}
