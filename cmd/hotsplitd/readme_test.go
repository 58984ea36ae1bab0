package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A runnable block of a Markdown file: a fenced code block right after a
// marker comment
//
//	<!-- runnable: session=NAME timeout=60s [long] [setup] -->
//
// Blocks of one session run, in order (setup blocks first), in one bash
// (so background nodes started by one block serve the next). long blocks
// run only in the long suite.
type runnableBlock struct {
	session string
	timeout time.Duration
	long    bool
	setup   bool // runs first in its session, wherever it stands
	script  string
	line    int
}

var runnableMarker = regexp.MustCompile(`^<!-- runnable: (.*) -->$`)

func runnableBlocks(t *testing.T, path string) []runnableBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []runnableBlock
	for i := 0; i < len(lines); i++ {
		// Blocks inside list items are indented: the marker's indentation
		// is stripped from the fence and the body.
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		m := runnableMarker.FindStringSubmatch(lines[i][indent:])
		if m == nil {
			continue
		}
		blk := runnableBlock{session: "default", timeout: time.Minute, line: i + 1}
		for _, f := range strings.Fields(m[1]) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "session":
				blk.session = v
			case "timeout":
				if blk.timeout, err = time.ParseDuration(v); err != nil {
					t.Fatalf("%s:%d: timeout %q: %v", path, i+1, v, err)
				}
			case "long":
				blk.long = true
			case "setup":
				blk.setup = true
			default:
				t.Fatalf("%s:%d: unknown marker field %q", path, i+1, f)
			}
		}
		fence := func(l string) bool { return strings.HasPrefix(strings.TrimLeft(l, " "), "```") }
		if i+1 >= len(lines) || !fence(lines[i+1]) {
			t.Fatalf("%s:%d: a runnable marker must precede a fenced code block", path, i+1)
		}
		var body []string
		for i += 2; i < len(lines) && !fence(lines[i]); i++ {
			body = append(body, lines[i][min(indent, len(lines[i])-len(strings.TrimLeft(lines[i], " "))):])
		}
		blk.script = strings.Join(body, "\n") + "\n"
		out = append(out, blk)
	}
	return out
}

// docSubstitutions makes a documented command line runnable beside other
// tests on a shared machine: free ports for 127.0.0.1:70NN, a temporary
// directory for /tmp/hs (and /tmp/hs-…), the prebuilt binaries for
// `go run ./cmd/X`, bin/X and $PWD/bin (the block's own `go build -o bin/`
// builds into the same directory).
func docSubstitutions(t *testing.T, dir string) func(string) string {
	hotsplitd, hotsplitctl := binaries(t)
	bin := filepath.Dir(hotsplitd)
	ports := map[string]string{}
	portRE := regexp.MustCompile(`127\.0\.0\.1:70\d\d\b`)
	binRE := regexp.MustCompile(`(^|[\s;&|(])bin/`)
	return func(s string) string {
		s = portRE.ReplaceAllStringFunc(s, func(p string) string {
			if _, ok := ports[p]; !ok {
				ports[p] = freePort(t)
			}
			return ports[p]
		})
		s = strings.ReplaceAll(s, "/tmp/hs", filepath.Join(dir, "hs"))
		s = strings.ReplaceAll(s, "go run ./cmd/hotsplitctl", hotsplitctl)
		s = strings.ReplaceAll(s, "go run ./cmd/hotsplitd", hotsplitd)
		s = strings.ReplaceAll(s, "$PWD/bin", bin)
		return binRE.ReplaceAllString(s, "${1}"+bin+"/")
	}
}

