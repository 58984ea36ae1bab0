package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
)

func moveRange(route, group uint64) *api.Command {
	return &api.Command{MinVersion: clusterversion.RangeMoves.Version(), Body: &api.Command_MoveRange{MoveRange: &api.MoveRange{
		RouteId: route, TargetGroupId: group, Actor: "alice"}}}
}

func ackMove(op *api.Op, ack api.MoveAck, identity string, watermark uint64) *api.Command {
	return &api.Command{MinVersion: clusterversion.RangeMoves.Version(), Body: &api.Command_AckMove{AckMove: &api.AckMove{
		OpId: op.GetOpId(), RouteId: op.GetTargetRouteId(), CatalogVersion: op.GetStepCatalogVersion(), Ack: ack, Identity: identity, Watermark: watermark}}}
}

// movesCluster is a version 4 cluster of groups 7 (dn-a1, dn-a2) and 8
// (dn-b1), routes 1 ["", m) and 2 [m, +inf), both in group 7, the switch
// on.
func movesCluster(t *testing.T) *harness {
	t.Helper()
	h := groupsBootstrapped(t, 2, "m")
	h.editState(func(p *api.StateSnapshot) {
		p.Catalog.Routes[1].GroupId = 7
		p.Groups[0].Identities = []string{"dn-a1", "dn-a2"}
		p.Groups[1].Identities = []string{"dn-b1"}
	})
	wantCode(t, h.run(operatorSwitch(true)), api.ResultCode_RESULT_CODE_OK)
	return h
}

// moveOp is the live (or last) move op of the state.
func moveOp(t *testing.T, h *harness, id uint64) *api.Op {
	t.Helper()
	op, ok := h.state().Op(id)
	if !ok || !isMoveOp(op) {
		t.Fatalf("no move op %d: %v", id, h.state().Ops())
	}
	return op
}

// stepMoves proposes what NextMoveStep chooses until it chooses nothing,
// as the leader does, and returns how many steps it proposed.
func stepMoves(t *testing.T, h *harness) int {
	t.Helper()
	n := 0
	for range 8 {
		_, cmd, _ := NextMoveStep(h.state(), h.ms, "scheduler")
		if cmd == nil {
			return n
		}
		wantCode(t, h.run(cmd), api.ResultCode_RESULT_CODE_OK)
		n++
	}
	t.Fatal("moves still stepping after 8 steps")
	return n
}

func routeState(t *testing.T, h *harness, id uint64) *catalog.RouteDescriptor {
	t.Helper()
	r, ok := h.state().Catalog().Route(id)
	if !ok {
		t.Fatalf("route %d gone", id)
	}
	return r
}

