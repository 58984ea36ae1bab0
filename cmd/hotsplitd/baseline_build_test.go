package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// baselineFile lists the releases a rolling upgrade starts from, one line
// per cluster version: "cluster_version N commit <40 hex>".
const baselineFile = "../../testdata/upgrade/baseline"

// readBaselines parses baselineFile: cluster version → full commit id.
func readBaselines(t *testing.T) map[uint32]string {
	t.Helper()
	b, err := os.ReadFile(baselineFile)
	if err != nil {
		t.Fatalf("the upgrade baselines: %v", err)
	}
	out, err := parseBaselines(b)
	if err != nil {
		t.Fatalf("%s: %v", baselineFile, err)
	}
	return out
}

func parseBaselines(b []byte) (map[uint32]string, error) {
	out := map[uint32]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "cluster_version" || f[2] != "commit" {
			return nil, fmt.Errorf("line %d: %q, want \"cluster_version N commit <40-hex id>\"", n, line)
		}
		v, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("line %d: cluster version %q", n, f[1])
		}
		if len(f[3]) != 40 || strings.Trim(f[3], "0123456789abcdef") != "" {
			return nil, fmt.Errorf("line %d: commit %q is not a full 40-hex id", n, f[3])
		}
		if _, dup := out[uint32(v)]; dup {
			return nil, fmt.Errorf("line %d: cluster version %d listed twice", n, v)
		}
		out[uint32(v)] = f[3]
	}
	return out, sc.Err()
}

func TestParseBaselines(t *testing.T) {
	good := "# comment\n\ncluster_version 1 commit 07c094ce4d26080dcb391e26104198e8817bde4b\ncluster_version 2 commit d7227412e74a51ecc79dd8be2642cc6a85546e5a\n"
	got, err := parseBaselines([]byte(good))
	if err != nil || len(got) != 2 || got[2] != "d7227412e74a51ecc79dd8be2642cc6a85546e5a" {
		t.Fatalf("parseBaselines: %v %v", got, err)
	}
	for _, bad := range []string{
		"cluster_version 1 commit 07c094c\n",
		"cluster_version x commit 07c094ce4d26080dcb391e26104198e8817bde4b\n",
		"cluster_version 0 commit 07c094ce4d26080dcb391e26104198e8817bde4b\n",
		"version 1 commit 07c094ce4d26080dcb391e26104198e8817bde4b\n",
		"cluster_version 1 commit 07C094CE4D26080DCB391E26104198E8817BDE4B\n",
		"cluster_version 1 commit 07c094ce4d26080dcb391e26104198e8817bde4b\ncluster_version 1 commit d7227412e74a51ecc79dd8be2642cc6a85546e5a\n",
	} {
		if _, err := parseBaselines([]byte(bad)); err == nil {
			t.Errorf("parseBaselines(%q) accepted it", bad)
		}
	}
	// The real file parses and names versions 1 and 2 at least.
	file := readBaselines(t)
	if file[1] == "" || file[2] == "" {
		t.Fatalf("%s lacks version 1 or 2: %v", baselineFile, file)
	}
}

// TestBuildUpgradeBaselines builds every release testdata/upgrade/baseline
// names, at the paths the rolling-upgrade tests build them at, so that
// their later builds cost a link. .ci/run runs it in the background of the
// jepsen stage, whose real processes leave the CPUs mostly idle; it skips
// unless HOTSPLIT_BUILD_BASELINES=1 asks for it, so the unit stage never
// pays for it.
func TestBuildUpgradeBaselines(t *testing.T) {
	if os.Getenv("HOTSPLIT_BUILD_BASELINES") != "1" {
		t.Skip("builds every upgrade baseline; set HOTSPLIT_BUILD_BASELINES=1")
	}
	versions := readBaselines(t)
	for v := range versions {
		hotsplitd, ctl := baselineBinaries(t, v)
		for _, bin := range []string{hotsplitd, ctl} {
			if _, err := os.Stat(bin); err != nil {
				t.Errorf("cluster version %d release: %v", v, err)
			}
		}
	}
}

// baselineBuild is the build of one baseline commit, done once per test
// binary.
type baselineBuild struct {
	once      sync.Once
	hotsplitd string
	ctl       string
	err       error
}

var baselineBuilds sync.Map // commit id → *baselineBuild

