package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestIntegrationProcessRequestIDBoundToItsRequest: through hotsplitctl
// against a real node over mutual TLS, a request id answers a retry of its
// request with the first answer, and refuses any other request under it
// (another split, a kill switch, a config change) in one line naming the id
// and the first request, exit 1, with the catalog, the switch and the config
// unchanged.
func TestIntegrationProcessRequestIDBoundToItsRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs a hotsplitd process")
	}
	hotsplitd, hotsplitctl := binaries(t)
	n1, env := startSecureNode(t, hotsplitd, hotsplitctl, t.TempDir(), "--initialSplits", "user:5")
	ep := n1.grpc
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return ctlExit(t, hotsplitctl, env, ep, "15s", args...)
	}
	mustRun := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(args...)
		if code != 0 {
			t.Fatalf("hotsplitctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	// state is what a refused request must leave as it was.
	state := func() string {
		t.Helper()
		return routesJSON(t, hotsplitctl, env, ep) + "\n" + jsonField(t, mustRun("autosplit", "config", "get", "-o", "json"), "config") +
			"\n" + jsonField(t, mustRun("autosplit", "status", "-o", "json"), "switch")
	}
	refused := func(first string, args ...string) {
		t.Helper()
		before := state()
		_, errOut, code := run(args...)
		line := strings.TrimSpace(errOut)
		if code != 1 || strings.Contains(line, "\n") || !strings.Contains(line, "FailedPrecondition") ||
			!strings.Contains(line, "request id "+args[len(args)-1]+" was used for "+first) {
			t.Fatalf("hotsplitctl %s: exit %d, want 1 and one line naming the id and %q:\n%s", strings.Join(args, " "), code, first, errOut)
		}
		if after := state(); after != before {
			t.Fatalf("hotsplitctl %s was refused but changed the state:\nbefore %s\nafter  %s", strings.Join(args, " "), before, after)
		}
	}

	// A split: its retry answers as the first time; another split, a
	// kill switch and a config change under its id are refused.
	first := mustRun("split", "2", "user:9", "--request-id", "test-req-1")
	if again := mustRun("split", "2", "user:9", "--request-id", "test-req-1"); again != first {
		t.Fatalf("the retry answered\n%s\nthe first time\n%s", again, first)
	}
	splitWords := `split r2 at "user:9" by admin`
	refused(splitWords, "split", "1", "user:1", "--request-id", "test-req-1")
	refused(splitWords, "autosplit", "disable", "--reason", "x", "--request-id", "test-req-1")
	refused(splitWords, "autosplit", "config", "set", "threshold=5000", "--request-id", "test-req-1")

	// The kill switch: its retry answers as the first time; another
	// reason under its id is another request.
	first = mustRun("autosplit", "disable", "--reason", "drill", "--request-id", "test-req-2")
	if again := mustRun("autosplit", "disable", "--reason", "drill", "--request-id", "test-req-2"); again != first {
		t.Fatalf("the retry answered\n%s\nthe first time\n%s", again, first)
	}
	refused(`autosplit disable (reason "drill") by admin`, "autosplit", "disable", "--reason", "other", "--request-id", "test-req-2")
	refused(`autosplit disable (reason "drill") by admin`, "split", "1", "user:1", "--request-id", "test-req-2")

	// A config change: its retry answers as the first time; another value
	// under its id is refused.
	first = mustRun("autosplit", "config", "set", "threshold=5000", "--request-id", "test-req-3")
	if again := mustRun("autosplit", "config", "set", "threshold=5000", "--request-id", "test-req-3"); again != first {
		t.Fatalf("the retry answered\n%s\nthe first time\n%s", again, first)
	}
	refused("config set threshold=5000 by admin", "autosplit", "config", "set", "threshold=6000", "--request-id", "test-req-3")
	refused("config set threshold=5000 by admin", "autosplit", "enable", "--reason", "x", "--request-id", "test-req-3")
}

// jsonField is one top-level field of a JSON object, as the CLI wrote it
// (the rest, such as the read's applied index, moves with every entry).
func jsonField(t *testing.T, doc, key string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &m); err != nil || m[key] == nil {
		t.Fatalf("no %q in %s: %v", key, doc, err)
	}
	return string(m[key])
}