// A move through every step: each is one catalog change with a changed
// route delta, no step goes ahead of its acknowledgements, and the
// stepper proposes each step once it is due.
func TestMoveSteps(t *testing.T) {
	h := movesCluster(t)
	v0 := h.state().Catalog().Version()
	r := h.run(moveRange(2, 8))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	op := r.GetOp()
	if op.GetNextStep() != moveStepFence || op.GetState() != api.OpState_OP_STATE_RUNNING || op.GetSourceGroupId() != 7 || op.GetTargetGroupId() != 8 ||
		op.GetStepCatalogVersion() != v0+1 || r.GetCatalogVersion() != v0+1 {
		t.Fatalf("begun: %v", op)
	}
	if rt := routeState(t, h, 2); rt.State != catalog.StateMigratingSource || rt.GroupID != 7 || rt.Moving().TargetGroupID != 8 {
		t.Fatalf("route after the begin: %v %v", rt, rt.Moving())
	}
	deltas, _ := h.state().History().Since(v0)
	if len(deltas) != 1 || len(deltas[0].Changed) != 1 || deltas[0].Changed[0].ID != 2 || len(deltas[0].Removed)+len(deltas[0].Added) != 0 {
		t.Fatalf("begin delta %+v", deltas)
	}
	// Nothing is due before the copy: the stepper waits for the TTL.
	if _, cmd, wait := NextMoveStep(h.state(), h.ms, "scheduler"); cmd != nil || wait == 0 || wait > DefaultMoveTTLMs {
		t.Fatalf("before the copy: %v, wait %d", cmd, wait)
	}
	fence := &api.Command{MinVersion: 4, Body: &api.Command_MoveRange{MoveRange: &api.MoveRange{RouteId: 2, TargetGroupId: 8, OpId: op.GetOpId(), Step: moveStepFence}}}
	before := h.state()
	if r := h.run(proto.Clone(fence).(*api.Command)); r.Code != api.ResultCode_RESULT_CODE_MOVE_ACK_STALE || !strings.Contains(r.Message, "waits for the copy acknowledgements of [dn-b1]") {
		t.Fatalf("fence before the copy: %v %s", r.Code, r.Message)
	}
	assertUnchanged(t, before, h.state())
	wantCode(t, h.run(ackMove(op, api.MoveAck_MOVE_ACK_COPIED, "dn-b1", 0)), api.ResultCode_RESULT_CODE_OK)
	if n := stepMoves(t, h); n != 1 {
		t.Fatalf("%d steps after the copy, want the fence", n)
	}
	op = moveOp(t, h, op.GetOpId())
	if rt := routeState(t, h, 2); rt.State != catalog.StateWriteFenced || op.GetNextStep() != moveStepCommit || op.GetStepCatalogVersion() != v0+2 {
		t.Fatalf("after the fence: route %v op %v", rt, op)
	}
	// The commit waits for both source nodes' fence and the catch-up to the
	// highest of their watermarks: Apply refuses a commit the stepper would
	// not propose.
	commit := &api.Command{MinVersion: 4, Body: &api.Command_MoveRange{MoveRange: &api.MoveRange{RouteId: 2, TargetGroupId: 8, OpId: op.GetOpId(), Step: moveStepCommit}}}
	before = h.state()
	if r := h.run(proto.Clone(commit).(*api.Command)); r.Code != api.ResultCode_RESULT_CODE_MOVE_ACK_STALE || !strings.Contains(r.Message, "the commit waits for the fenced acknowledgements of [dn-a1 dn-a2]") {
		t.Fatalf("commit before the fence acknowledgements: %v %s", r.Code, r.Message)
	}
	assertUnchanged(t, before, h.state())
	wantCode(t, h.run(ackMove(op, api.MoveAck_MOVE_ACK_FENCED, "dn-a1", 40)), api.ResultCode_RESULT_CODE_OK)
	op = moveOp(t, h, op.GetOpId())
	before = h.state()
	if r := h.run(ackMove(op, api.MoveAck_MOVE_ACK_CAUGHT_UP, "dn-b1", 40)); r.Code != api.ResultCode_RESULT_CODE_MOVE_ACK_STALE ||
		!strings.Contains(r.Message, "fence acknowledgements of [dn-a2] are missing") {
		t.Fatalf("catch-up before the whole fence: %v %s", r.Code, r.Message)
	}
	assertUnchanged(t, before, h.state())
	wantCode(t, h.run(ackMove(op, api.MoveAck_MOVE_ACK_FENCED, "dn-a2", 55)), api.ResultCode_RESULT_CODE_OK)
	op = moveOp(t, h, op.GetOpId())
	if op.GetWatermark() != 55 || stepMoves(t, h) != 0 {
		t.Fatalf("watermark %d, or a step before the catch-up", op.GetWatermark())
	}
	if r := h.run(ackMove(op, api.MoveAck_MOVE_ACK_CAUGHT_UP, "dn-b1", 40)); r.Code != api.ResultCode_RESULT_CODE_MOVE_ACK_STALE ||
		!strings.Contains(r.Message, "watermark 40 given, the source's final watermark is 55") {
		t.Fatalf("catch-up naming another watermark: %v %s", r.Code, r.Message)
	}
	wantCode(t, h.run(ackMove(op, api.MoveAck_MOVE_ACK_CAUGHT_UP, "dn-b1", 55)), api.ResultCode_RESULT_CODE_OK)
	if n := stepMoves(t, h); n != 1 {
		t.Fatalf("%d steps after the catch-up, want the commit", n)
	}
	op = moveOp(t, h, op.GetOpId())
	rt := routeState(t, h, 2)
	if rt.State != catalog.StateActive || rt.GroupID != 8 || rt.Moving() != nil || op.GetState() != api.OpState_OP_STATE_DONE ||
		h.state().Catalog().Version() != v0+3 || string(rt.Start) != "m" {
		t.Fatalf("after the commit: route %v op %v", rt, op)
	}
	var details []string
	for _, d := range h.state().Decisions() {
		if d.GetKind() == api.DecisionKind_DECISION_KIND_MOVE {
			details = append(details, d.GetDetail())
		}
	}
	if strings.Join(details, "; ") != "move begun: r2 from group 7 to group 8; move fenced: r2 from group 7 to group 8; move committed: r2 from group 7 to group 8" {
		t.Fatalf("decisions %q", details)
	}
}

