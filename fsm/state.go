package fsm

import (
	"crypto/sha256"
	"fmt"
	"sort"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/heatmap"
	"google.golang.org/protobuf/proto"
)

// State is one immutable version of the replicated state, published after
// every entry the FSM sees. Readers get it lock-free through FSM.State and
// may keep it as long as they like; Apply never modifies a published State
// (it builds the next one, sharing what did not change). Messages and
// slices returned by the accessors are shared too: callers must not modify
// them.
//
// Before Bootstrap applies, Catalog, History, Config, Switch and Detector
// are nil and Bootstrapped is false.
type State struct {
	index          uint64
	bootstrapped   bool
	clusterID      string
	clusterVersion uint32
	cat            *catalog.Catalog
	hist           *catalog.History
	cfg            *api.Config
	detCfg         detector.Config
	sw             *api.AutoSplitSwitch
	ceilingMs      uint64
	lastHLC        uint64
	members        []*api.Member    // sorted by node id
	admissions     []*api.Admission // sorted by node id; cluster version 2
	det            *detector.State
	// ops holds the live ops and the most recent finished ones, by id.
	ops             []*api.Op
	nextOpID        uint64
	decisions       []*api.Decision // oldest first, bounded
	nextDecisionSeq uint64
	lastColumnAtMs  uint64
	reporters       []string
	fenceViolations uint64
	requests        *requestTable
	nextRequestSeq  uint64
	// previousClusterIDs: see Reseed (cluster version 2).
	previousClusterIDs []string
	// heat is the key visualizer's history (HeatHistory); nil below
	// cluster version 3 and until its first column or mark.
	heat *heatmap.History
	// groups are the shard groups by id (ShardGroups; empty below cluster
	// version 4); nextGroupID the id the next AddGroup gets.
	groups      []*api.ShardGroup
	nextGroupID uint64
	// placement is automatic placement's state (RangeMoves, while
	// cross_group is on; nil otherwise).
	placement *api.PlacementState
}

// emptyState is the state before any entry: not bootstrapped, every id
// counter at 1 so that the first op, decision and request get id 1.
func emptyState() *State {
	return &State{nextOpID: 1, nextDecisionSeq: 1, nextRequestSeq: 1, requests: newRequestTable()}
}

// Index is the raft index of the last entry the FSM saw (command or
// configuration), or the index of the restored snapshot.
func (s *State) Index() uint64 { return s.index }

// Bootstrapped reports whether a Bootstrap command has applied.
func (s *State) Bootstrapped() bool { return s.bootstrapped }

// ClusterID is the id written at bootstrap.
func (s *State) ClusterID() string { return s.clusterID }

// ClusterVersion gates new commands and fields (docs/design.md#cluster-versions-and-features).
func (s *State) ClusterVersion() uint32 { return s.clusterVersion }

// Catalog is the live route catalog (nil before bootstrap).
func (s *State) Catalog() *catalog.Catalog { return s.cat }

// History holds the recent catalog deltas for watchers. It is local, not
// replicated: after a restore it starts at the restored catalog version.
func (s *State) History() *catalog.History { return s.hist }

// HeatHistory is the key visualizer's replicated heat history: nil below
// cluster version 3 (HeatHistory) and until the first column with
// route_loads or the first split or merge at 3.
func (s *State) HeatHistory() *heatmap.History { return s.heat }

// Config is the replicated detector and load configuration.
func (s *State) Config() *api.Config { return s.cfg }

// DetectorConfig is Config in the detector's terms.
func (s *State) DetectorConfig() detector.Config { return s.detCfg }

// Switch is the auto-split kill switch.
func (s *State) Switch() *api.AutoSplitSwitch { return s.sw }

// CeilingMs is the replicated timestamp fence (docs/design.md#hlc-and-the-fence).
func (s *State) CeilingMs() uint64 { return s.ceilingMs }

// LastHLC is the highest entry HLC applied so far.
func (s *State) LastHLC() uint64 { return s.lastHLC }

// Members are the cluster members, sorted by node id.
func (s *State) Members() []*api.Member { return s.members }

// Member returns the member with the given node id.
func (s *State) Member(nodeID string) (*api.Member, bool) {
	i, ok := findMember(s.members, nodeID)
	if !ok {
		return nil, false
	}
	return s.members[i], true
}

// Admission returns the admission of a node that has not joined yet.
func (s *State) Admission(nodeID string) (*api.Admission, bool) {
	i, ok := findAdmission(s.admissions, nodeID)
	if !ok {
		return nil, false
	}
	return s.admissions[i], true
}

// Admissions are the admitted nodes that have not joined yet, by node id.
func (s *State) Admissions() []*api.Admission { return s.admissions }

// Detector is the detector's replicated state (nil before bootstrap).
func (s *State) Detector() *detector.State { return s.det }

// Ops are the kept ops by id: every live op and the most recent finished
// ones.
func (s *State) Ops() []*api.Op { return s.ops }

