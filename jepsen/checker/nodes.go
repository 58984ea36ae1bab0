package checker

import (
	"fmt"
	"maps"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/model"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// checkNodeHistories replays each node's own catalog history (the deltas
// it streamed) from the log's initial catalog and checks, per version, the
// catalog invariants, that the step is one split or one merge with its
// lineage, and that it equals the log's catalog; then it maps every delta
// to its log entry by commit HLC (a split delta to a SplitRange entry, a
// merge delta to a MergeRange entry naming the removed routes, left
// first) and checks the change rules (each op step at most once, none
// while the switch is off, cooldowns) on what the node actually applied —
// independently of the model's rules.
func checkNodeHistories(nodes []NodeFinal, replay *model.Replay, log []raftlog.Entry) []error {
	var errs []error
	byHLC := map[uint64]raftlog.Entry{}
	for _, e := range log[:replay.Committed] {
		if e.Command.GetSplitRange() != nil || e.Command.GetMergeRange() != nil {
			byHLC[e.Command.GetHlc()] = e
		}
	}
	last := replay.Final().Version
	type stepKey struct {
		op   uint64
		step uint32
	}
	logChildren := map[stepKey][2]model.Route{}
	for _, s := range replay.Splits {
		if s.Auto() {
			logChildren[stepKey{s.OpID, s.Step}] = s.Children
		}
	}
	// The merge delay in force at each version, as the log set it.
	delayAt := map[uint64]uint64{}
	for _, m := range replay.Merges {
		delayAt[m.Version] = m.DelayMs
	}
	for _, n := range nodes {
		cur, ok := replay.CatalogAt(n.WatchFrom)
		if !ok {
			errs = append(errs, fmt.Errorf("node %s: watched from version %d, which the log never reached", n.ID, n.WatchFrom))
			continue
		}
		if n.StartRoutes != nil {
			if h := model.HashAPIRoutes(n.StartRoutes); h != cur.Hash() {
				errs = append(errs, fmt.Errorf("node %s: its catalog at version %d (hash %s) differs from the log's (hash %s)", n.ID, n.WatchFrom, h, cur.Hash()))
				continue
			}
		}
		var (
			splits []model.SplitEvent
			merges []model.MergeEvent
		)
		prevChildren := map[uint64][2]model.Route{} // op -> children of its last step on this node
		for _, d := range n.Deltas {
			e, found := byHLC[d.GetCommitHlc()]
			if d.GetVersion() > last && !found {
				break // made by an entry beyond the checked prefix of the log
			}
			next, err := model.ApplyDelta(cur, d)
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", n.ID, err))
				break
			}
			if d.GetVersion() != cur.Version+1 {
				errs = append(errs, fmt.Errorf("node %s: delta to version %d follows version %d", n.ID, d.GetVersion(), cur.Version))
			}
			if err := next.Check(); err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", n.ID, err))
			}
			if err := model.CheckTransition(cur, next); err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", n.ID, err))
			}
			if !found {
				errs = append(errs, fmt.Errorf("node %s: version %d has commit HLC %d, which no committed SplitRange or MergeRange entry carries", n.ID, d.GetVersion(), d.GetCommitHlc()))
				break
			}
			want, ok := replay.CatalogAt(d.GetVersion())
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("node %s: made version %d from the committed entry at index %d, but the log's rules make no version %d (its catalog ends at version %d)",
					n.ID, d.GetVersion(), e.Index, d.GetVersion(), last))
			case next.Hash() != want.Hash():
				errs = append(errs, fmt.Errorf("node %s: catalog at version %d (hash %s) differs from the log's (hash %s)",
					n.ID, d.GetVersion(), next.Hash(), want.Hash()))
			}
			if !ok || next.Hash() != want.Hash() {
				break
			}
			if mr := e.Command.GetMergeRange(); mr != nil {
				ev, err := mergeFromDelta(cur, d, e, mr)
				if err != nil {
					errs = append(errs, fmt.Errorf("node %s: %w", n.ID, err))
					break
				}
				ev.DelayMs = replay.MergeDelayMs
				if delay, ok := delayAt[ev.Version]; ok {
					ev.DelayMs = delay
				}
				merges = append(merges, ev)
				cur = next
				continue
			}
			if len(d.GetRemovedRouteIds()) != 1 || len(d.GetAdded()) != 2 {
				errs = append(errs, fmt.Errorf("node %s: version %d comes from the SplitRange entry at index %d, but its delta removes %d routes and adds %d",
					n.ID, d.GetVersion(), e.Index, len(d.GetRemovedRouteIds()), len(d.GetAdded())))
				break
			}
			s := e.Command.GetSplitRange()
			ev := model.SplitEvent{Version: d.GetVersion(), Index: e.Index, Term: e.Term, HLC: d.GetCommitHlc(), OpID: s.GetOpId(), Step: s.GetStep(),
				CooldownMs: replay.CooldownMs, RequestID: e.Command.GetRequestId()}
			ev.Parent, _ = cur.Route(d.GetRemovedRouteIds()[0])
			ev.Children = [2]model.Route{model.FromAPI(d.GetAdded()[0]), model.FromAPI(d.GetAdded()[1])}
			if ev.Auto() && ev.Step > 1 {
				// The middle child is the child of this op's previous step:
				// as this node applied it, or (before WatchFrom) as the log did.
				pc, seen := prevChildren[ev.OpID]
				if !seen {
					pc = logChildren[stepKey{ev.OpID, ev.Step - 1}]
				}
				ev.Middle = pc[0].ID == ev.Parent.ID || pc[1].ID == ev.Parent.ID
			}
			if ev.Auto() {
				prevChildren[ev.OpID] = ev.Children
			}
			splits = append(splits, ev)
			cur = next
		}
		for _, err := range model.CheckChanges(splits, merges, replay.EnabledBefore) {
			errs = append(errs, fmt.Errorf("node %s: %w", n.ID, err))
		}
	}
	return errs
}

