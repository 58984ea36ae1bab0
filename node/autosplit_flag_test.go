package node

import (
	"strings"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

func TestIntegrationAutoSplitStartFlag(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil) // bootstrapped without --autoSplit: off
	sw := func() *api.AutoSplitSwitch { return c.leaderNode().FSM().State().Switch() }
	if sw().Enabled {
		t.Fatal("switch on without any flag")
	}
	restartWith := func(id string, v bool) {
		c.stop(id)
		cfg := c.cfgs[id]
		cfg.AutoSplit = &v
		c.cfgs[id] = cfg
		c.restart(id)
	}

	// While no operator has set the switch, a member started with an explicit
	// flag commits its value.
	restartWith("n2", true)
	testutil.WaitFor(t, 15*time.Second, "the start flag of n2 to switch automatic splits on", func() bool {
		s := sw()
		return s.Enabled && s.Source == api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG && s.Actor == "flag@n2"
	})

	// Once an operator has set it, flags never change it; the mismatch is a
	// warning in status.
	if _, err := c.autoClient(c.leader()).SetEnabled(ctxT(t, 10*time.Second), &api.SetEnabledRequest{Enabled: false, Actor: "ops", Reason: "maintenance", RequestId: requestID()}); err != nil {
		t.Fatal(err)
	}
	restartWith("n3", true)
	testutil.WaitFor(t, 15*time.Second, "n3's record to carry its start flag", func() bool {
		m, ok := c.leaderNode().FSM().State().Member("n3")
		return ok && m.AutoSplitFlag == api.AutoSplitFlag_AUTO_SPLIT_FLAG_ON
	})
	c.waitBusinessConverged(10 * time.Second)
	if s := sw(); s.Enabled || s.Source != api.SwitchSource_SWITCH_SOURCE_OPERATOR {
		t.Fatalf("a start flag overrode the operator: %v", s)
	}
	st, err := c.autoClient("n1").Status(ctxT(t, 5*time.Second), &api.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range st.Warnings {
		found = found || strings.Contains(w, "member n3") && strings.Contains(w, "--autoSplit=true")
	}
	if !found {
		t.Fatalf("status warnings %q do not mention n3's ignored flag", st.Warnings)
	}
}
