package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/sim"
)

// TestIntegrationDemoIsolatesHotKey runs the README's demo command as a
// process (hotsplitd --dev) and watches, through hotsplitctl, the hot key of
// its first phase end up alone in a route [H, H·0x00); then a headless
// Chromium opens the login URL the demo printed and looks at the page
// (checkDemoPage).
func TestIntegrationDemoIsolatesHotKey(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the demo")
	}
	hotsplitd, hotsplitctl := binaries(t)
	cmd := exec.Command(hotsplitd, "--dev", "--logLevel", "warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("demo stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	// The README tour pastes the printed export line; so does this test.
	var endpoints string
	var env, out []string
	deadline := time.After(30 * time.Second)
	for env == nil {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo exited: %v", out)
			}
			out = append(out, l)
			if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "export "); ok {
				env = strings.Fields(rest)
			}
		case <-deadline:
			t.Fatalf("no export line in 30s: %v", out)
		}
	}
	for _, want := range []string{"HOTSPLIT_ENDPOINTS", "HOTSPLIT_CACERT", "HOTSPLIT_CERT", "HOTSPLIT_KEY"} {
		found := false
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			found = found || k == want && v != ""
			if k == "HOTSPLIT_ENDPOINTS" {
				endpoints = v
			}
		}
		if !found {
			t.Fatalf("export line %q lacks %s", env, want)
		}
	}
	// The export line is all the CLI needs: without it, it refuses.
	if _, err := ctl(t, hotsplitctl, []string{"HOTSPLIT_CACERT=", "HOTSPLIT_CERT=", "HOTSPLIT_KEY="}, endpoints, "cluster", "leader"); err == nil || !strings.Contains(err.Error(), "--cacert") {
		t.Fatalf("hotsplitctl without the export line: %v, want a refusal naming --cacert", err)
	}
	// The page's login URL follows; the lines after it are drained so the
	// demo never blocks on its output.
	var login string
	for login == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo exited: %v", out)
			}
			out = append(out, l)
			if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "key visualizer: "); ok {
				login = rest
			}
		case <-deadline:
			t.Fatalf("no login URL in 30s: %v", out)
		}
	}
	go func() {
		for range lines {
		}
	}()
	ks, err := sim.NewKeySpace(sim.DefaultKeySpace)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sim.ParseWorkload(sim.HotKey, sim.DefaultWorkloadOptions())
	if err != nil {
		t.Fatal(err)
	}
	lo, _, _ := w.Hotspot(0)
	hot := ks.Key(lo)
	var hotRoute string
	testutil.Eventually(t, 60*time.Second, "the hot key isolated", func() error {
		got, err := ctl(t, hotsplitctl, env, endpoints, "routes", "get", string(hot), "-o", "json")
		if err != nil {
			return err
		}
		var r struct {
			Route struct {
				RouteID string `json:"route_id"`
				Start   string `json:"start"`
				End     string `json:"end"`
			} `json:"route"`
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil {
			return err
		}
		// protojson renders bytes as base64.
		want := jsonBytes(hot)
		wantEnd := jsonBytes(append(append([]byte(nil), hot...), 0))
		if r.Route.Start != want || r.Route.End != wantEnd {
			return fmt.Errorf("route of %q is [%s, %s)", hot, r.Route.Start, r.Route.End)
		}
		hotRoute = r.Route.RouteID
		return nil
	})
	t.Run("page", func(t *testing.T) {
		checkDemoPage(t, login, hot, hotRoute, func(args ...string) (string, error) { return ctl(t, hotsplitctl, env, endpoints, args...) })
	})
}

func jsonBytes(b []byte) string {
	out, _ := json.Marshal(b)
	return strings.Trim(string(out), `"`)
}
