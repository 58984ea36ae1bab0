package columns

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/detector"
)

// Contribution is one reporter's column of a window.
type Contribution struct {
	Reporter string
	Column   *api.ReportColumn
}

// MergeColumn is the entry the leader commits for one window of valid
// reports (docs/design.md#the-load-pipeline), for tools that replay the load pipeline without a
// cluster (simlab): the same merge, sampling and version gating as
// Aggregator, in one call. The contributions must share one window and step
// and pass validation (Aggregator.Report's checks); rows of routes not in
// cat are dropped. The result does not depend on the contributions' order.
// Under clusterversion.BoundedEvidence it ranks hot rows for evidence by score alone:
// it has no replicated detector state to tell candidates (see
// candidacyOf).
func MergeColumn(contribs []Contribution, cat *catalog.Catalog, dc detector.Config, clusterVersion uint32) *api.ObserveColumn {
	if len(contribs) == 0 {
		return nil
	}
	first := contribs[0].Column
	sum := newColumnSum(first.GetWindowStartMs(), first.GetStepMs())
	for _, c := range contribs {
		sum.add(c.Reporter, c.Column, cat)
	}
	entry, _ := sum.entry(cat, dc, DefaultBelowThresholdRows, clusterVersion, nil)
	return entry
}
