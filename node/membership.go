package node

import (
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// Who this node's raft port and gRPC peer calls accept as a member, and
// the latest configuration it knows committed.

// raftAdmits is the raft port's membership check: the peer's id is a
// server of raft's latest configuration (which includes a node being
// added as soon as the leader appends it), or of a newer committed one a
// member reported (see below); a node that has no configuration yet
// (fresh, before its first entry) admits any node certificate of the
// cluster CA, since it cannot know its members.
//
// A node's own configuration can lag the cluster's: it joined from a
// snapshot taken before today's leader was a member, or it was down while
// members changed. It learns newer configurations only through raft, from
// that very leader, so refusing it would leave the node behind for good.
// Its members' health answers carry their committed configuration; a newer
// one stands in until raft catches up (etcd's peers, too, accept members
// they do not know yet).
func (n *Node) raftAdmits(id string) bool {
	servers, ok := n.raftServers()
	if !ok {
		return false
	}
	if len(servers) == 0 {
		return true
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return true
		}
	}
	h := n.healthRef.Load()
	if h == nil {
		return false
	}
	index, reported := h.NewestConfiguration()
	own, _ := n.configs.committed()
	return index > own && slices.Contains(reported, id)
}

// raftClusterID is the cluster this node's raft connections are bound to
// (raftnet's cluster id binding): the FSM's once raft runs and the FSM
// knows it, else the one the data dir recorded, "" for a fresh node (which
// is bound to nothing until its first entries arrive).
func (n *Node) raftClusterID() string {
	if n.raftRef.Load() != nil { // n.fsm is set before raft is published
		if id := n.fsm.State().ClusterID(); id != "" {
			return id
		}
	}
	return n.dataDirClusterID
}

// raftMemberAt names the server raft knows at a raft address, "" if none.
func (n *Node) raftMemberAt(addr string) string {
	servers, _ := n.raftServers()
	for _, s := range servers {
		if string(s.Address) == addr {
			return string(s.ID)
		}
	}
	return ""
}

func (n *Node) raftServers() ([]raft.Server, bool) {
	r := n.raftRef.Load()
	if r == nil {
		return nil, false // raft not started yet: admit no one
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	return f.Configuration().Servers, true
}

// grpcMemberAt names the member whose gRPC address is addr, "" if none.
func (n *Node) grpcMemberAt(addr string) string {
	for _, m := range n.fsm.State().Members() {
		if m.GrpcAddr == addr {
			return m.NodeId
		}
	}
	return ""
}

// configRecorder remembers the latest raft configuration this node's FSM
// saw committed: raft hands committed configuration entries to the FSM
// (StoreConfiguration), and a restored snapshot's configuration was
// committed when it was taken. raft's own GetConfiguration returns the
// latest one, committed or not, without its index.
type configRecorder struct {
	raft.ConfigurationStore

	mu      sync.Mutex
	index   uint64
	servers []string
}

// newConfigRecorder wraps an FSM, seeded from the newest snapshot's
// configuration.
func newConfigRecorder(f raft.ConfigurationStore, snaps raft.SnapshotStore) *configRecorder {
	c := &configRecorder{ConfigurationStore: f}
	if list, err := snaps.List(); err == nil && len(list) > 0 {
		c.record(list[0].ConfigurationIndex, list[0].Configuration)
	}
	return c
}

func (c *configRecorder) StoreConfiguration(index uint64, conf raft.Configuration) {
	c.ConfigurationStore.StoreConfiguration(index, conf)
	c.record(index, conf)
}

func (c *configRecorder) record(index uint64, conf raft.Configuration) {
	ids := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		ids = append(ids, string(s.ID))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if index >= c.index {
		c.index, c.servers = index, ids
	}
}

// committed returns the configuration's index and server ids (0, nil
// before any).
func (c *configRecorder) committed() (uint64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index, slices.Clone(c.servers)
}
