package simlab

import (
	"fmt"
	"strconv"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/fsm"
)

// setGroups gives each group of Spec.GroupCapacities its capacity and its
// data nodes (node i serves group i mod n + 1, under its reporter name).
func (r *run) setGroups(ms uint64) error {
	n := len(r.spec.GroupCapacities)
	for g, capacity := range r.spec.GroupCapacities {
		set := &api.SetGroup{GroupId: uint64(g + 1), Capacity: &capacity, Actor: "simlab"}
		for i := g; i < r.spec.Nodes; i += n {
			set.AddIdentities = append(set.AddIdentities, nodeName(i))
		}
		res, err := r.apply(&api.Command{Body: &api.Command_SetGroup{SetGroup: set}}, ms)
		if err != nil {
			return err
		}
		if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
			return fmt.Errorf("%w: group %d: %s", ErrInvalidSpec, g+1, res.GetMessage())
		}
	}
	return nil
}

func nodeName(i int) string { return "node-" + strconv.Itoa(i) }

// nodeFor is the node that serves operation i on route: round robin over
// all nodes, or, with groups, over the nodes of the route's group.
func (r *run) nodeFor(route *catalog.RouteDescriptor, i int) int {
	n := len(r.spec.GroupCapacities)
	if n == 0 {
		return i % len(r.samp)
	}
	g := int(route.GroupID-1) % n
	per := (len(r.samp) - g + n - 1) / n // nodes g, g+n, g+2n, ...
	return g + n*(i%per)
}

// stepMoves records the column's group loads, then plays the data nodes'
// side of every live move and the leader's stepper: the owed
// acknowledgements of the step each move waits in (a copy, or a fence and
// a catch-up, both within the column), and the steps that become due.
func (r *run) stepMoves(c int, endMs uint64, cat *catalog.Catalog) error {
	n := len(r.spec.GroupCapacities)
	if n == 0 {
		return nil
	}
	loads := make([]float64, n)
	cat.Ascend(func(d *catalog.RouteDescriptor) bool {
		loads[int(d.GroupID-1)%n] += float64(r.load[d.ID]) * 60_000 / float64(r.stepMs)
		return true
	})
	for g := range loads {
		loads[g] /= float64(r.spec.GroupCapacities[g])
	}
	r.res.GroupLoads = append(r.res.GroupLoads, loads)
	if err := r.proposeMoves(c, endMs, cat); err != nil {
		return err
	}
	st := r.f.State()
	for _, op := range st.LiveOps() {
		if op.GetKind() != api.OpKind_OP_KIND_MOVE || op.GetState() != api.OpState_OP_STATE_RUNNING {
			continue
		}
		acks := []api.MoveAck{api.MoveAck_MOVE_ACK_COPIED}
		if op.GetNextStep() == 3 {
			acks = []api.MoveAck{api.MoveAck_MOVE_ACK_FENCED, api.MoveAck_MOVE_ACK_CAUGHT_UP}
		}
		for _, ack := range acks {
			owed := op.GetTargetGroupId()
			if ack == api.MoveAck_MOVE_ACK_FENCED {
				owed = op.GetSourceGroupId()
			}
			g, _ := r.f.State().Group(owed)
			cur, _ := r.f.State().Op(op.GetOpId())
			for _, id := range g.GetIdentities() {
				res, err := r.apply(&api.Command{Body: &api.Command_AckMove{AckMove: &api.AckMove{OpId: op.GetOpId(), RouteId: op.GetTargetRouteId(),
					CatalogVersion: cur.GetStepCatalogVersion(), Ack: ack, Watermark: uint64(c), Identity: id}}}, endMs)
				if err != nil {
					return err
				}
				if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
					return fmt.Errorf("ack %v of op %d by %s: %s", ack, op.GetOpId(), id, res.GetMessage())
				}
				if ack == api.MoveAck_MOVE_ACK_FENCED {
					cur = res.GetOp()
				}
			}
		}
	}
	return r.proposeMoves(c, endMs, cat)
}

// proposeMoves applies what the leader's stepper proposes for the moves
// until it proposes nothing, and records each commit; cat is the catalog
// the column's load was generated under.
func (r *run) proposeMoves(c int, endMs uint64, cat *catalog.Catalog) error {
	for range 64 {
		st := r.f.State()
		op, cmd, _ := fsm.NextMoveStep(st, endMs, "simlab")
		if op == nil {
			return nil
		}
		plannedLoad, sourceLoad := op.GetScore(), r.groupLoadAt(cat, op.GetSourceGroupId())
		res, err := r.apply(cmd, endMs)
		if err != nil {
			return err
		}
		if res.GetCode() != api.ResultCode_RESULT_CODE_OK || cmd.GetMoveRange().GetStep() != 3 {
			continue
		}
		m := Move{Column: c, RouteID: op.GetTargetRouteId(), From: op.GetSourceGroupId(), To: op.GetTargetGroupId(),
			Start: op.GetTargetStart(), End: op.GetTargetEnd()}
		if sourceLoad > 0 {
			m.ShareOfSourceLoadBP = uint32(min(plannedLoad*10_000/sourceLoad, 10_000))
		}
		r.res.Moves = append(r.res.Moves, m)
	}
	return fmt.Errorf("moves still stepping after 64 steps")
}

// groupLoadAt is group's load in the current column, weighted ops/min.
func (r *run) groupLoadAt(cat *catalog.Catalog, group uint64) uint64 {
	var sum uint64
	cat.Ascend(func(d *catalog.RouteDescriptor) bool {
		if d.GroupID == group {
			sum += r.load[d.ID] * 60_000 / r.stepMs
		}
		return true
	})
	return sum
}
