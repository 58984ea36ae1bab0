package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// joinLoop asks the given members to add this node until one accepts,
// following leader hints and backing off. A permanent refusal (id in use,
// another cluster) stops the node with one clear log line.
func (n *Node) joinLoop(ctx context.Context, self *api.Member) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := n.tryJoin(ctx, self)
		if err == nil {
			n.log.Info("joined the cluster", "attempts", attempt)
			return
		}
		if c := status.Code(errors.Unwrap(err)); c == codes.AlreadyExists || c == codes.FailedPrecondition || c == codes.InvalidArgument {
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

func (n *Node) tryJoin(ctx context.Context, self *api.Member) error {
	targets := append([]string(nil), n.cfg.Join...)
	var last error
	for i := 0; i < len(targets) && i < 8; i++ {
		cc, err := grpc.NewClient(targets[i], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			last = err
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = api.NewClusterClient(cc).Join(cctx, &api.JoinRequest{NodeId: self.NodeId, RaftAddr: self.RaftAddr, GrpcAddr: self.GrpcAddr, SupportedVersion: self.SupportedVersion, ClusterId: n.knownClusterID()})
		cancel()
		cc.Close()
		if err == nil {
			return nil
		}
		last = fmt.Errorf("via %s: %w", targets[i], err)
		if st, ok := status.FromError(err); ok {
			for _, d := range st.Details() {
				if h, ok := d.(*api.LeaderHint); ok && h.LeaderGrpcAddr != "" {
					targets = append(targets, h.LeaderGrpcAddr)
				}
			}
		}
	}
	return last
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
