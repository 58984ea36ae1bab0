package node

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/internal/testutil"
)

// No log line names a key twice (node=n1 node_id=n1 was one): a cluster's
// lines through bootstrap, joins, a split, a stopped and restarted
// follower and a leadership transfer, at debug level, parsed as logfmt.
func TestIntegrationLogLinesHaveNoDuplicateKeys(t *testing.T) {
	skipShort(t)
	var buf testutil.LogBuffer
	logger := NewLogger(&buf, slog.LevelDebug, false)
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.Logger = logger })
	leader := c.waitLeaderReady(10 * time.Second)
	if _, err := c.split(leader, "m"); err != nil {
		t.Fatal(err)
	}
	f := c.followers()[0]
	c.stop(f)
	c.restart(f)
	if err := c.node(leader).Raft().LeadershipTransfer().Error(); err != nil {
		t.Logf("leadership transfer: %v", err)
	}
	c.waitLeaderReady(10 * time.Second)
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) < 20 {
		t.Fatalf("only %d log lines", len(lines))
	}
	for _, line := range lines {
		keys, err := logfmtKeys(line)
		if err != nil {
			t.Fatalf("%v in %q", err, line)
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Errorf("key %q twice in %q", k, line)
			}
			seen[k] = true
		}
	}
}

// logfmtKeys returns the keys of one slog text line in order.
func logfmtKeys(line string) ([]string, error) {
	var keys []string
	for s := line; s != ""; {
		s = strings.TrimLeft(s, " ")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("no key=value at %q", s)
		}
		keys = append(keys, s[:eq])
		s = s[eq+1:]
		if strings.HasPrefix(s, `"`) { // a quoted value: up to the unescaped quote
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated quote")
			}
			s = s[i+1:]
		} else if sp := strings.IndexByte(s, ' '); sp >= 0 {
			s = s[sp:]
		} else {
			s = ""
		}
	}
	return keys, nil
}
