package model

import (
	"fmt"
	"maps"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// stepRef is one op-step entry (a SplitRange or MergeRange with an op id).
type stepRef struct {
	index uint64
	op    uint64
}

// stepsNaming indexes the op-step entries of a committed log by the routes
// they name (a split step's route, a merge step's two).
func stepsNaming(entries []raftlog.Entry) map[uint64][]stepRef {
	m := map[uint64][]stepRef{}
	for _, e := range entries {
		if e.Command == nil {
			continue
		}
		if s := e.Command.GetSplitRange(); s != nil && s.GetOpId() != 0 {
			m[s.GetRouteId()] = append(m[s.GetRouteId()], stepRef{e.Index, s.GetOpId()})
		}
		if mr := e.Command.GetMergeRange(); mr != nil && mr.GetOpId() != 0 {
			for _, id := range []uint64{mr.GetLeftRouteId(), mr.GetRightRouteId()} {
				m[id] = append(m[id], stepRef{e.Index, mr.GetOpId()})
			}
		}
	}
	return m
}

// mergeRange follows the FSM's order for a MergeRange entry: the feature,
// an op step (mergeOpStep), a step without an op, the fence, the expected
// version, the catalog's own checks, and last a route that a live op will
// still change.
func (p *replayer) mergeRange(e raftlog.Entry, cmd *api.Command, m *api.MergeRange, prevHLC, now uint64) (Outcome, error) {
	if !p.has(manualMerge) {
		return Outcome{Code: InvalidArgument}, nil
	}
	if m.GetOpId() != 0 {
		return p.mergeOpStep(e, cmd, m, prevHLC, now)
	}
	return p.manualMerge(e, cmd, m, prevHLC), nil
}

func (p *replayer) manualMerge(e raftlog.Entry, cmd *api.Command, m *api.MergeRange, prevHLC uint64) Outcome {
	if m.GetStep() != 0 {
		return Outcome{Code: InvalidArgument}
	}
	if !p.fence(e, cmd, prevHLC) {
		return Outcome{Code: FenceViolation}
	}
	if m.ExpectedVersion != nil && m.GetExpectedVersion() != p.cat.Version {
		return Outcome{Code: VersionMismatch}
	}
	left, right := m.GetLeftRouteId(), m.GetRightRouteId()
	if _, _, code := p.cat.Merge(left, right, cmd.GetHlc()); code != OK {
		return Outcome{Code: code}
	}
	if why := p.liveOpOn(e.Index, left, right); why != "" {
		p.r.Notes = append(p.r.Notes, fmt.Sprintf("index %d: merge of r%d and r%d refused as route_in_live_op: %s", e.Index, left, right, why))
		return Outcome{Code: RouteInLiveOp}
	}
	return p.merge(e, cmd, left, right, func(ev *MergeEvent) { ev.RequestID = cmd.GetRequestId() })
}

// mergeOpStep follows the FSM's order for the one step of a merge op
// (feature auto_merge): not a merge op; step 0; a duplicate (a step below
// the next one answers its first result); a step from the future; a
// finished or aborted op; routes other than the op's (the first entry
// proposing the step fixes them, as for split ops); an expected version
// (op steps carry none); the switch off (the op pauses); the fence; either
// route gone or not ACTIVE (the op aborts); the merge.
func (p *replayer) mergeOpStep(e raftlog.Entry, cmd *api.Command, m *api.MergeRange, prevHLC, now uint64) (Outcome, error) {
	if !p.has(autoMerge) {
		return Outcome{Code: InvalidArgument}, nil
	}
	op, err := p.opOf(m.GetOpId(), true, now)
	if err != nil {
		return Outcome{}, err
	}
	step := m.GetStep()
	switch {
	case !op.merge, step == 0:
		return Outcome{Code: InvalidArgument}, nil
	case step < op.next:
		first := op.results[step-1]
		first.Duplicate = true
		return first, nil
	case step > op.next:
		return Outcome{Code: InvalidArgument}, nil
	}
	if op.ambiguous != "" {
		return Outcome{}, fmt.Errorf("op %d first seen after %s: the model cannot tell whether it was aborted as stale "+
			"(keep the op TTL above every disable in jepsen scenarios)", op.id, op.ambiguous)
	}
	switch op.state {
	case opDone:
		return Outcome{Code: OpFinished}, nil
	case opAborted:
		return Outcome{Code: OpAborted}, nil
	}
	left, right := m.GetLeftRouteId(), m.GetRightRouteId()
	if !op.planned {
		op.planRoute, op.planRight, op.planned = left, right, true
	} else if left != op.planRoute || right != op.planRight {
		return Outcome{Code: InvalidArgument}, nil
	}
	if m.ExpectedVersion != nil {
		return Outcome{Code: InvalidArgument}, nil
	}
	if !p.enabled {
		op.pause(now)
		return Outcome{Code: OpPaused}, nil
	}
	if !p.fence(e, cmd, prevHLC) {
		return Outcome{Code: FenceViolation}, nil
	}
	// Route ids are never reused and a route never changes shape, so
	// "both live" is the op's planned shape; not ACTIVE aborts as well.
	out := p.merge(e, cmd, left, right, func(ev *MergeEvent) { ev.OpID = op.id })
	if out.Code != OK {
		op.state = opAborted
		return Outcome{Code: OpAborted}, nil
	}
	op.results = append(op.results, out)
	op.next++
	op.state, op.planned = opDone, false
	return out, nil
}

// merge applies a merge the checks allowed and records it.
func (p *replayer) merge(e raftlog.Entry, cmd *api.Command, leftID, rightID uint64, fill func(*MergeEvent)) Outcome {
	left, _ := p.cat.Route(leftID)
	right, _ := p.cat.Route(rightID)
	next, merged, code := p.cat.Merge(leftID, rightID, cmd.GetHlc())
	if code != OK {
		return Outcome{Code: code}
	}
	p.cat = next
	p.r.Catalogs = append(p.r.Catalogs, next)
	ev := MergeEvent{Version: next.Version, Index: e.Index, Term: e.Term, HLC: cmd.GetHlc(), Left: left, Right: right, Merged: merged,
		DelayMs: p.mergeDelayMs}
	fill(&ev)
	p.r.Merges = append(p.r.Merges, ev)
	return Outcome{Code: OK, Version: next.Version, Merged: merged, HLC: cmd.GetHlc()}
}

// liveOpOn says why a live op will still change one of ids at log index
// idx, or "" when none does. The FSM knows its ops from the detector's
// plans, made inside ObserveColumn, which the model cannot replay; it
// knows them only from their step entries. So it decides in two ways:
//   - an op whose next step an earlier entry proposed (still pending or
//     paused) names the route: it is live;
//   - an op-step entry anywhere later in the committed log names the route
//     (of an op not known to be aborted by then): the route was still live
//     when that op was planned. An op planned before idx is then live at
//     idx and targets it; one planned after idx found the route still
//     live, so the merge at idx did not apply. Either way the FSM refuses
//     the merge as route_in_live_op — the catalog checks passed already.
//
// The second rule errs only for an op planned before idx that never
// proposes a step naming the route in the committed log (aborted by an
// AbortOp without a step — which the model sees as an AbortOp of an op it
// never saw — or planned in the last moments of the log). Jepsen
// workloads send no AbortOp and finish a run only after healing, when
// pending steps have been proposed.
func (p *replayer) liveOpOn(idx uint64, ids ...uint64) string {
	for _, id := range slices.Sorted(maps.Keys(p.ops)) {
		op := p.ops[id]
		if op.state == opAborted || !op.planned {
			continue
		}
		for _, r := range ids {
			if op.planRoute == r || (op.planRight != 0 && op.planRight == r) {
				return fmt.Sprintf("op %d's next step names r%d", op.id, r)
			}
		}
	}
	for _, r := range ids {
		for _, ref := range p.stepsNaming[r] {
			if ref.index <= idx || p.aborted[ref.op] {
				continue
			}
			if op := p.ops[ref.op]; op != nil && op.state == opAborted {
				continue
			}
			return fmt.Sprintf("op %d's step entry at index %d names r%d", ref.op, ref.index, r)
		}
	}
	return ""
}
