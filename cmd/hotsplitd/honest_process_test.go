package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestIntegrationProcessHonestAnswers: what hotsplitctl prints from a real
// node is what is so, in words: a retired route gets one answer from split,
// routes get --id and explain ("r1 was split into r2, r3 at …"); a config
// set that changes nothing says "unchanged" and records no decision; a
// server message names enums as the tables do (active, not
// ROUTE_STATE_ACTIVE); the node's raft log names its servers, no %+v.
func TestIntegrationProcessHonestAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs a hotsplitd process")
	}
	hotsplitd, hotsplitctl := binaries(t)
	n1, env := startSecureNode(t, hotsplitd, hotsplitctl, t.TempDir())
	ep := n1.grpc
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return ctlExit(t, hotsplitctl, env, ep, "15s", args...)
	}
	if _, errOut, code := run("split", "1", "m"); code != 0 {
		t.Fatalf("split: exit %d: %s", code, errOut)
	}

	// A retired route: one sentence, three commands.
	fate := regexp.MustCompile(`r1 was split into r2, r3 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z \(catalog version 2\)`)
	_, splitErr, code := run("split", "1", "x")
	if code != 1 || !fate.MatchString(splitErr) {
		t.Fatalf("split of a retired route: exit %d: %s", code, splitErr)
	}
	said := fate.FindString(splitErr)
	if _, getErr, code := run("routes", "get", "--id", "1"); code != 1 || !strings.Contains(getErr, said) {
		t.Fatalf("routes get --id of a retired route: exit %d: %s, want %q", code, getErr, said)
	}
	if out, errOut, code := run("autosplit", "explain", "1"); code != 0 || !regexp.MustCompile(`(?m)^route\s+`+regexp.QuoteMeta(said)+`$`).MatchString(out) {
		t.Fatalf("explain of a retired route: exit %d: %s%s, want %q", code, out, errOut, said)
	}

	// A config set that changes nothing.
	decisions := func() int {
		out, _, _ := run("autosplit", "status")
		m := regexp.MustCompile(`recent decisions \((\d+)\)`).FindStringSubmatch(out)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	before := decisions()
	out, errOut, code := run("autosplit", "config", "set", "threshold=50000")
	if code != 0 || !strings.HasPrefix(out, "config unchanged: threshold=50000 already in force\n") || strings.Contains(out, "(changed)") {
		t.Fatalf("a config set that changes nothing: exit %d: %s%s", code, out, errOut)
	}
	if after := decisions(); after != before {
		t.Fatalf("a config set that changed nothing recorded a decision: %d -> %d", before, after)
	}

	// A server message for people.
	if _, errOut, code := run("split", "2", "z"); code != 1 || !strings.Contains(errOut, `r2["", "m") active`) || strings.Contains(errOut, "ROUTE_STATE_") {
		t.Fatalf("split outside the route: exit %d: %s", code, errOut)
	}

	b, _ := os.ReadFile(n1.logPath)
	if !regexp.MustCompile(`raft: initial configuration.* servers=`).Match(b) || strings.Contains(string(b), "%+v") {
		t.Fatalf("the node's log has an unexpanded verb or no initial configuration line:\n%s", b)
	}
}
