package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/pki"
)

// matrixCall makes one call of a method as identity name. Mutations carry
// requests that an authorized caller gets refused by validation
// (InvalidArgument) after authorization, so the matrix changes nothing.
type matrixCall func(ctx context.Context, cc *grpc.ClientConn, name string) error

var matrixCalls = map[string]matrixCall{
	api.Catalog_ListRoutes_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).ListRoutes(ctx, &api.ListRoutesRequest{})
		return err
	},
	api.Catalog_GetRoute_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).GetRoute(ctx, &api.GetRouteRequest{RouteId: 1})
		return err
	},
	api.Catalog_SplitRange_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).SplitRange(ctx, &api.SplitRangeRequest{})
		return err
	},
	api.Catalog_MergeRange_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).MergeRange(ctx, &api.MergeRangeRequest{})
		return err
	},
	api.Catalog_ListGroups_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).ListGroups(ctx, &api.ListGroupsRequest{})
		return err
	},
	// The mutations below are refused by validation after authorization,
	// so the matrix changes no state.
	api.Catalog_AddGroup_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).AddGroup(ctx, &api.AddGroupRequest{Name: strings.Repeat("g", 65)})
		return err
	},
	api.Catalog_SetGroup_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).SetGroup(ctx, &api.SetGroupRequest{GroupId: 1, Name: proto.String(strings.Repeat("g", 65))})
		return err
	},
	api.Catalog_RemoveGroup_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).RemoveGroup(ctx, &api.RemoveGroupRequest{GroupId: 1, RequestId: strings.Repeat("r", 200)})
		return err
	},
	api.Catalog_MoveRange_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).MoveRange(ctx, &api.MoveRangeRequest{})
		return err
	},
	api.Catalog_AckMove_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).AckMove(ctx, &api.AckMoveRequest{})
		return err
	},
	api.Catalog_WatchRoutes_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		s, err := api.NewCatalogClient(cc).WatchRoutes(ctx, &api.WatchRoutesRequest{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	},
	api.Catalog_GetTimestamp_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewCatalogClient(cc).GetTimestamp(ctx, &api.GetTimestampRequest{Count: 1})
		return err
	},
	api.Load_Report_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, name string) error {
		_, err := api.NewLoadClient(cc).Report(ctx, &api.ReportRequest{ReporterId: name})
		return err
	},
	api.AutoSplit_Status_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewAutoSplitClient(cc).Status(ctx, &api.StatusRequest{})
		return err
	},
	api.AutoSplit_Explain_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewAutoSplitClient(cc).Explain(ctx, &api.ExplainRequest{RouteId: 1})
		return err
	},
	api.AutoSplit_GetConfig_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewAutoSplitClient(cc).GetConfig(ctx, &api.GetConfigRequest{})
		return err
	},
	api.AutoSplit_SetEnabled_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewAutoSplitClient(cc).SetEnabled(ctx, &api.SetEnabledRequest{})
		return err
	},
	api.AutoSplit_SetConfig_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewAutoSplitClient(cc).SetConfig(ctx, &api.SetConfigRequest{Patch: &api.ConfigPatch{}})
		return err
	},
	api.AutoSplit_AbortOp_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewAutoSplitClient(cc).AbortOp(ctx, &api.AbortOpRequest{})
		return err
	},
	api.Cluster_Members_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewClusterClient(cc).Members(ctx, &api.MembersRequest{})
		return err
	},
	api.Cluster_Leader_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewClusterClient(cc).Leader(ctx, &api.LeaderRequest{})
		return err
	},
	api.Cluster_Join_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, name string) error {
		_, err := api.NewClusterClient(cc).Join(ctx, &api.JoinRequest{NodeId: name})
		return err
	},
	api.Cluster_Remove_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewClusterClient(cc).Remove(ctx, &api.RemoveRequest{NodeId: "NOT-AN-ID"})
		return err
	},
	api.Cluster_TransferLeadership_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewClusterClient(cc).TransferLeadership(ctx, &api.TransferLeadershipRequest{ToNodeId: "NOT-AN-ID"})
		return err
	},
	api.Cluster_CheckState_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewClusterClient(cc).CheckState(ctx, &api.CheckStateRequest{Actor: strings.Repeat("a", 300)})
		return err
	},
	api.Cluster_ClockPing_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, name string) error {
		_, err := api.NewClusterClient(cc).ClockPing(ctx, &api.ClockPingRequest{FromNodeId: name})
		return err
	},
	api.Cluster_StateHash_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		// Index 1 is long applied and was never a marker: "skipped".
		_, err := api.NewClusterClient(cc).StateHash(ctx, &api.StateHashRequest{Index: 1})
		return err
	},
	api.Cluster_Health_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewClusterClient(cc).Health(ctx, &api.HealthRequest{})
		return err
	},
	api.Cluster_Version_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewClusterClient(cc).Version(ctx, &api.VersionRequest{})
		return err
	},
	api.Cluster_Progress_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, name string) error {
		_, err := api.NewClusterClient(cc).Progress(ctx, &api.ProgressRequest{FromNodeId: name})
		return err
	},
	api.Cluster_Snapshot_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		s, err := api.NewClusterClient(cc).Snapshot(ctx, &api.SnapshotRequest{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	},
	api.Cluster_Admit_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		_, err := api.NewClusterClient(cc).Admit(ctx, &api.AdmitRequest{NodeId: "NOT-AN-ID"})
		return err
	},
	api.Cluster_MintUILogin_FullMethodName: func(ctx context.Context, cc *grpc.ClientConn, _ string) error {
		// The matrix's nodes serve no HTTP: an allowed call is Unimplemented.
		_, err := api.NewClusterClient(cc).MintUILogin(ctx, &api.MintUILoginRequest{})
		return err
	},
}

