package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

func TestNextOpStep(t *testing.T) {
	op := func(id uint64, state api.OpState, next uint32, keys ...string) *api.Op {
		o := &api.Op{OpId: id, TargetRouteId: 100 + id, State: state, NextStep: next}
		for _, k := range keys {
			o.SplitKeys = append(o.SplitKeys, []byte(k))
		}
		return o
	}
	merge := func(id uint64, state api.OpState, next uint32) *api.Op {
		return &api.Op{OpId: id, Kind: api.OpKind_OP_KIND_MERGE, TargetRouteId: 100 + id, RightRouteId: 101 + id, State: state, NextStep: next, RouteDelta: -1}
	}
	const (
		pending = api.OpState_OP_STATE_PENDING
		running = api.OpState_OP_STATE_RUNNING
		paused  = api.OpState_OP_STATE_PAUSED
		done    = api.OpState_OP_STATE_DONE
	)
	cases := []struct {
		name     string
		switchOn bool
		live     []*api.Op
		want     proto.Message // a SplitRange or MergeRange; nil: nothing to propose
	}{
		{"no ops", true, nil, nil},
		{"switch off: nothing, even for a runnable op", false, []*api.Op{op(1, pending, 1, "k")}, nil},
		{"a pending op proposes its first step", true, []*api.Op{op(1, pending, 1, "k")},
			&api.SplitRange{RouteId: 101, SplitKey: []byte("k"), OpId: 1, Step: 1, Actor: "tester"}},
		{"a running op proposes its next step", true, []*api.Op{op(3, running, 2, "h", "h\x00")},
			&api.SplitRange{RouteId: 103, SplitKey: []byte("h\x00"), OpId: 3, Step: 2, Actor: "tester"}},
		{"the oldest runnable op goes first", true, []*api.Op{op(1, running, 1, "a"), op(2, pending, 1, "b")},
			&api.SplitRange{RouteId: 101, SplitKey: []byte("a"), OpId: 1, Step: 1, Actor: "tester"}},
		{"a paused op is skipped", true, []*api.Op{op(1, paused, 1, "a"), op(2, pending, 1, "b")},
			&api.SplitRange{RouteId: 102, SplitKey: []byte("b"), OpId: 2, Step: 1, Actor: "tester"}},
		{"a finished op is skipped", true, []*api.Op{op(1, done, 2, "a"), op(2, pending, 1, "b")},
			&api.SplitRange{RouteId: 102, SplitKey: []byte("b"), OpId: 2, Step: 1, Actor: "tester"}},
		{"only paused ops: nothing", true, []*api.Op{op(1, paused, 1, "a")}, nil},
		{"step 0: nothing (and no later op jumps the queue)", true, []*api.Op{op(1, pending, 0, "a"), op(2, pending, 1, "b")}, nil},
		{"past the last key: nothing (the FSM finishes the op)", true, []*api.Op{op(1, running, 2, "a"), op(2, pending, 1, "b")}, nil},
		{"no keys at all: nothing", true, []*api.Op{op(1, pending, 1)}, nil},
		{"a merge op proposes its one MergeRange", true, []*api.Op{merge(4, pending, 1), op(5, pending, 1, "b")},
			&api.MergeRange{LeftRouteId: 104, RightRouteId: 105, OpId: 4, Step: 1, Actor: "tester"}},
		{"a paused merge op is skipped", true, []*api.Op{merge(4, paused, 1), op(5, pending, 1, "b")},
			&api.SplitRange{RouteId: 105, SplitKey: []byte("b"), OpId: 5, Step: 1, Actor: "tester"}},
		{"a merge op past its step: nothing", true, []*api.Op{merge(4, running, 2), op(5, pending, 1, "b")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gotOp, cmd := NextOpStep(tc.switchOn, tc.live, "tester")
			var got proto.Message
			switch b := cmd.GetBody().(type) {
			case *api.Command_SplitRange:
				got = b.SplitRange
			case *api.Command_MergeRange:
				got = b.MergeRange
				if cmd.GetMinVersion() != clusterversion.AutoMerge.Version() {
					t.Fatalf("a merge step with min_version %d", cmd.GetMinVersion())
				}
			}
			if (got == nil) != (tc.want == nil) || (got != nil && !proto.Equal(got, tc.want)) {
				t.Fatalf("step %v, want %v", got, tc.want)
			}
			if (gotOp == nil) != (cmd == nil) || gotOp != nil && gotOp.GetOpId() != opIDOf(cmd) {
				t.Fatalf("op %v for step %v", gotOp, cmd)
			}
		})
	}
}

func opIDOf(c *api.Command) uint64 {
	if m := c.GetMergeRange(); m != nil {
		return m.GetOpId()
	}
	return c.GetSplitRange().GetOpId()
}