// LiveOps are the PENDING, RUNNING and PAUSED ops, oldest (lowest id)
// first.
func (s *State) LiveOps() []*api.Op {
	var live []*api.Op
	for _, op := range s.ops {
		if isLive(op) {
			live = append(live, op)
		}
	}
	return live
}

// Op returns the kept op with the given id.
func (s *State) Op(id uint64) (*api.Op, bool) {
	i, ok := findOp(s.ops, id)
	if !ok {
		return nil, false
	}
	return s.ops[i], true
}

// Decisions is the ring of recent decisions, oldest first.
func (s *State) Decisions() []*api.Decision { return s.decisions }

// LastColumnAtMs is the window end of the last committed column.
func (s *State) LastColumnAtMs() uint64 { return s.lastColumnAtMs }

// LastColumnReporters are the reporters that contributed to the last
// committed column, sorted.
func (s *State) LastColumnReporters() []string { return s.reporters }

// FenceViolations counts catalog changes (SplitRange, MergeRange entries)
// refused because their commit HLC did not move forward.
func (s *State) FenceViolations() uint64 { return s.fenceViolations }

// RequestResult returns the stored first answer of a client request id.
func (s *State) RequestResult(requestID string) (*api.CommandResult, bool) {
	r, ok := s.requests.get(requestID)
	if !ok {
		return nil, false
	}
	return r.GetResult(), true
}

// Proto returns the whole replicated state in its canonical form: every
// list in a deterministic order, no maps. It excludes the applied index and
// the catalog History (local). The returned message shares its parts with
// the State: do not modify it.
func (s *State) Proto() *api.StateSnapshot {
	p := s.coreProto()
	if s.cat != nil {
		p.Catalog = s.cat.ToProto()
	}
	if s.det != nil {
		p.Tracked = trackedToProto(s.det.Tracked())
	}
	p.Requests = s.requests.records()
	if s.heat != nil {
		p.HeatHistory = s.heat.ToProto()
	}
	return p
}

// coreProto is Proto without the lists that can grow large: catalog
// routes, tracked routes, request records and the heat history (the
// catalog keeps its version and next id). Snapshots write it first and
// those lists in pages.
func (s *State) coreProto() *api.StateSnapshot {
	p := &api.StateSnapshot{
		FormatVersion:       snapshotFormatVersion,
		ClusterId:           s.clusterID,
		ClusterVersion:      s.clusterVersion,
		Config:              s.cfg,
		Switch:              s.sw,
		CeilingMs:           s.ceilingMs,
		LastHlc:             s.lastHLC,
		Members:             s.members,
		Admissions:          s.admissions,
		LastColumnAtMs:      s.lastColumnAtMs,
		LastColumnReporters: s.reporters,
		Ops:                 s.ops,
		NextOpId:            s.nextOpID,
		Decisions:           s.decisions,
		NextDecisionSeq:     s.nextDecisionSeq,
		NextRequestSeq:      s.nextRequestSeq,
		FenceViolations:     s.fenceViolations,
		PreviousClusterIds:  s.previousClusterIDs,
		Groups:              s.groups,
		NextGroupId:         s.nextGroupID,
		Placement:           s.placement,
	}
	if s.cat != nil {
		p.Catalog = &api.CatalogSnapshot{Version: s.cat.Version(), NextRouteId: s.cat.NextRouteID()}
	}
	if s.det != nil {
		// Compact (a few bytes per route with recent load), so it rides in
		// the core frame.
		p.Cold = coldToProto(s.det.Cold())
	}
	return p
}

// Hash is the sha256 of the deterministic protobuf encoding of Proto():
// replicas that applied the same entries have the same hash.
func (s *State) Hash() [32]byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s.Proto())
	if err != nil {
		// A well-formed in-memory message always marshals.
		panic(fmt.Sprintf("fsm: marshal state: %v", err))
	}
	return sha256.Sum256(b)
}

func findMember(ms []*api.Member, nodeID string) (int, bool) {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].GetNodeId() >= nodeID })
	return i, i < len(ms) && ms[i].GetNodeId() == nodeID
}

func findAdmission(as []*api.Admission, nodeID string) (int, bool) {
	i := sort.Search(len(as), func(i int) bool { return as[i].GetNodeId() >= nodeID })
	return i, i < len(as) && as[i].GetNodeId() == nodeID
}

func findOp(ops []*api.Op, id uint64) (int, bool) {
	i := sort.Search(len(ops), func(i int) bool { return ops[i].GetOpId() >= id })
	return i, i < len(ops) && ops[i].GetOpId() == id
}

func isLive(op *api.Op) bool {
	switch op.GetState() {
	case api.OpState_OP_STATE_PENDING, api.OpState_OP_STATE_RUNNING, api.OpState_OP_STATE_PAUSED:
		return true
	}
	return false
}
