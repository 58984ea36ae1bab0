//go:build jepsen

package node

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// TestIntegrationStateCheckCatchesACorruptReplica (jepsen build: it uses the
// in-memory corruption seam). A clean `cluster check` shows one hash per
// node at one index. Then one follower's in-memory state is corrupted; the
// next check names it diverged, the leader's status warns about it, the
// mismatch gauge counts it, and the follower dumps its state, halts in one
// line and stops serving reads, while the others go on.
func TestIntegrationStateCheckCatchesACorruptReplica(t *testing.T) {
	skipShort(t)
	halted := map[string]chan error{}
	c := newTestCluster(t, 3, func(cfg *Config) {
		ch := make(chan error, 4)
		halted[cfg.ID] = ch
		cfg.Halt = func(err error) { ch <- err }
	})
	leader := c.waitLeaderReady(10 * time.Second)
	c.mustSplit(leader, "m")

	resp, err := c.clusterClient(c.followers()[0]).CheckState(ctxT(t, 30*time.Second), &api.CheckStateRequest{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetReports()) != 3 || len(resp.GetDiverged()) != 0 {
		t.Fatalf("clean check: %v", resp)
	}
	for _, r := range resp.GetReports() {
		if r.GetIndex() != resp.GetIndex() || hex.EncodeToString(r.GetHash()) != hex.EncodeToString(resp.GetReports()[0].GetHash()) ||
			r.GetOutcome() != api.StateOutcome_STATE_OUTCOME_AGREES {
			t.Fatalf("clean check: report %v differs", r)
		}
	}

	victim := c.followers()[0]
	c.node(victim).FSM().CorruptNextApply()
	c.mustSplit(leader, "t") // the next entry corrupts the victim
	resp, err = c.clusterClient(leader).CheckState(ctxT(t, 30*time.Second), &api.CheckStateRequest{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetDiverged()) != 1 || resp.GetDiverged()[0] != victim {
		t.Fatalf("check after corrupting %s: diverged %v (%v)", victim, resp.GetDiverged(), resp)
	}
	select {
	case err := <-halted[victim]:
		if !strings.Contains(err.Error(), "differs from") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("halt line %q", err)
		}
		dump := filepath.Join(c.cfgs[victim].DataDir, "diverged-state-"+strconv.FormatUint(resp.GetIndex(), 10)+".json")
		if !strings.Contains(err.Error(), dump) {
			t.Fatalf("halt line %q does not name the dump %s", err, dump)
		}
		if _, err := os.Stat(dump); err != nil {
			t.Fatalf("no state dump: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s kept running with a diverged state", victim)
	}
	for id, ch := range halted {
		if id != victim && len(ch) > 0 {
			t.Fatalf("%s halted too: %v", id, <-ch)
		}
	}
	testutil.WaitFor(t, 5*time.Second, victim+" to stop serving reads", func() bool {
		_, err := c.catalogClient(victim).ListRoutes(ctxT(t, time.Second), &api.ListRoutesRequest{Consistency: api.Consistency_CONSISTENCY_STALE})
		return status.Code(err) == codes.Unavailable
	})

	st, err := c.autoClient(leader).Status(ctxT(t, 5*time.Second), &api.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !containsAll(st.GetWarnings(), "node "+victim+" diverged") {
		t.Fatalf("status warnings %q do not name %s", st.GetWarnings(), victim)
	}
	if v := metricSample(t, c.node(leader), "hotsplit_state_mismatch", "diverged"); v != 1 {
		t.Fatalf("hotsplit_state_mismatch{outcome=diverged} = %v on the leader, want 1", v)
	}
	c.forgetHalted(victim)
	c.mustSplit(leader, "w") // the others go on
	for _, n := range c.running() {
		c.kill(n.ID()) // a graceful stop would wait for a leadership transfer a two-node remainder cannot finish
	}
}

func containsAll(ws []string, sub string) bool {
	for _, w := range ws {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}
