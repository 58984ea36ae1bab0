package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func TestNextOpStep(t *testing.T) {
	op := func(id uint64, state api.OpState, next uint32, keys ...string) *api.Op {
		o := &api.Op{OpId: id, TargetRouteId: 100 + id, State: state, NextStep: next}
		for _, k := range keys {
			o.SplitKeys = append(o.SplitKeys, []byte(k))
		}
		return o
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
		want     *api.SplitRange // nil: nothing to propose
	}{
		{"no ops", true, nil, nil},
		{"switch off: nothing, even for a runnable op", false, []*api.Op{op(1, pending, 1, "k")}, nil},
		{"a pending op proposes its first step", true, []*api.Op{op(1, pending, 1, "k")},
			&api.SplitRange{RouteId: 101, SplitKey: []byte("k"), OpId: 1, Step: 1}},
		{"a running op proposes its next step", true, []*api.Op{op(3, running, 2, "h", "h\x00")},
			&api.SplitRange{RouteId: 103, SplitKey: []byte("h\x00"), OpId: 3, Step: 2}},
		{"the oldest runnable op goes first", true, []*api.Op{op(1, running, 1, "a"), op(2, pending, 1, "b")},
			&api.SplitRange{RouteId: 101, SplitKey: []byte("a"), OpId: 1, Step: 1}},
		{"a paused op is skipped", true, []*api.Op{op(1, paused, 1, "a"), op(2, pending, 1, "b")},
			&api.SplitRange{RouteId: 102, SplitKey: []byte("b"), OpId: 2, Step: 1}},
		{"a finished op is skipped", true, []*api.Op{op(1, done, 2, "a"), op(2, pending, 1, "b")},
			&api.SplitRange{RouteId: 102, SplitKey: []byte("b"), OpId: 2, Step: 1}},
		{"only paused ops: nothing", true, []*api.Op{op(1, paused, 1, "a")}, nil},
		{"step 0: nothing (and no later op jumps the queue)", true, []*api.Op{op(1, pending, 0, "a"), op(2, pending, 1, "b")}, nil},
		{"past the last key: nothing (the FSM finishes the op)", true, []*api.Op{op(1, running, 2, "a"), op(2, pending, 1, "b")}, nil},
		{"no keys at all: nothing", true, []*api.Op{op(1, pending, 1)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gotOp, got := NextOpStep(tc.switchOn, tc.live)
			if !proto.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("step %v, want %v", got, tc.want)
			}
			if (gotOp == nil) != (got == nil) || gotOp != nil && gotOp.GetOpId() != got.GetOpId() {
				t.Fatalf("op %v for step %v", gotOp, got)
			}
		})
	}
}
