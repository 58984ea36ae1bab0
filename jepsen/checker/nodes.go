package checker

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hotsplit/hotsplit/jepsen/model"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// checkNodeHistories replays each node's own catalog history (the deltas
// it streamed) from the log's initial catalog and checks, per version, the
// catalog invariants and that it equals the log's catalog; then it maps
// every delta to its log entry by commit HLC and checks the split rules
// (each op step at most once, none while the switch is off, cooldowns) on
// what the node actually applied — independently of the model's rules.
func checkNodeHistories(nodes []NodeFinal, replay *model.Replay, log []raftlog.Entry) []error {
	var errs []error
	byHLC := map[uint64]raftlog.Entry{}
	for _, e := range log[:replay.Committed] {
		if s := e.Command.GetSplitRange(); s != nil {
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
		var splits []model.SplitEvent
		prevChildren := map[uint64][2]model.Route{} // op -> children of its last step on this node
		for _, d := range n.Deltas {
			if d.GetVersion() > last {
				break // beyond the checked prefix of the log
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
			want, _ := replay.CatalogAt(d.GetVersion())
			if next.Hash() != want.Hash() {
				errs = append(errs, fmt.Errorf("node %s: catalog at version %d (hash %s) differs from the log's (hash %s)",
					n.ID, d.GetVersion(), next.Hash(), want.Hash()))
				break
			}
			e, found := byHLC[d.GetCommitHlc()]
			if !found {
				errs = append(errs, fmt.Errorf("node %s: version %d has commit HLC %d, which no committed SplitRange entry carries", n.ID, d.GetVersion(), d.GetCommitHlc()))
				break
			}
			s := e.Command.GetSplitRange()
			ev := model.SplitEvent{Version: d.GetVersion(), Index: e.Index, Term: e.Term, HLC: d.GetCommitHlc(), OpID: s.GetOpId(), Step: s.GetStep(),
				CooldownMs: replay.CooldownMs, RequestID: e.Command.GetRequestId()}
			if len(d.GetRemovedRouteIds()) == 1 {
				ev.Parent, _ = cur.Route(d.GetRemovedRouteIds()[0])
			}
			if len(d.GetAdded()) == 2 {
				ev.Children = [2]model.Route{model.FromAPI(d.GetAdded()[0]), model.FromAPI(d.GetAdded()[1])}
			}
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
		for _, err := range model.CheckSplits(splits, replay.EnabledBefore) {
			errs = append(errs, fmt.Errorf("node %s: %w", n.ID, err))
		}
	}
	return errs
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