// grantedBy is docs/design.md#trust-and-integrity's role list, written out apart from the table the
// server enforces: the methods each role adds to the one below it.
var grantedBy = map[string][]string{
	"reporter": {"Load/Report", "Catalog/WatchRoutes", "Catalog/GetTimestamp", "Catalog/AckMove"},
	"reader":   {"Catalog/ListRoutes", "Catalog/GetRoute", "AutoSplit/Status", "AutoSplit/Explain", "AutoSplit/GetConfig", "Cluster/Members", "Cluster/Leader", "Cluster/Health", "Cluster/Version", "Cluster/MintUILogin", "Catalog/ListGroups"},
	"operator": {"Catalog/SplitRange", "Catalog/MergeRange", "Catalog/AddGroup", "Catalog/SetGroup", "Catalog/RemoveGroup", "Catalog/MoveRange", "AutoSplit/SetEnabled", "AutoSplit/SetConfig", "AutoSplit/AbortOp", "Cluster/CheckState"},
	"admin":    {"Cluster/Join", "Cluster/Remove", "Cluster/TransferLeadership", "Cluster/Admit", "Cluster/Snapshot"},
	"node":     {"Cluster/Join", "Cluster/Members", "Cluster/Leader", "Cluster/ClockPing", "Cluster/StateHash", "Cluster/Progress"},
}

func roleAllows(role, method string) bool {
	short := strings.TrimPrefix(method, "/hotsplit.v1.")
	if role == "node" {
		return slices.Contains(grantedBy["node"], short)
	}
	for _, r := range []string{"reporter", "reader", "operator", "admin"} {
		if slices.Contains(grantedBy[r], short) {
			return true
		}
		if r == role {
			return false
		}
	}
	return false
}

// serviceMethods lists every RPC of the hotsplit.v1 services.
func serviceMethods(t *testing.T) []string {
	t.Helper()
	fd, err := protoregistry.GlobalFiles.FindFileByPath("hotsplitv1/service.proto")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range fd.Services().Len() {
		sd := fd.Services().Get(i)
		for j := range sd.Methods().Len() {
			out = append(out, fmt.Sprintf("/%s/%s", sd.FullName(), sd.Methods().Get(j).Name()))
		}
	}
	return out
}