// mergeFromDelta reads a merge as a node streamed it: the delta removes
// the two routes the MergeRange entry names, left first, and adds the one
// merged route.
func mergeFromDelta(cur *model.Catalog, d *api.CatalogDelta, e raftlog.Entry, mr *api.MergeRange) (model.MergeEvent, error) {
	rm := d.GetRemovedRouteIds()
	if len(rm) != 2 || rm[0] != mr.GetLeftRouteId() || rm[1] != mr.GetRightRouteId() || len(d.GetAdded()) != 1 {
		return model.MergeEvent{}, fmt.Errorf("version %d comes from the MergeRange entry at index %d (r%d and r%d), but its delta removes %v and adds %d routes",
			d.GetVersion(), e.Index, mr.GetLeftRouteId(), mr.GetRightRouteId(), rm, len(d.GetAdded()))
	}
	ev := model.MergeEvent{Version: d.GetVersion(), Index: e.Index, Term: e.Term, HLC: d.GetCommitHlc(), Merged: model.FromAPI(d.GetAdded()[0]),
		RequestID: e.Command.GetRequestId(), OpID: mr.GetOpId()}
	ev.Left, _ = cur.Route(rm[0])
	ev.Right, _ = cur.Route(rm[1])
	return ev, nil
}

// checkStateHashes: at every applied index sampled on more than one node
// the state hashes agree, and at least one index was sampled on every node
// (so "all nodes end with the same state hash" was actually observed).
func checkStateHashes(nodes []NodeFinal) []error {
	if len(nodes) == 0 {
		return []error{fmt.Errorf("no node reported its state")}
	}
	var errs []error
	seen := map[uint64]map[string]string{} // index -> node -> hash
	for _, n := range nodes {
		for idx, h := range n.Hashes {
			if seen[idx] == nil {
				seen[idx] = map[string]string{}
			}
			seen[idx][n.ID] = h
		}
	}
	common := uint64(0)
	for _, idx := range slices.Sorted(maps.Keys(seen)) {
		byNode := seen[idx]
		var ref, refNode string
		for _, id := range slices.Sorted(maps.Keys(byNode)) {
			if refNode == "" {
				ref, refNode = byNode[id], id
				continue
			}
			if byNode[id] != ref {
				errs = append(errs, fmt.Errorf("state hash at applied index %d: node %s has %s, node %s has %s", idx, refNode, ref, id, byNode[id]))
			}
		}
		if len(byNode) == len(nodes) {
			common = idx
		}
	}
	if common == 0 {
		errs = append(errs, fmt.Errorf("no applied index was sampled on all %d nodes: their final states could not be compared", len(nodes)))
	}
	return errs
}