// Every refusal of a manual move names what was wrong and changes nothing
// but last_hlc.
func TestMoveRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(h *harness)
		cmd  *api.Command
		code api.ResultCode
		msg  string
	}{
		{"same group", nil, moveRange(2, 7), api.ResultCode_RESULT_CODE_MOVE_REFUSED, "group 7 serves it already"},
		{"unknown group", nil, moveRange(2, 99), api.ResultCode_RESULT_CODE_GROUP_NOT_FOUND, "no shard group 99"},
		{"unknown route", nil, moveRange(9, 8), api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND, "route 9"},
		{"draining target", func(h *harness) {
			wantCode(t, h.run(setGroup(&api.SetGroup{GroupId: 8, State: api.GroupState_GROUP_STATE_DRAINING})), api.ResultCode_RESULT_CODE_OK)
		}, moveRange(2, 8), api.ResultCode_RESULT_CODE_MOVE_REFUSED, "group 8 (group-8) is DRAINING and receives no route"},
		{"target without data nodes", func(h *harness) {
			wantCode(t, h.run(setGroup(&api.SetGroup{GroupId: 8, RemoveIdentities: []string{"dn-b1"}})), api.ResultCode_RESULT_CODE_OK)
		}, moveRange(2, 8), api.ResultCode_RESULT_CODE_MOVE_REFUSED, "group 8 (group-8) has no data-node identity"},
		{"stale expected version", nil, func() *api.Command {
			c := moveRange(2, 8)
			c.GetMoveRange().ExpectedVersion = proto.Uint64(99)
			return c
		}(), api.ResultCode_RESULT_CODE_VERSION_MISMATCH, "expected version 99"},
		{"route in a live move", func(h *harness) {
			wantCode(t, h.run(moveRange(2, 8)), api.ResultCode_RESULT_CODE_OK)
		}, moveRange(2, 8), api.ResultCode_RESULT_CODE_ROUTE_NOT_ACTIVE, "route 2 is ROUTE_STATE_MIGRATING_SOURCE"},
		{"step without op", nil, func() *api.Command {
			c := moveRange(2, 8)
			c.GetMoveRange().Step = 2
			return c
		}(), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: 2 given without op_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := movesCluster(t)
			if tc.prep != nil {
				tc.prep(h)
			}
			before := h.state()
			r := h.run(tc.cmd)
			if r.Code != tc.code || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("%v %q, want %v containing %q", r.Code, r.Message, tc.code, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
	// Below version 4, the feature table's error.
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, nil)
	c := moveRange(2, 8)
	c.MinVersion = 0
	if r := h.run(c); r.Code != api.ResultCode_RESULT_CODE_INVALID_ARGUMENT || !strings.Contains(r.Message, "range_moves needs cluster version 4, the cluster runs 3") {
		t.Fatalf("below 4: %v %s", r.Code, r.Message)
	}
}

// Every refusal of an acknowledgement names the op, the step and what it
// expected, and changes nothing; a repeated one changes nothing.
func TestAckMoveRefusals(t *testing.T) {
	h := movesCluster(t)
	op := h.run(moveRange(2, 8)).GetOp()
	wrong := func(c *api.Command, edit func(a *api.AckMove)) *api.Command { edit(c.GetAckMove()); return c }
	for _, tc := range []struct {
		name string
		cmd  *api.Command
		code api.ResultCode
		msg  string
	}{
		{"identity of another group", ackMove(op, api.MoveAck_MOVE_ACK_COPIED, "dn-a1", 0), api.ResultCode_RESULT_CODE_MOVE_ACK_WRONG_GROUP,
			`ack_move copied for op 1 (step 2): identity "dn-a1" does not serve group 8, which owes it`},
		{"unknown identity", ackMove(op, api.MoveAck_MOVE_ACK_FENCED, "dn-x", 0), api.ResultCode_RESULT_CODE_MOVE_ACK_WRONG_GROUP, `"dn-x" does not serve group 7`},
		{"fence ack before the fence", ackMove(op, api.MoveAck_MOVE_ACK_FENCED, "dn-a1", 3), api.ResultCode_RESULT_CODE_MOVE_ACK_STALE,
			"ack_move fenced for op 1 (step 2): a fenced acknowledgement belongs to step 3"},
		{"stale catalog version", wrong(ackMove(op, api.MoveAck_MOVE_ACK_COPIED, "dn-b1", 0), func(a *api.AckMove) { a.CatalogVersion-- }),
			api.ResultCode_RESULT_CODE_MOVE_ACK_STALE, "catalog version 1 given, the step took effect at 2"},
		{"another route", wrong(ackMove(op, api.MoveAck_MOVE_ACK_COPIED, "dn-b1", 0), func(a *api.AckMove) { a.RouteId = 1 }),
			api.ResultCode_RESULT_CODE_MOVE_ACK_STALE, "route 1 given, the move is of route 2"},
		{"unknown op", wrong(ackMove(op, api.MoveAck_MOVE_ACK_COPIED, "dn-b1", 0), func(a *api.AckMove) { a.OpId = 77 }),
			api.ResultCode_RESULT_CODE_OP_NOT_FOUND, "op 77 not found"},
		{"no ack kind", ackMove(op, api.MoveAck_MOVE_ACK_UNSPECIFIED, "dn-b1", 0), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "is not COPIED, FENCED or CAUGHT_UP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.state()
			r := h.run(tc.cmd)
			if r.Code != tc.code || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("%v %q, want %v containing %q", r.Code, r.Message, tc.code, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
	wantCode(t, h.run(ackMove(op, api.MoveAck_MOVE_ACK_COPIED, "dn-b1", 0)), api.ResultCode_RESULT_CODE_OK)
	before := h.state()
	if r := h.run(ackMove(op, api.MoveAck_MOVE_ACK_COPIED, "dn-b1", 0)); r.Code != api.ResultCode_RESULT_CODE_OK || r.Message != "duplicate acknowledgement" {
		t.Fatalf("duplicate: %v %s", r.Code, r.Message)
	}
	assertUnchanged(t, before, h.state())
}

// Aborts: an operator's at either step, the leader's after move_ttl_ms
// (refused before), each returns the route to its source in one catalog
// change; the switch holds a move before its fence and never after it.
func TestMoveAborts(t *testing.T) {
	t.Run("operator, begun and fenced", func(t *testing.T) {
		for _, fenced := range []bool{false, true} {
			h := movesCluster(t)
			op := h.run(moveRange(2, 8)).GetOp()
			if fenced {
				wantCode(t, h.run(ackMove(op, api.MoveAck_MOVE_ACK_COPIED, "dn-b1", 0)), api.ResultCode_RESULT_CODE_OK)
				stepMoves(t, h)
			}
			v := h.state().Catalog().Version()
			r := h.run(abort(op.GetOpId(), "changed my mind"))
			wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
			rt := routeState(t, h, 2)
			if rt.State != catalog.StateActive || rt.GroupID != 7 || rt.Moving() != nil || h.state().Catalog().Version() != v+1 ||
				r.GetOp().GetState() != api.OpState_OP_STATE_ABORTED || r.GetOp().GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_OPERATOR {
				t.Fatalf("fenced=%v: after the abort route %v op %v", fenced, rt, r.GetOp())
			}
			// A later move is a new op that copies afresh.
			again := h.run(moveRange(2, 8)).GetOp()
			if again.GetOpId() == op.GetOpId() || len(again.GetAckedCopied()) != 0 {
				t.Fatalf("the next move %v", again)
			}
		}
	})
	t.Run("ttl", func(t *testing.T) {
		h := movesCluster(t)
		op := h.run(moveRange(2, 8)).GetOp()
		ttlAbort := &api.Command{MinVersion: 4, Body: &api.Command_AbortOp{AbortOp: &api.AbortOp{OpId: op.GetOpId(), MoveTtl: true, Actor: "scheduler"}}}
		before := h.state()
		if r := h.run(proto.Clone(ttlAbort).(*api.Command)); r.Code != api.ResultCode_RESULT_CODE_INVALID_ARGUMENT || !strings.Contains(r.Message, "waits until 600000 ms past it") {
			t.Fatalf("early ttl abort: %v %s", r.Code, r.Message)
		}
		assertUnchanged(t, before, h.state())
		h.ms += DefaultMoveTTLMs
		if n := stepMoves(t, h); n != 1 {
			t.Fatalf("%d steps after the TTL, want the abort", n)
		}
		op = moveOp(t, h, op.GetOpId())
		if op.GetState() != api.OpState_OP_STATE_ABORTED || op.GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_MOVE_TTL || routeState(t, h, 2).State != catalog.StateActive {
			t.Fatalf("after the ttl: %v", op)
		}
	})
	t.Run("switch", func(t *testing.T) {
		h := movesCluster(t)
		held := h.run(moveRange(2, 8)).GetOp()
		wantCode(t, h.run(addGroup("third", 0, "dn-c1")), api.ResultCode_RESULT_CODE_OK)
		fenced := h.run(moveRange(1, 9)).GetOp()
		wantCode(t, h.run(ackMove(fenced, api.MoveAck_MOVE_ACK_COPIED, "dn-c1", 0)), api.ResultCode_RESULT_CODE_OK)
		wantCode(t, h.run(ackMove(held, api.MoveAck_MOVE_ACK_COPIED, "dn-b1", 0)), api.ResultCode_RESULT_CODE_OK)
		// Fence the second move only: the first is held by the switch.
		wantCode(t, h.run(&api.Command{MinVersion: 4, Body: &api.Command_MoveRange{MoveRange: &api.MoveRange{RouteId: 1, TargetGroupId: 9, OpId: fenced.GetOpId(), Step: moveStepFence}}}),
			api.ResultCode_RESULT_CODE_OK)
		wantCode(t, h.run(operatorSwitch(false)), api.ResultCode_RESULT_CODE_OK)
		if s := moveOp(t, h, held.GetOpId()).GetState(); s != api.OpState_OP_STATE_PAUSED {
			t.Fatalf("the unfenced move is %v with the switch off", s)
		}
		fenced = moveOp(t, h, fenced.GetOpId())
		if fenced.GetState() != api.OpState_OP_STATE_RUNNING {
			t.Fatalf("the fenced move is %v with the switch off", fenced.GetState())
		}
		for _, id := range []string{"dn-a1", "dn-a2"} {
			wantCode(t, h.run(ackMove(fenced, api.MoveAck_MOVE_ACK_FENCED, id, 9)), api.ResultCode_RESULT_CODE_OK)
		}
		wantCode(t, h.run(ackMove(fenced, api.MoveAck_MOVE_ACK_CAUGHT_UP, "dn-c1", 9)), api.ResultCode_RESULT_CODE_OK)
		if n := stepMoves(t, h); n != 1 || moveOp(t, h, fenced.GetOpId()).GetState() != api.OpState_OP_STATE_DONE {
			t.Fatalf("%d steps with the switch off: the fenced move must commit and the held one wait", n)
		}
		if routeState(t, h, 2).State != catalog.StateMigratingSource {
			t.Fatal("the held move was fenced with the switch off")
		}
		wantCode(t, h.run(operatorSwitch(true)), api.ResultCode_RESULT_CODE_OK)
		if n := stepMoves(t, h); n != 1 || routeState(t, h, 2).State != catalog.StateWriteFenced {
			t.Fatalf("%d steps after the switch came back: the held move fences", n)
		}
	})
}

// A group that a live move targets cannot be removed, and no split op
// step, merge or second move touches a moving route.
func TestMoveExclusions(t *testing.T) {
	h := movesCluster(t)
	wantCode(t, h.run(addGroup("empty", 0, "dn-e")), api.ResultCode_RESULT_CODE_OK)
	op := h.run(moveRange(2, 9)).GetOp()
	for _, tc := range []struct {
		name string
		cmd  *api.Command
	}{
		{"remove the target", removeGroup(9)},
		{"split the route", split(2, "q")},
		{"merge the route", merge(1, 2)},
		{"a split step on it", step(op.GetOpId(), 2, 2, []byte("q"))},
		{"move it again", moveRange(2, 8)},
	} {
		before := h.state()
		if r := h.run(tc.cmd); r.Code == api.ResultCode_RESULT_CODE_OK {
			t.Errorf("%s: applied", tc.name)
			continue
		}
		assertUnchanged(t, before, h.state())
	}
	// Another route may move to the same group.
	wantCode(t, h.run(moveRange(1, 9)), api.ResultCode_RESULT_CODE_OK)
}
