package httpchannel

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/internal/cputime"
	"github.com/latchhq/latch/internal/testing/pgtest"
)

// serveDemoEnv makes the test binary serve only the demo target (see
// startDemoProcess).
const serveDemoEnv = "LATCH_TEST_SERVE_DEMO"

// TestMain stops the PostgreSQL server the benchmarks start, or, run by
// startDemoProcess, serves the demo target until its stdin closes.
func TestMain(m *testing.M) {
	if os.Getenv(serveDemoEnv) == "1" {
		serveDemo()
		return
	}
	pgtest.Main(m)
}

// serveDemo serves the demo target on a loopback port, prints its URL and
// serves until stdin closes (the parent is done or gone).
func serveDemo() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go http.Serve(lis, demotarget.New(demotarget.Config{Logger: hclog.NewNullLogger()})) //nolint:errcheck,gosec // ends with the process
	fmt.Println("http://" + lis.Addr().String())
	io.Copy(io.Discard, os.Stdin) //nolint:errcheck // EOF or an error: either way the parent is done
}

// demoProcess is the demo target in a process of its own, so that a
// benchmark can tell the target's processor time from its own.
type demoProcess struct {
	URL string
	pid int
}

// CPU is the target process's user + system time so far.
func (d *demoProcess) CPU() (time.Duration, error) {
	st, ok := cputime.Process(d.pid)
	if !ok {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", d.pid)
	}
	return st.CPU, nil
}

// startDemoProcess runs this test binary as the demo target and stops it
// when the benchmark ends.
func startDemoProcess(b *testing.B) *demoProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveDemoEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait() //nolint:errcheck // it exits when stdin closes
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://127.0.0.1:") {
		b.Fatalf("the demo target process printed %q (%v), want its URL", line, err)
	}
	return &demoProcess{URL: strings.TrimSpace(line), pid: cmd.Process.Pid}
}