// baselineBinaries returns hotsplitd and hotsplitctl built from the
// release of cluster version v named in testdata/upgrade/baseline. It
// never skips: a clone without the commit (a shallow CI checkout) fails
// the test in one line saying so.
//
// The tree is extracted with `git archive | tar -x` into a directory named
// after the commit under the user's cache dir (kept, like Go's build
// cache, and shared by concurrent test binaries: a tree is complete once
// renamed into place). A fixed path matters: Go's build cache keys a
// package on its directory, so building the same tree at the same path
// again costs only the link (measured: 17 s against 76 s for a fresh path
// on a loaded 2-core machine).
func baselineBinaries(t *testing.T, v uint32) (hotsplitd, hotsplitctl string) {
	t.Helper()
	commit, ok := readBaselines(t)[v]
	if !ok {
		t.Fatalf("%s names no release of cluster version %d", baselineFile, v)
	}
	b, _ := baselineBuilds.LoadOrStore(commit, &baselineBuild{})
	bb := b.(*baselineBuild)
	bb.once.Do(func() {
		start := time.Now()
		bb.hotsplitd, bb.ctl, bb.err = buildBaseline(commit)
		if bb.err == nil {
			t.Logf("built the cluster version %d release (%.12s) in %.1f s", v, commit, time.Since(start).Seconds())
		}
	})
	if bb.err != nil {
		t.Fatal(bb.err)
	}
	return bb.hotsplitd, bb.ctl
}

// buildBaseline extracts commit's tree and builds its two binaries into a
// new temporary directory.
func buildBaseline(commit string) (hotsplitd, hotsplitctl string, err error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", "", fmt.Errorf("the upgrade baseline %s cannot be built: git is not on PATH", commit)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("the upgrade baseline %s cannot be built outside a git clone: %s", commit, firstLine(top, err))
	}
	repo := strings.TrimSpace(string(top))
	check := exec.Command("git", "cat-file", "-e", commit+"^{commit}")
	check.Dir = repo
	if out, err := check.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("the upgrade baseline %s is not in this clone: fetch full history (git fetch --unshallow): %s", commit, firstLine(out, err))
	}
	src, err := baselineTree(repo, commit)
	if err != nil {
		return "", "", err
	}
	bin, err := os.MkdirTemp("", "hotsplit-baseline-"+commit[:7]+"-")
	if err != nil {
		return "", "", err
	}
	// -buildvcs=false: the tree is no checkout (CI sets it too, so the
	// build cache sees one set of flags).
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", bin+string(filepath.Separator), "./cmd/hotsplitd", "./cmd/hotsplitctl")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build of the upgrade baseline %s in %s: %v\n%s", commit, src, err, out)
	}
	return filepath.Join(bin, "hotsplitd"), filepath.Join(bin, "hotsplitctl"), nil
}

// baselineTree returns the directory holding commit's tree, extracting it
// first if no complete one is there.
func baselineTree(repo, commit string) (string, error) {
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	root = filepath.Join(root, "hotsplit-upgrade-baselines")
	dir := filepath.Join(root, commit)
	done := filepath.Join(dir, ".extracted")
	if _, err := os.Stat(done); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, commit+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	// From the top: in a subdirectory git archive takes only its subtree.
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = repo
	untar := exec.Command("tar", "-x", "-C", tmp)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin = pipe
	var aerr, terr bytes.Buffer
	archive.Stderr, untar.Stderr = &aerr, &terr
	if err := untar.Start(); err != nil {
		return "", fmt.Errorf("tar: %w", err)
	}
	if err := archive.Run(); err != nil {
		untar.Wait()
		return "", fmt.Errorf("git archive %s: %v: %s", commit, err, aerr.String())
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("tar -x of git archive %s: %v: %s", commit, err, terr.String())
	}
	if err := os.WriteFile(filepath.Join(tmp, ".extracted"), []byte(commit+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another test binary put a complete tree there first.
		if _, serr := os.Stat(done); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("placing the baseline tree %s: %w", dir, err)
	}
	return dir, nil
}

// firstLine is the first line of a command's output, else its error.
func firstLine(out []byte, err error) string {
	if s, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n"); s != "" {
		return s
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.String()
	}
	return err.Error()
}

// TestBaselineMissingFromCloneFailsInOneLine: a commit this clone lacks (a
// shallow checkout) is refused before anything is extracted or built, in
// one line that says what to do.
func TestBaselineMissingFromCloneFailsInOneLine(t *testing.T) {
	const missing = "0123456789abcdef0123456789abcdef01234567"
	want := "the upgrade baseline " + missing + " is not in this clone: fetch full history"
	if _, err := exec.LookPath("git"); err != nil {
		want = "the upgrade baseline " + missing + " cannot be built: git is not on PATH"
	}
	_, _, err := buildBaseline(missing)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), want) {
		t.Fatalf("buildBaseline of a missing commit: %v", err)
	}
	t.Log(err)
}