// TestIntegrationRoleMatrix calls every RPC, through the leader and
// through a follower, as every role, as a member's node certificate, with
// no credentials, with a certificate of another CA and with an expired
// one: each is allowed exactly as docs/design.md#trust-and-integrity says, refused with
// PermissionDenied naming the identity, the method and the role, or
// Unauthenticated, or (a certificate the cluster CA did not sign, or that
// expired) cannot connect at all.
func TestIntegrationRoleMatrix(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	lead := c.waitLeaderReady(10 * time.Second)
	follower := c.followers()[0]
	methods := serviceMethods(t)
	for _, m := range methods {
		if matrixCalls[m] == nil {
			t.Fatalf("%s has no call in the matrix", m)
		}
	}
	before := c.waitBusinessConverged(10 * time.Second)

	other, err := pki.NewCA("another-cluster", 0)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.NewClient("mallory", []string{"admin"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := testCA(t).NewClient("late", []string{"admin"}, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	type identity struct {
		name, role string // role "" = no credentials
		tls        *tls.Config
		connects   bool
	}
	ids := []identity{
		{"anonymous", "", &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: testCA(t).Pool(), ServerName: "127.0.0.1"}, true},
		{"mallory", "admin", pairTLS(t, foreign), false},
		{"late", "admin", pairTLS(t, expired), false},
		{"n2", "node", memberTLS(t, "n2"), true},
	}
	for _, r := range []string{"reporter", "reader", "operator", "admin"} {
		ids = append(ids, identity{"m-" + r, r, clientTLS(t, "m-"+r, r), true})
	}
	for _, via := range []string{lead, follower} {
		for _, id := range ids {
			cfg := id.tls.Clone()
			cfg.ServerName = "127.0.0.1"
			cc, err := grpc.NewClient(c.cfgs[via].GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range methods {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := matrixCalls[m](ctx, cc, id.name)
				cancel()
				code, msg := status.Code(err), status.Convert(err).Message()
				what := fmt.Sprintf("%s via %s calling %s", id.name, via, m)
				switch {
				case !id.connects:
					// The handshake fails, or the client, seeing its issuer is
					// not the cluster CA, sends no certificate at all.
					if code != codes.Unavailable && code != codes.Unauthenticated {
						t.Errorf("%s: %v, want no connection or Unauthenticated", what, err)
					}
				case id.role == "":
					if code != codes.Unauthenticated {
						t.Errorf("%s: %v, want Unauthenticated", what, err)
					}
				case roleAllows(id.role, m):
					// Allowed: served, or refused by what comes after
					// authorization (validation; a leader-only stream asked of
					// a follower answers Unavailable naming the leader).
					if code == codes.PermissionDenied || code == codes.Unauthenticated || code == codes.Unavailable && !strings.Contains(msg, "leader") {
						t.Errorf("%s: %v, want it allowed", what, err)
					}
				case code != codes.PermissionDenied || !strings.Contains(msg, id.name) || !strings.Contains(msg, m):
					t.Errorf("%s: %v, want PermissionDenied naming the identity and method", what, err)
				case id.role != "node" && !strings.Contains(msg, "needs role"):
					t.Errorf("%s: %q does not name the role needed", what, msg)
				}
			}
			cc.Close()
		}
	}
	if after := c.waitBusinessConverged(10 * time.Second); after != before {
		t.Fatal("the matrix changed the replicated state")
	}
}

// An operator's mutation through a follower is recorded under the
// operator's certificate CN, its self-declared actor kept as a note; a
// reader's is refused by the follower; a node certificate cannot act for
// another node id, and one that is not a member cannot forward an identity.
func TestIntegrationForwardedIdentity(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	c.waitLeaderReady(10 * time.Second)
	follower := c.followers()[0]
	dial := func(cfg *tls.Config) *grpc.ClientConn {
		cfg = cfg.Clone()
		cfg.ServerName = "127.0.0.1"
		cc, err := grpc.NewClient(c.cfgs[follower].GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ctx := ctxT(t, 20*time.Second)

	_, err := api.NewCatalogClient(dial(clientTLS(t, "rita", "reader"))).SplitRange(ctx, &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m"), RequestId: requestID()})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "rita") {
		t.Fatalf("reader's split through a follower: %v, want PermissionDenied", err)
	}
	resp, err := api.NewCatalogClient(dial(clientTLS(t, "olga", "operator"))).SplitRange(ctx, &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m"), RequestId: requestID(), Actor: "alice-the-sre"})
	if err != nil {
		t.Fatalf("operator's split through a follower: %v", err)
	}
	c.waitConverged(10 * time.Second)
	var found *api.Decision
	for _, d := range c.leaderNode().FSM().State().Decisions() {
		if d.GetKind() == api.DecisionKind_DECISION_KIND_MANUAL_SPLIT && d.GetRouteId() == 1 {
			found = d
		}
	}
	if found == nil || found.GetActor() != "olga" || found.GetNote() != "alice-the-sre" || resp.GetLeft() == nil {
		t.Fatalf("split decision %v: want actor olga, note alice-the-sre", found)
	}

	n2 := dial(memberTLS(t, "n2"))
	if _, err := api.NewClusterClient(n2).Join(ctx, &api.JoinRequest{NodeId: "n3", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:2", SupportedVersion: 2}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("n2's certificate joining as n3: %v, want PermissionDenied", err)
	}
	if _, err := api.NewCatalogClient(n2).SplitRange(ctx, &api.SplitRangeRequest{RouteId: 2, SplitKey: []byte("x"), RequestId: requestID()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a node certificate splitting: %v, want PermissionDenied", err)
	}
	forged := metadata.AppendToOutgoingContext(ctx, "hotsplit-principal-bin", "admin\nroot")
	if _, err := api.NewClusterClient(dial(memberTLS(t, "n9"))).Remove(forged, &api.RemoveRequest{NodeId: "n3"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a non-member forwarding an admin identity: %v, want PermissionDenied", err)
	}
	if _, ok := c.leaderNode().FSM().State().Member("n3"); !ok {
		t.Fatal("n3 was removed")
	}
}

// A holder of a valid CA-signed node certificate for an id no admin
// admitted can neither join nor become a voter; once admitted (from its
// raft address) it can.
func TestIntegrationUnadmittedNodeCannotJoin(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 1, nil)
	c.waitLeaderReady(10 * time.Second)
	cfg := Config{ID: "n9", DataDir: t.TempDir(), Logger: quietLogger(), Join: []string{c.cfgs["n1"].GRPCAddr}, Halt: func(error) {}}
	fastTiming(&cfg)
	r, g := listen(t), listen(t)
	cfg.RaftListener, cfg.GRPCListener = r, g
	cfg.TLS = nodeTLS(t, t.TempDir(), "n9")
	n9, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n9.Close(context.Background()) })
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		st := c.node("n1").FSM().State()
		if _, member := st.Member("n9"); member {
			t.Fatal("an unadmitted node became a member")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.clusterClient("n1").Admit(ctxT(t, 5*time.Second), &api.AdmitRequest{NodeId: "n9", RaftAddr: n9.RaftAddr()}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes["n9"], c.cfgs["n9"] = n9, cfg
	c.mu.Unlock()
	c.waitVoters(2, 20*time.Second)
}
