package fsm

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/hlc"
)

// maxPreviousClusterIDs bounds the recorded ids of a cluster restored or
// recovered again and again; the oldest are dropped beyond it.
const maxPreviousClusterIDs = 16

// ErrReseed: a state that cannot seed a new cluster.
var ErrReseed = errors.New("cannot seed a new cluster from this state")

// Reseed returns the replicated state a cluster restored from a backup, or
// recovered from one survivor with --forceNewCluster, starts from: s with a
// new identity and an honest clock. It is written into the seeding node's
// snapshot store before raft starts, never applied as a log entry, so every
// later member receives it as it is.
//
//   - cluster id: clusterID, the old one appended to previous_cluster_ids
//     (cluster version 2): watchers see the change and resync;
//   - members: only self (the dead ones would block cluster-version raises
//     and poison leader hints); admissions are dropped. The cluster version
//     is then at least self's, as SetMember would raise it, with the raise
//     hooks of every version crossed;
//   - ceiling: ceilingMs, the HLC start the caller computed from the
//     restored ceiling, its wall clock and the allowed clock offset; the
//     first leader observes it before issuing anything.
//
// Everything else — catalog, config, switch, detector state, ops, decisions,
// request answers — is the backup's.
func Reseed(s *State, clusterID string, self *api.Member, ceilingMs uint64) (*api.StateSnapshot, error) {
	switch {
	case !s.Bootstrapped():
		return nil, fmt.Errorf("%w: it is not bootstrapped", ErrReseed)
	case clusterID == "" || clusterID == s.ClusterID():
		return nil, fmt.Errorf("%w: the new cluster id %q must differ from %q", ErrReseed, clusterID, s.ClusterID())
	case !clusterversion.PreviousClusterIDs.EnabledAt(self.GetSupportedVersion()):
		return nil, fmt.Errorf("%w: the seeding node supports cluster version %d, recording the old cluster id needs %d", ErrReseed, self.GetSupportedVersion(), clusterversion.PreviousClusterIDs.Version())
	}
	p, err := raiseSeed(s.Proto(), min(self.GetSupportedVersion(), clusterversion.Supported))
	if err != nil {
		return nil, err
	}
	p.PreviousClusterIds = append(slices.Clone(p.GetPreviousClusterIds()), p.GetClusterId())
	if n := len(p.PreviousClusterIds); n > maxPreviousClusterIDs {
		p.PreviousClusterIds = p.PreviousClusterIds[n-maxPreviousClusterIDs:]
	}
	p.ClusterId = clusterID
	p.Members = []*api.Member{proto.CloneOf(self)}
	p.Admissions = nil
	p.CeilingMs = max(p.GetCeilingMs(), ceilingMs)
	return p, nil
}

// raiseSeed raises a seed's cluster version to v as SetMember would, with
// the raise hooks of every crossed version, so a backup of an older cluster
// restored by a newer build starts with that version's settings, like a
// cluster upgraded in place.
func raiseSeed(p *api.StateSnapshot, v uint32) (*api.StateSnapshot, error) {
	if clusterversion.Reaches(p.GetClusterVersion(), v) {
		return p, nil
	}
	s, err := stateFromProto(p, snapshotLimits{requests: DefaultRequestTableSize, decisions: DefaultDecisionRingSize, finishedOps: DefaultFinishedOps})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReseed, err)
	}
	f := New(Options{Logger: slog.New(slog.DiscardHandler)})
	a := &applier{f: f, s: s, nowHLC: s.lastHLC, now: hlc.Physical(s.lastHLC)}
	a.raiseVersion(raiseHooks(), v)
	return s.Proto(), nil
}

// checkPreviousClusterIDs: recorded only with PreviousClusterIDs on,
// non-empty, distinct, never the current id, bounded.
func checkPreviousClusterIDs(p *api.StateSnapshot) error {
	ids := p.GetPreviousClusterIds()
	if len(ids) == 0 {
		return nil
	}
	switch {
	case !clusterversion.PreviousClusterIDs.EnabledAt(p.GetClusterVersion()):
		return fmt.Errorf("previous_cluster_ids at cluster version %d (needs %d)", p.GetClusterVersion(), clusterversion.PreviousClusterIDs.Version())
	case len(ids) > maxPreviousClusterIDs:
		return fmt.Errorf("%d previous_cluster_ids, at most %d", len(ids), maxPreviousClusterIDs)
	}
	for i, id := range ids {
		if id == "" || id == p.GetClusterId() || slices.Contains(ids[:i], id) {
			return fmt.Errorf("previous_cluster_ids[%d] %q: empty, repeated or the current id", i, id)
		}
	}
	return nil
}

// PreviousClusterIDs are the ids this cluster had before it was restored
// or recovered, oldest first.
func (s *State) PreviousClusterIDs() []string { return s.previousClusterIDs }
