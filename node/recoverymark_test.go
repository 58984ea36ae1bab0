package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A recovery flag runs once per data dir: with the mark written, either
// flag is refused in one line naming the flag to drop and the mark; a
// start without a flag, or a data dir without a mark, passes; a mark that
// is not one is an error, never silently ignored.
func TestRecoveryFlagsAreOneShot(t *testing.T) {
	dir := t.TempDir()
	force, restore := Recovery{ForceNewCluster: true}, Recovery{RestoreSnapshot: "b.hsnap"}
	for _, r := range []Recovery{{}, force, restore} {
		if err := checkRecoveryOnce(dir, r); err != nil {
			t.Fatalf("no mark yet, %+v: %v", r, err)
		}
	}
	at := time.Date(2026, 12, 6, 10, 0, 1, 0, time.UTC)
	if err := writeRecoveryMark(dir, recoveryMark{Flag: flagForceNewCluster, ClusterID: "c2", PreviousClusterID: "c1", Index: 40, At: at}); err != nil {
		t.Fatal(err)
	}
	if err := checkRecoveryOnce(dir, Recovery{}); err != nil {
		t.Fatalf("a start without a recovery flag: %v", err)
	}
	for _, tc := range []struct {
		r    Recovery
		drop string
	}{{force, "--forceNewCluster"}, {restore, "--restoreSnapshot"}} {
		err := checkRecoveryOnce(dir, tc.r)
		if !errors.Is(err, ErrRecoveryRan) {
			t.Fatalf("%s again: %v, want ErrRecoveryRan", tc.drop, err)
		}
		msg := err.Error()
		for _, want := range []string{"drop " + tc.drop + " to restart", "--forceNewCluster ran here at 2026-12-06T10:00:01Z", "cluster c2", filepath.Join(dir, recoveryFile)} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("not one line: %q", msg)
		}
	}
	m, err := readRecoveryMark(dir)
	if err != nil || m.ClusterID != "c2" || m.PreviousClusterID != "c1" || m.Index != 40 || !m.At.Equal(at) {
		t.Fatalf("mark read back as %+v, %v", m, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, recoveryFile+".tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := os.WriteFile(filepath.Join(dir, recoveryFile), []byte("garbage"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := checkRecoveryOnce(dir, force); err == nil || errors.Is(err, ErrRecoveryRan) || !strings.Contains(err.Error(), "not a recovery mark") {
		t.Fatalf("a damaged mark: %v", err)
	}
}
