package console

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of Debian's chromium, skipping the test when it
// is not installed, except in CI (CI set), where it must be: .ci/run
// installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed and CI is set: .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed: apt-get install chromium to run the console's browser tests")
	return ""
}

// browser starts a headless chromium for the test and returns a tab's
// context; the browser is stopped at cleanup.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("user-data-dir", t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// Start the browser now, bounded, so a broken install fails here. The
	// first action must run on ctx itself (a child context's end would
	// close the browser), so the bound cancels ctx instead.
	stop := time.AfterFunc(30*time.Second, cancel)
	err := chromedp.Do(ctx, chromedp.Navigate("about:blank"))
	stop.Stop()
	if err != nil {
		t.Fatalf("start chromium (%s): %v", chromium(t), err)
	}
	return ctx
}

// pollBound bounds a chromedp.Poll for what the page shows once the
// control plane and the browser get to it: 30s, like testbin.Eventually (a
// loaded CI machine runs chromium, race-built binaries and other tests).
const pollBound = 30 * time.Second

// run runs browser actions with a bound (above pollBound: one run may
// navigate, then poll).
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(rctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) in the tab.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(rctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// screenshotOnFailure writes a full-page screenshot of the tab's current
// page as a test artifact (t.ArtifactDir: kept with go test -artifacts)
// when the test failed.
func screenshotOnFailure(t *testing.T, ctx context.Context, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Logf("no screenshot of %s: %v", name, err)
			return
		}
		for _, dir := range []string{t.ArtifactDir(), os.Getenv("LATCH_TEST_ARTIFACTS")} {
			if dir == "" {
				continue
			}
			p := filepath.Join(dir, name+".png")
			if err := os.WriteFile(p, png, 0o644); err != nil {
				t.Logf("screenshot %s: %v", p, err)
				continue
			}
			t.Logf("screenshot of %s: %s", name, p)
		}
	})
}
