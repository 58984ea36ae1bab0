package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
)

// announce makes the cluster know this node. A fresh node with --join joins
// through the given members. A node with state announces itself once it knows
// its cluster (through --join members, else through its own endpoint, which
// forwards to the leader): the leader checks it still belongs to that cluster,
// refreshes its member record and applies its --autoSplit start flag
// (docs/design.md#ops-the-scheduler-and-the-switch). A fresh --bootstrap node
// needs neither: as leader it records itself.
func (n *Node) announce(ctx context.Context, self *api.Member, existing bool) {
	if !existing {
		if len(n.cfg.Join) > 0 {
			n.joinLoop(ctx, self, n.cfg.Join, "")
		}
		n.recordClusterID(ctx)
		return
	}
	if n.knownClusterID() == "" {
		n.recordClusterID(ctx)
	}
	endpoints := n.cfg.Join
	if len(endpoints) == 0 {
		endpoints = []string{n.GRPCAddr()}
	}
	n.joinLoop(ctx, self, endpoints, n.knownClusterID())
}

// joinLoop asks the given members to add this node until one accepts (the
// client follows leader hints and retries what is safe). A permanent
// refusal (id in use, another cluster, bad request) stops the node with one
// clear log line.
func (n *Node) joinLoop(ctx context.Context, self *api.Member, endpoints []string, clusterID string) {
	if ctx.Err() != nil {
		return
	}
	ccfg := client.Config{Endpoints: endpoints, Logger: n.log, Insecure: n.tls == nil}
	if n.tls != nil {
		ccfg.TLS = n.joinTLS()
	}
	cl, err := client.New(ccfg)
	if err != nil {
		n.halt(fmt.Errorf("join: %w", err))
		return
	}
	defer cl.Close()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		_, err := cl.Join(ctx, &api.JoinRequest{NodeId: self.NodeId, RaftAddr: self.RaftAddr, GrpcAddr: self.GrpcAddr, SupportedVersion: self.SupportedVersion, ClusterId: clusterID, AutoSplitFlag: self.AutoSplitFlag})
		if err == nil {
			n.log.Info("membership confirmed by the leader", "attempts", attempt, "cluster_id", clusterID)
			return
		}
		if ctx.Err() != nil {
			return
		}
		switch status.Code(err) {
		case codes.AlreadyExists, codes.FailedPrecondition, codes.InvalidArgument:
			n.halt(fmt.Errorf("join refused: %w", err))
			return
		}
		if attempt == 1 || attempt%20 == 0 {
			n.log.Info("join not accepted yet; retrying", "reason", err.Error(), "attempts", attempt)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// clusterIDFile remembers which cluster this data dir belongs to, so a
// node restarted with --join pointing at another cluster is refused.
const clusterIDFile = "cluster_id"

func (n *Node) knownClusterID() string {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, clusterIDFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// recordClusterID writes the cluster id into the data dir once the FSM
// knows it.
func (n *Node) recordClusterID(ctx context.Context) {
	for {
		ch := n.fsm.Changed()
		if st := n.fsm.State(); st.Bootstrapped() {
			if n.knownClusterID() != st.ClusterID() {
				path := filepath.Join(n.cfg.DataDir, clusterIDFile)
				if err := os.WriteFile(path, []byte(st.ClusterID()+"\n"), 0o640); err != nil {
					n.log.Warn("could not record the cluster id", "reason", err.Error())
				}
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}
