package storage

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
	for _, flag := range []string{"", FlagForceNewCluster, FlagRestoreSnapshot} {
		if err := CheckRecoveryOnce(dir, flag); err != nil {
			t.Fatalf("no mark yet, %q: %v", flag, err)
		}
	}
	at := time.Date(2026, 12, 6, 10, 0, 1, 0, time.UTC)
	if err := WriteRecoveryMark(dir, RecoveryMark{Flag: FlagForceNewCluster, ClusterID: "c2", PreviousClusterID: "c1", Index: 40, At: at}); err != nil {
		t.Fatal(err)
	}
	if err := CheckRecoveryOnce(dir, ""); err != nil {
		t.Fatalf("a start without a recovery flag: %v", err)
	}
	for _, tc := range []struct {
		flag string
		drop string
	}{{FlagForceNewCluster, "--forceNewCluster"}, {FlagRestoreSnapshot, "--restoreSnapshot"}} {
		err := CheckRecoveryOnce(dir, tc.flag)
		if !errors.Is(err, ErrRecoveryRan) {
			t.Fatalf("%s again: %v, want ErrRecoveryRan", tc.drop, err)
		}
		msg := err.Error()
		for _, want := range []string{"drop " + tc.drop + " to restart", "--forceNewCluster ran here at 2026-12-06T10:00:01Z", "cluster c2", filepath.Join(dir, RecoveryFile)} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("not one line: %q", msg)
		}
	}
	m, err := ReadRecoveryMark(dir)
	if err != nil || m.ClusterID != "c2" || m.PreviousClusterID != "c1" || m.Index != 40 || !m.At.Equal(at) {
		t.Fatalf("mark read back as %+v, %v", m, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, RecoveryFile+".tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := os.WriteFile(filepath.Join(dir, RecoveryFile), []byte("garbage"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := CheckRecoveryOnce(dir, FlagForceNewCluster); err == nil || errors.Is(err, ErrRecoveryRan) || !strings.Contains(err.Error(), "not a recovery mark") {
		t.Fatalf("a damaged mark: %v", err)
	}
}