// runSessions runs every session of blocks (long or not; only the named
// ones if any are given) and fails on the first failing command; every
// process a session started is ended. env is added to the scripts'.
func runSessions(t *testing.T, path string, long bool, env []string, only ...string) {
	t.Helper()
	blocks := runnableBlocks(t, path)
	var order []string
	scripts, timeouts, lines := map[string]string{}, map[string]time.Duration{}, map[string]int{}
	slices.SortStableFunc(blocks, func(a, b runnableBlock) int {
		switch {
		case a.setup == b.setup:
			return 0
		case a.setup:
			return -1
		}
		return 1
	})
	for _, b := range blocks {
		if b.long != long || (len(only) > 0 && !slices.Contains(only, b.session)) {
			continue
		}
		if _, ok := scripts[b.session]; !ok {
			order = append(order, b.session)
			lines[b.session] = b.line
		}
		scripts[b.session] += b.script
		timeouts[b.session] += b.timeout
	}
	if len(order) == 0 {
		t.Fatalf("%s has no runnable blocks (long=%v)", path, long)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range order {
		t.Run(s, func(t *testing.T) {
			dir := t.TempDir()
			script := docSubstitutions(t, dir)(scripts[s])
			runScript(t, repo, dir, script, env, timeouts[s], fmt.Sprintf("%s:%d", path, lines[s]))
		})
	}
}

// runScript runs script with bash -e -x in its own process group, bounded
// by timeout; the group is ended afterwards, so background nodes stop. On
// failure it also prints the end of every *.log the script left under
// logs: the nodes' own words are what explain a failed procedure.
func runScript(t *testing.T, dir, logs, script string, env []string, timeout time.Duration, where string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-x", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A file, not a pipe: background nodes inherit the script's output, and
	// a pipe would keep Run waiting for them.
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond) // let nodes hand over; then make sure
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("%s: %v after %v\n%s%s", where, err, time.Since(start).Round(time.Millisecond), b, logTails(logs, 30))
	}
	t.Logf("%s ran in %v", where, time.Since(start).Round(time.Millisecond))
}

// logTails returns the last n lines of every *.log file below dir.
func logTails(dir string, n int) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "--- last %d lines of %s\n%s\n", n, path, strings.Join(lines[max(0, len(lines)-n):], "\n"))
		return nil
	})
	return b.String()
}

// Every runnable block of the README works as written (with the
// substitutions above).
func TestIntegrationReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the README's commands")
	}
	runSessions(t, "../../README.md", false, nil)
}

// The runbook's drills, in order on one local cluster (the long suite).
func TestLongRunbookDrills(t *testing.T) {
	skipUnlessLong(t)
	runSessions(t, "../../docs/runbook.md", true, nil)
}

// skipUnlessLong skips tests of the long suite unless HOTSPLIT_LONG is set
// (.ci/run long sets it).
func skipUnlessLong(t *testing.T) {
	t.Helper()
	if os.Getenv("HOTSPLIT_LONG") == "" {
		t.Skip("long suite: set HOTSPLIT_LONG=1 (.ci/run long)")
	}
}

// The README's five-minute tour on the demo: the hot key isolated, then
// every command of the tour's runnable blocks.
func TestLongReadmeTour(t *testing.T) {
	skipUnlessLong(t)
	hotsplitd, _ := binaries(t)
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "demo.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	demo := exec.Command(hotsplitd, "--dev", "--devDir", filepath.Join(dir, "data"), "--devLog", filepath.Join(dir, "nodes.log"))
	demo.Stdout, demo.Stderr = out, out
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- demo.Wait() }()
	defer func() {
		demo.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			demo.Process.Kill()
			<-exited
		}
	}()
	var exports []string // the demo's export line, as the tour pastes it
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(out.Name())
		if m := regexp.MustCompile(`export (HOTSPLIT_ENDPOINTS=\S+ HOTSPLIT_CACERT=\S+ HOTSPLIT_CERT=\S+ HOTSPLIT_KEY=\S+)`).FindSubmatch(b); m != nil {
			exports = strings.Fields(string(m[1]))
		}
		if exports != nil && strings.Contains(string(b), "isolated hot key") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo isolated no hot key in 2 minutes:\n%s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	runSessions(t, "../../README.md", true, exports, "tour")
	if b, _ := os.ReadFile(filepath.Join(dir, "nodes.log")); !strings.Contains(string(b), "node started") {
		t.Errorf("the node logs did not go to --devLog")
	}
	if b, _ := os.ReadFile(out.Name()); strings.Contains(string(b), "level=") {
		t.Errorf("node log lines on the demo's terminal:\n%s", b)
	}
}
