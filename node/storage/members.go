package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
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
const MembersFile = "members.json"

// memberRecordInterval is how often the member table is compared with the
// last record (membership changes are rare; a crash within this interval
// of one leaves the previous record, which the FSM replaces once the log
// applies).
const memberRecordInterval = time.Second

// MemberRecord is the content of MembersFile.
type MemberRecord struct {
	ClusterID string `json:"cluster_id"`
	// Index is the applied index the table was read at.
	Index uint64           `json:"index"`
	Table []recordedMember `json:"members"`
}

type recordedMember struct {
	NodeID           string `json:"node_id"`
	GRPCAddr         string `json:"grpc_addr"`
	RaftAddr         string `json:"raft_addr"`
	SupportedVersion uint32 `json:"supported_version"`
}

// Members is the recorded table as member records.
func (r *MemberRecord) Members() []*api.Member {
	out := make([]*api.Member, len(r.Table))
	for i, m := range r.Table {
		out[i] = &api.Member{NodeId: m.NodeID, GrpcAddr: m.GRPCAddr, RaftAddr: m.RaftAddr, SupportedVersion: m.SupportedVersion}
	}
	return out
}

// ReadMemberRecord returns the data dir's member record, nil if there is
// none or it cannot be read (it only informs health until the log applies).
func ReadMemberRecord(dataDir string) *MemberRecord {
	b, err := os.ReadFile(filepath.Join(dataDir, MembersFile))
	if err != nil {
		return nil
	}
	var r MemberRecord
	if json.Unmarshal(b, &r) != nil || r.ClusterID == "" {
		return nil
	}
	return &r
}

// RecordMembers keeps dataDir's MembersFile equal to f's member table and
// cluster id, checking every memberRecordInterval until ctx ends; a
// failed write is logged and tried again at the next check.
func RecordMembers(ctx context.Context, dataDir string, f *fsm.FSM, log *slog.Logger) {
	var last []*api.Member
	lastID := ""
	t := time.NewTicker(memberRecordInterval)
	defer t.Stop()
	for {
		st := f.State()
		if st.Bootstrapped() && (st.ClusterID() != lastID || !sameMembers(st.Members(), last)) {
			if err := writeMemberRecord(dataDir, st.ClusterID(), st.Index(), st.Members()); err != nil {
				log.Warn("could not record the member table in the data dir", "reason", err.Error())
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
	r := MemberRecord{ClusterID: clusterID, Index: index, Table: make([]recordedMember, len(ms))}
	for i, m := range ms {
		r.Table[i] = recordedMember{NodeID: m.GetNodeId(), GRPCAddr: m.GetGrpcAddr(), RaftAddr: m.GetRaftAddr(), SupportedVersion: m.GetSupportedVersion()}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return writeFileAtomic(dataDir, MembersFile, append(b, '\n'))
}
