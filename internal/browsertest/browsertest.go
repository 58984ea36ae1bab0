// Package browsertest runs headless Chromium for the browser tests of the
// key visualizer (through chromedp): it finds the binary, fails when
// HOTSPLIT_REQUIRE_CHROMIUM=1 (CI) and there is none, skips otherwise,
// starts it as a hermetic test browser, and saves a screenshot of a test
// that failed. It is imported by tests only and must not grow into a
// browser automation library: what a test checks stays in the test.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// RequireEnv makes a missing Chromium a failure rather than a skip (CI
// sets it; .ci/run installs Debian's chromium).
const RequireEnv = "HOTSPLIT_REQUIRE_CHROMIUM"

// Chromium returns the browser to run: $HOTSPLIT_CHROMIUM, else chromium,
// chromium-browser or google-chrome on PATH. Without one it fails the test
// under RequireEnv and skips it otherwise.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HOTSPLIT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("no chromium on PATH and %s=1: install Debian's chromium (.ci/run does) or set HOTSPLIT_CHROMIUM", RequireEnv)
	}
	t.Skip("no chromium on PATH (set " + RequireEnv + "=1 to make this a failure)")
	return ""
}

// Options shape the browser.
type Options struct {
	// IgnoreCertificateErrors trusts any certificate, in this browser
	// only (its profile is fresh and thrown away): the test clusters' CAs
	// are made per run.
	IgnoreCertificateErrors bool
	// Width and Height of the window in CSS pixels (0: 1280×800).
	Width, Height int
}

// Start runs a headless Chromium for t and returns a chromedp context on
// its first tab, ended when t ends. The browser has no sandbox (CI runs
// as root), no background networking, component updates or sync, keeps
// shared memory in /tmp, starts from a fresh profile, and sends
// everything but 127.0.0.1 to a proxy that does not exist, so a test page
// can reach nothing else. When t has failed by then, a screenshot of the
// tab is saved (Screenshots) and its path logged.
func Start(t testing.TB, o Options) context.Context {
	t.Helper()
	bin := Chromium(t)
	w, h := o.Width, o.Height
	if w == 0 {
		w, h = 1280, 800
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.ProxyServer("http://127.0.0.1:9"), // the discard port: nothing answers
		chromedp.Flag("proxy-bypass-list", "127.0.0.1"),
		chromedp.WindowSize(w, h),
	}
	if o.IgnoreCertificateErrors {
		opts = append(opts, chromedp.IgnoreCertErrors)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// Start the browser now, so a missing library fails here, named.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if p, err := Screenshot(ctx, t.Name()); err != nil {
				t.Logf("no screenshot of the failed page: %v", err)
			} else {
				t.Logf("screenshot of the failed page: %s", p)
			}
		}
	})
	return ctx
}

// Screenshots is where failure screenshots go: $HOTSPLIT_ARTIFACTS, else
// the temporary directory (they outlive the test).
func Screenshots() string {
	if d := os.Getenv("HOTSPLIT_ARTIFACTS"); d != "" {
		return d
	}
	return os.TempDir()
}

// Screenshot saves the tab of ctx as a PNG named after name in
// Screenshots() and returns its path.
func Screenshot(ctx context.Context, name string) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		return "", err
	}
	safe := strings.NewReplacer("/", "_", " ", "_").Replace(name)
	p := filepath.Join(Screenshots(), fmt.Sprintf("hotsplit-%s-%d.png", safe, time.Now().Unix()))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, png, 0o644)
}
