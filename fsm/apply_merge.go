package fsm

import (
	"errors"
	"fmt"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/hlc"
)

// applyMergeRange joins two adjacent routes (docs/design.md#merges, feature
// ManualMerge). A manual merge has op_id 0; with an op_id it is the step
// of an automatic merge op (AutoMerge, applyMergeOpStep).
//
// The checks of a manual merge run in this order, each refusal changing
// nothing but last_hlc (and, for the fence, the violation counter): the
// feature, a step without an op, the fence, the expected version, the
// catalog's own (same route, unknown route, not adjacent, different group,
// not ACTIVE), and last a route that a live op will still change (a split
// op's next target, either route of a merge op).
func (a *applier) applyMergeRange(c *api.MergeRange) *api.CommandResult {
	if err := a.s.Require(clusterversion.ManualMerge); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "merge_range: %v", err)
	}
	if c.GetOpId() != 0 {
		return a.applyMergeOpStep(c)
	}
	return a.applyManualMerge(c)
}

func (a *applier) applyManualMerge(c *api.MergeRange) *api.CommandResult {
	left, right := c.GetLeftRouteId(), c.GetRightRouteId()
	if c.GetStep() != 0 {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: %d given without op_id (manual merges have no step)", c.GetStep())
	}
	if r := a.fence(kindMergeRange, "route_id", left, "right_route_id", right, "op_id", c.GetOpId()); r != nil {
		return r
	}
	var (
		next   *catalog.Catalog
		merged *catalog.RouteDescriptor
		err    error
	)
	if c.ExpectedVersion != nil && !skipMergeCAS() {
		next, merged, err = a.s.cat.MergeCAS(c.GetExpectedVersion(), left, right, a.cmd.GetHlc())
	} else {
		next, merged, err = a.s.cat.Merge(left, right, a.cmd.GetHlc())
	}
	if err != nil {
		return fail(mergeErrorCode(err), "%v", err)
	}
	if r := a.refuseLiveOpRoute(left, right); r != nil {
		return r
	}
	boundary := a.commitMerge(left, right, next, merged)
	a.markMerge(left, boundary, api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_MANUAL)
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_MANUAL_MERGE, RouteId: left, SplitKeys: [][]byte{boundary},
		Actor: c.GetActor(), Note: a.s.KeptNote(c.GetNote()),
		Detail: fmt.Sprintf("merged r%d and r%d into r%d", left, right, merged.ID)})
	a.f.m.merge(mergeOriginManual)
	a.f.log.Info("fsm: manual merge", "route_id", left, "right_route_id", right, "merged_route_id", merged.ID,
		"catalog_version", next.Version(), "commit_hlc", a.cmd.GetHlc(), "actor", c.GetActor())
	return mergeResult(next, merged, a.cmd.GetHlc(), 0)
}

// refuseLiveOpRoute refuses a merge of a route that a live op (pending,
// running or paused) will still change — the route a split op splits next,
// either route of a merge op: the op's step would abort, and the operator
// who merges should decide that by aborting the op first.
func (a *applier) refuseLiveOpRoute(ids ...uint64) *api.CommandResult {
	for _, op := range a.s.ops {
		if !isLive(op) {
			continue
		}
		for _, id := range ids {
			if slices.Contains(opRoutes(op), id) {
				return fail(api.ResultCode_RESULT_CODE_ROUTE_IN_LIVE_OP, "route %d belongs to live op %d (%s): abort the op first",
					id, op.GetOpId(), EnumName(op.GetState()))
			}
		}
	}
	return nil
}

// commitMerge installs a merge: catalog, watcher history, the detector's
// tracked state (both parents dropped, the merged route in the split
// cooldown from the merge). It returns the boundary that went.
func (a *applier) commitMerge(leftID, rightID uint64, next *catalog.Catalog, merged *catalog.RouteDescriptor) []byte {
	commit := a.cmd.GetHlc()
	left, _ := a.s.cat.Route(leftID)
	a.s.cat = next
	a.s.hist = a.s.hist.Append(catalog.MergeDelta(next.Version(), leftID, rightID, merged, commit))
	a.s.det = a.s.det.OnMerge(a.s.detCfg, leftID, rightID, merged.ID, hlc.Physical(commit))
	return left.End
}

// mergeErrorCode maps the catalog's merge errors to result codes: each
// refusal reason its own code.
func mergeErrorCode(err error) api.ResultCode {
	switch {
	case errors.Is(err, catalog.ErrVersionMismatch):
		return api.ResultCode_RESULT_CODE_VERSION_MISMATCH
	case errors.Is(err, catalog.ErrRouteNotFound):
		return api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND
	case errors.Is(err, catalog.ErrMergeNotAdjacent):
		return api.ResultCode_RESULT_CODE_ROUTES_NOT_ADJACENT
	case errors.Is(err, catalog.ErrMergeDifferentGroup):
		return api.ResultCode_RESULT_CODE_ROUTES_IN_DIFFERENT_GROUPS
	case errors.Is(err, catalog.ErrRouteNotActive):
		return api.ResultCode_RESULT_CODE_MERGE_ROUTE_NOT_ACTIVE
	}
	// ErrMergeSameRoute, and anything unforeseen.
	return api.ResultCode_RESULT_CODE_INVALID_ARGUMENT
}

// mergeResult answers a merge: the merged route as the one route made.
func mergeResult(cat *catalog.Catalog, merged *catalog.RouteDescriptor, commitHLC, opID uint64) *api.CommandResult {
	return &api.CommandResult{
		CatalogVersion: cat.Version(),
		Children:       []*api.RouteDescriptor{merged.ToProto()},
		CommitHlc:      commitHLC,
		OpId:           opID,
	}
}
