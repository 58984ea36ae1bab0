package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Why a member record in the data dir: after a restart the FSM holds only
// what the newest snapshot holds (nothing, on a young cluster) until a
// leader commits an entry, because raft applies its log only once it
// learns the commit index. The health monitor probes the members of the
// FSM's table, so a node restarted alone, or every node of a cluster
// restarted at once, knew no member and no cluster id: health read
// "cluster -: no quorum" and every server "in the raft configuration
// without a member record (mid-join?)". The node therefore records the
// member table and cluster id in its data dir whenever they change, and the
// health monitor uses that record until the FSM has applied past it.
const membersFile = "members.json"

// memberRecordInterval is how often the member table is compared with the
// last record (membership changes are rare; a crash within this interval
// of one leaves the previous record, which the FSM replaces once the log
// applies).
const memberRecordInterval = time.Second

// memberRecord is the content of membersFile.
type memberRecord struct {
	ClusterID string `json:"cluster_id"`
	// Index is the applied index the table was read at.
	Index   uint64           `json:"index"`
	Members []recordedMember `json:"members"`
}

type recordedMember struct {
	NodeID           string `json:"node_id"`
	GRPCAddr         string `json:"grpc_addr"`
	RaftAddr         string `json:"raft_addr"`
	SupportedVersion uint32 `json:"supported_version"`
}

func (r *memberRecord) members() []*api.Member {
	out := make([]*api.Member, len(r.Members))
	for i, m := range r.Members {
		out[i] = &api.Member{NodeId: m.NodeID, GrpcAddr: m.GRPCAddr, RaftAddr: m.RaftAddr, SupportedVersion: m.SupportedVersion}
	}
	return out
}

// readMemberRecord returns the data dir's member record, nil if there is
// none or it cannot be read (it only informs health until the log applies).
func readMemberRecord(dataDir string) *memberRecord {
	b, err := os.ReadFile(filepath.Join(dataDir, membersFile))
	if err != nil {
		return nil
	}
	var r memberRecord
	if json.Unmarshal(b, &r) != nil || r.ClusterID == "" {
		return nil
	}
	return &r
}

// recordMembers keeps membersFile equal to the FSM's member table and
// cluster id, checking every memberRecordInterval until ctx ends.
func (n *Node) recordMembers(ctx context.Context) {
	var last []*api.Member
	lastID := ""
	t := time.NewTicker(memberRecordInterval)
	defer t.Stop()
	for {
		st := n.fsm.State()
		if st.Bootstrapped() && (st.ClusterID() != lastID || !sameMembers(st.Members(), last)) {
			if err := writeMemberRecord(n.cfg.DataDir, st.ClusterID(), st.Index(), st.Members()); err != nil {
				n.log.Warn("could not record the member table in the data dir", "reason", err.Error())
			} else {
				last, lastID = st.Members(), st.ClusterID()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func sameMembers(a, b []*api.Member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func writeMemberRecord(dataDir, clusterID string, index uint64, ms []*api.Member) error {
	r := memberRecord{ClusterID: clusterID, Index: index, Members: make([]recordedMember, len(ms))}
	for i, m := range ms {
		r.Members[i] = recordedMember{NodeID: m.GetNodeId(), GRPCAddr: m.GetGrpcAddr(), RaftAddr: m.GetRaftAddr(), SupportedVersion: m.GetSupportedVersion()}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return writeFileAtomic(dataDir, membersFile, append(b, '\n'))
}
