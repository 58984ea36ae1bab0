package transport

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoregistry"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// allMethods lists every RPC of the hotsplit.v1 services from the
// generated descriptors, so a new RPC without a row fails the tests.
func allMethods(t *testing.T) []string {
	t.Helper()
	fd, err := protoregistry.GlobalFiles.FindFileByPath("hotsplitv1/service.proto")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	svcs := fd.Services()
	for i := range svcs.Len() {
		sd := svcs.Get(i)
		for j := range sd.Methods().Len() {
			out = append(out, fmt.Sprintf("/%s/%s", sd.FullName(), sd.Methods().Get(j).Name()))
		}
	}
	if len(out) < 21 {
		t.Fatalf("found only %d methods", len(out))
	}
	return out
}

func TestAuthorizationTableCoversEveryRPC(t *testing.T) {
	methods := allMethods(t)
	for _, m := range methods {
		if _, ok := authzTable[m]; !ok {
			t.Errorf("%s has no row in the authorization table", m)
		}
	}
	for m := range authzTable {
		if !slices.Contains(methods, m) {
			t.Errorf("row %s names no RPC", m)
		}
	}
	p := &Principal{Name: "root", Roles: []Role{RoleAdmin, RoleNode}}
	if err := authorize(p, "/hotsplit.v1.Catalog/Unknown", nil); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a method without a row: %v, want PermissionDenied", err)
	}
}

// The role definitions of docs/design.md#trust-and-integrity, written out
// independently of the table: each role's methods beyond the role below it.
var specRoles = map[Role][]string{
	RoleReporter: {"Load/Report", "Catalog/WatchRoutes", "Catalog/GetTimestamp", "Catalog/AckMove"},
	RoleReader: {"Catalog/ListRoutes", "Catalog/GetRoute", "AutoSplit/Status", "AutoSplit/Explain",
		"AutoSplit/GetConfig", "Cluster/Members", "Cluster/Leader", "Cluster/Health", "Cluster/Version",
		"Cluster/MintUILogin", "Catalog/ListGroups"},
	RoleOperator: {"Catalog/SplitRange", "Catalog/MergeRange", "Catalog/AddGroup", "Catalog/SetGroup", "Catalog/RemoveGroup", "Catalog/MoveRange", "AutoSplit/SetEnabled", "AutoSplit/SetConfig", "AutoSplit/AbortOp", "Cluster/CheckState"},
	RoleAdmin:    {"Cluster/Join", "Cluster/Remove", "Cluster/TransferLeadership", "Cluster/Admit", "Cluster/Snapshot"},
	RoleNode:     {"Cluster/Join", "Cluster/Members", "Cluster/Leader", "Cluster/ClockPing", "Cluster/StateHash", "Cluster/Progress"},
}

func specAllows(r Role, method string) bool {
	short := strings.TrimPrefix(method, "/hotsplit.v1.")
	if r == RoleNode {
		return slices.Contains(specRoles[RoleNode], short)
	}
	for below := RoleReporter; below <= r; below++ {
		if slices.Contains(specRoles[below], short) {
			return true
		}
	}
	return false
}

// A request acting for its caller, where the method has a subject.
func selfRequest(method, name string) any {
	switch method {
	case api.Load_Report_FullMethodName:
		return &api.ReportRequest{ReporterId: name}
	case api.Cluster_Join_FullMethodName:
		return &api.JoinRequest{NodeId: name}
	}
	return nil
}

func TestAuthorizeRoleMatrix(t *testing.T) {
	for _, m := range allMethods(t) {
		for r := RoleReporter; r <= RoleNode; r++ {
			p := &Principal{Name: "n7", Roles: []Role{r}, Via: "certificate"}
			err := authorize(p, m, selfRequest(m, "n7"))
			want := specAllows(r, m)
			if got := err == nil; got != want {
				t.Errorf("role %s on %s: allowed=%v, want %v (%v)", r, m, got, want, err)
				continue
			}
			if err == nil {
				continue
			}
			msg := status.Convert(err).Message()
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(msg, `"n7"`) || !strings.Contains(msg, m) || !strings.Contains(msg, "needs role") {
				t.Errorf("role %s on %s: %v; want PermissionDenied naming the identity, the method and the role", r, m, err)
			}
		}
	}
}

func TestAuthorizeSubjects(t *testing.T) {
	reporter := &Principal{Name: "dn1", Roles: []Role{RoleReporter}}
	admin := &Principal{Name: "alice", Roles: []Role{RoleAdmin}}
	node := &Principal{Name: "n2", Roles: []Role{RoleNode}}
	for _, tc := range []struct {
		p      *Principal
		method string
		req    any
		ok     bool
	}{
		{reporter, api.Load_Report_FullMethodName, &api.ReportRequest{ReporterId: "dn1"}, true},
		{reporter, api.Load_Report_FullMethodName, &api.ReportRequest{ReporterId: "dn1/2"}, true},
		{reporter, api.Load_Report_FullMethodName, &api.ReportRequest{ReporterId: "dn2"}, false},
		{reporter, api.Load_Report_FullMethodName, &api.ReportRequest{ReporterId: "dn10"}, false},
		{admin, api.Load_Report_FullMethodName, &api.ReportRequest{ReporterId: "dn1"}, false},
		{node, api.Cluster_Join_FullMethodName, &api.JoinRequest{NodeId: "n2"}, true},
		{node, api.Cluster_Join_FullMethodName, &api.JoinRequest{NodeId: "n3"}, false},
		{admin, api.Cluster_Join_FullMethodName, &api.JoinRequest{NodeId: "n3"}, true},
		{node, api.Cluster_Remove_FullMethodName, &api.RemoveRequest{NodeId: "n2"}, false},
	} {
		err := authorize(tc.p, tc.method, tc.req)
		if (err == nil) != tc.ok {
			t.Errorf("%s %s %v: %v, want allowed=%v", tc.p.Name, tc.method, tc.req, err, tc.ok)
		}
	}
}

func TestRolesOrder(t *testing.T) {
	p := &Principal{Roles: []Role{RoleOperator}}
	for r, want := range map[Role]bool{RoleReporter: true, RoleReader: true, RoleOperator: true, RoleAdmin: false, RoleNode: false} {
		if p.Has(r) != want {
			t.Errorf("operator has %s = %v", r, !want)
		}
	}
	if (&Principal{Roles: []Role{RoleNode}}).Has(RoleReporter) {
		t.Error("node includes reporter")
	}
	for _, name := range []string{"reporter", "reader", "operator", "admin", "node"} {
		if r, ok := ParseRole(name); !ok || r.String() != name {
			t.Errorf("ParseRole(%q) = %v, %v", name, r, ok)
		}
	}
	if _, ok := ParseRole("none"); ok {
		t.Error(`"none" parsed as a role`)
	}
}
