package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func TestUsageErrors(t *testing.T) {
	f := startCluster(t)
	tests := []struct {
		args []string
		want string // the whole stderr line
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "hotsplitctl" (see 'hotsplitctl --help')`},
		{[]string{"route", "list"}, `unknown command "route" for "hotsplitctl"; did you mean routes? (see 'hotsplitctl --help')`},
		{[]string{"routes", "lsit"}, `routes: unknown command "lsit" for "hotsplitctl routes"; did you mean list? (see 'hotsplitctl routes --help')`},
		{[]string{"--bogus", "routes", "list"}, `unknown flag: --bogus (see 'hotsplitctl --help')`},
		{[]string{"routes", "list", "extra"}, `routes list: expects no arguments, got 1 argument(s) (see 'hotsplitctl routes list --help')`},
		{[]string{"split", "7"}, `split: expects ROUTE_ID KEY, got 1 argument(s) (see 'hotsplitctl split --help')`},
		{[]string{"split", "0", "k"}, `split: ROUTE_ID "0": want a positive integer (e.g. 7 or r7) (see 'hotsplitctl split --help')`},
		{[]string{"split", "7", `k\q`}, `split: KEY 'k\q': unknown escape \q at byte 1 (write \\ for a backslash) (see 'hotsplitctl split --help')`},
		{[]string{"split", "7", "k", "--expected-version", "0"}, `split: --expected-version 0: catalog versions start at 1 (see 'hotsplitctl split --help')`},
		{[]string{"split", "7", "k", "--expected-version", "v9"}, `split: invalid argument "v9" for "--expected-version" flag: strconv.ParseUint: parsing "v9": invalid syntax (see 'hotsplitctl split --help')`},
		{[]string{"split", "7", "k", "--request-id", "has space"}, `split: --request-id "has space": byte 3 is not printable ASCII (see 'hotsplitctl split --help')`},
		{[]string{"routes", "get"}, `routes get: expects KEY (or --id ROUTE_ID) (see 'hotsplitctl routes get --help')`},
		{[]string{"routes", "get", "k", "--id", "7"}, `routes get: give KEY or --id, not both (see 'hotsplitctl routes get --help')`},
		{[]string{"routes", "list", "-o", "yaml"}, `routes list: -o "yaml": want table or json (see 'hotsplitctl routes list --help')`},
		{[]string{"routes", "list", "--consistency", "eventual"}, `routes list: --consistency "eventual": want linearizable or stale (see 'hotsplitctl routes list --help')`},
		{[]string{"routes", "list", "--timeout", "0s"}, `routes list: --timeout 0s: want a positive duration such as 5s (see 'hotsplitctl routes list --help')`},
		{[]string{"routes", "list", "--actor", " "}, `routes list: --actor is empty: say who you are (default $USER@hostname) (see 'hotsplitctl routes list --help')`},
		{[]string{"autosplit", "abort", "opx"}, `autosplit abort: OP_ID "opx": want a positive integer (e.g. 7 or op7) (see 'hotsplitctl autosplit abort --help')`},
		{[]string{"autosplit", "config", "set"}, `autosplit config set: expects FIELD=VALUE..., got none (see 'hotsplitctl autosplit config set --help')`},
		{[]string{"cluster", "join", "--raft-addr", "h:1", "--grpc-addr", "h:2"}, `cluster join: --id is required (see 'hotsplitctl cluster join --help')`},
		{[]string{"cluster", "join", "--id", "n4", "--raft-addr", "h", "--grpc-addr", "h:2"}, `cluster join: --raft-addr "h": want host:port: address h: missing port in address (see 'hotsplitctl cluster join --help')`},
		{[]string{"cluster", "remove"}, `cluster remove: expects NODE_ID, got 0 argument(s) (see 'hotsplitctl cluster remove --help')`},
	}
	for _, tc := range tests {
		r := ctl(t, f, tc.args...)
		if want := "hotsplitctl: " + tc.want + "\n"; r.code != exitUsage || r.stderr != want || r.stdout != "" {
			t.Errorf("%q: exit %d stdout %q stderr:\n%q\nwant exit 2:\n%q", tc.args, r.code, r.stdout, r.stderr, want)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) != 0 {
		t.Errorf("usage errors sent requests: %v", f.reqs)
	}
}

func TestEndpointsFlag(t *testing.T) {
	for _, tc := range []struct {
		endpoints, want string
	}{
		{"", "--endpoints is empty: give host:port[,host:port...] or set $HOTSPLIT_ENDPOINTS"},
		{"127.0.0.1:7001,,127.0.0.1:7002", `--endpoints "127.0.0.1:7001,,127.0.0.1:7002": entry 2 is empty`},
		{"127.0.0.1:7001,localhost", `--endpoints entry 2 "localhost": want host:port: address localhost: missing port in address`},
		{"http://127.0.0.1:7001", `--endpoints entry 1 "http://127.0.0.1:7001": want host:port`},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--endpoints", tc.endpoints, "routes", "list"}, testEnv, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("--endpoints %q: exit %d stderr %q, want 2 and %q", tc.endpoints, code, errOut.String(), tc.want)
		}
	}
	// $HOTSPLIT_ENDPOINTS is the default; the flag wins over it.
	f := startCluster(t)
	f.set("Leader", &api.LeaderResponse{LeaderId: "n1"})
	e := testEnv
	e.getenv = func(k string) string {
		if k == "HOTSPLIT_ENDPOINTS" {
			return f.addr
		}
		return testEnv.getenv(k)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"cluster", "leader"}, e, &out, &errOut); code != 0 || f.calls("Leader") != 1 {
		t.Fatalf("with $HOTSPLIT_ENDPOINTS: exit %d stderr %q, %d calls", code, errOut.String(), f.calls("Leader"))
	}
	dead := startCluster(t).addr // a second server that must not be asked
	if code := run(context.Background(), []string{"--endpoints", dead, "cluster", "leader"}, e, &out, &errOut); code != 0 || f.calls("Leader") != 1 {
		t.Fatalf("--endpoints did not override $HOTSPLIT_ENDPOINTS: exit %d, %d calls", code, f.calls("Leader"))
	}
}

func TestUnreachable(t *testing.T) {
	r := ctl(t, nil, "--endpoints", closedAddr(t), "--timeout", "1s", "routes", "list")
	if r.code != exitUnavailable || strings.Count(r.stderr, "\n") != 1 ||
		!strings.HasPrefix(r.stderr, "hotsplitctl: routes list: Unavailable: endpoint 127.0.0.1:") ||
		!strings.Contains(r.stderr, "connection refused") {
		t.Fatalf("exit %d stderr %q, want 3 and one line naming the endpoint and the cause", r.code, r.stderr)
	}
}

// closedAddr returns a loopback address that refuses connections.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func TestGroupsShowHelp(t *testing.T) {
	for _, args := range [][]string{{}, {"routes"}, {"autosplit"}, {"autosplit", "config"}, {"cluster"}} {
		r := ctl(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, "Available Commands:") {
			t.Errorf("%q: exit %d, stdout %.80q", args, r.code, r.stdout)
		}
	}
}

// TestEveryCommandHasExample walks the whole tree: every command's --help
// shows an example, and every example line runs a real subcommand.
func TestEveryCommandHasExample(t *testing.T) {
	a := &app{env: testEnv, out: &bytes.Buffer{}, errOut: &bytes.Buffer{}}
	root := a.rootCmd()
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" {
			return
		}
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Example", c.CommandPath())
		}
		for _, line := range strings.Split(c.Example, "\n") {
			cmdline, _, _ := strings.Cut(line, "|")
			_, after, ok := strings.Cut(cmdline, "hotsplitctl ")
			if !ok {
				t.Errorf("example %q of %q does not run hotsplitctl", line, c.CommandPath())
				continue
			}
			found, _, err := root.Find(strings.Fields(after))
			if err != nil || found == root {
				t.Errorf("example %q of %q runs no subcommand (%v)", line, c.CommandPath(), err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n != 46 {
		t.Fatalf("walked %d commands, want the whole tree", n)
	}
	r := ctl(t, nil, "split", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "Examples:\n  hotsplitctl split 7 'user:42'") || !strings.Contains(r.stdout, `\xNN (one byte)`) {
		t.Errorf("split --help lacks its example or the KEY escapes:\n%s", r.stdout)
	}
}
