package model

import (
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// The model's own restatement of the rows of fsm/versions.go it needs
// (docs/design.md#cluster-versions-and-features): the cluster version that
// turns each replicated rule on. The model shares no code with fsm, so it keeps
// this table itself; as in the FSM, this file is the only one of the model that
// compares cluster versions.
type feature struct {
	name string
	from uint32
}

// The features the model follows.
var (
	// manualMerge: MergeRange with op_id 0 (feature manual_merge).
	manualMerge = feature{name: "manual_merge", from: 3}
	// autoMerge: merge ops, one MergeRange step each, and the merge
	// settings of the config (feature auto_merge).
	autoMerge = feature{name: "auto_merge", from: 3}
	// requestBinding: a request id is bound to its request; a reuse with
	// another request is refused (feature request_fingerprints).
	requestBinding = feature{name: "request_fingerprints", from: 3}
	// operatorBoundaries: a bootstrap split key or a manual split's key
	// marks the route it starts; an automatic merge never removes a marked
	// start; the raise marks every boundary the catalog has (feature
	// operator_boundaries_kept).
	operatorBoundaries = feature{name: "operator_boundaries_kept", from: 3}
)

// reaches reports whether cluster version v is at least need (a command's
// min_version, or a feature's).
func reaches(v, need uint32) bool { return v >= need }

// has reports whether the replayed cluster version turns f on.
func (p *replayer) has(f feature) bool { return reaches(p.clusterVer, f.from) }

// setMember upserts a member record and raises the cluster version to the
// lowest version every member supports (never down).
func (p *replayer) setMember(c *api.SetMember) Outcome {
	m := c.GetMember()
	if m == nil || m.GetNodeId() == "" || m.GetSupportedVersion() == 0 {
		return Outcome{Code: InvalidArgument}
	}
	p.members[m.GetNodeId()] = m.GetSupportedVersion()
	p.raiseVersion()
	return Outcome{Code: OK}
}

// removeMember deletes a member record; the cluster version may rise (the
// member that held it back is gone) but never falls. Admissions are not
// modelled, so an id that is no member answers OK here whether the FSM
// dropped an admission or said MEMBER_NOT_FOUND: no check reads that code,
// and neither changes what the model follows.
func (p *replayer) removeMember(c *api.RemoveMember) Outcome {
	if c.GetNodeId() == "" {
		return Outcome{Code: InvalidArgument}
	}
	if _, ok := p.members[c.GetNodeId()]; !ok {
		return Outcome{Code: OK}
	}
	delete(p.members, c.GetNodeId())
	p.raiseVersion()
	return Outcome{Code: OK}
}

func (p *replayer) raiseVersion() {
	lowest := uint32(0)
	for _, v := range p.members {
		if lowest == 0 || v < lowest {
			lowest = v
		}
	}
	from := p.clusterVer
	p.clusterVer = max(p.clusterVer, lowest)
	if !reaches(from, operatorBoundaries.from) && p.has(operatorBoundaries) && p.bootstrapped {
		p.markAllStarts()
	}
}

// markAllStarts is the raise hook of operatorBoundaries: every boundary
// gets the operator mark, at the same catalog version (the FSM does not
// move it: the layout is the same). The
// model replaces its catalog of that version, so a read of that version
// served before the raise would not match it; jepsen clusters bootstrap
// at the version they run, so no run crosses this, and the note says so
// if one ever does.
func (p *replayer) markAllStarts() {
	next, n := p.cat.MarkAllStarts()
	p.cat = next
	p.r.Catalogs[len(p.r.Catalogs)-1] = next
	p.r.Notes = append(p.r.Notes, fmt.Sprintf("cluster version raised to %d at catalog version %d: %d routes' starts marked as an operator's (same catalog version)",
		p.clusterVer, next.Version, n))
}
