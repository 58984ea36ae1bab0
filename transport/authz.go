package transport

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// rule is one row of the authorization table.
type rule struct {
	// role is the least role of the reporter < reader < operator < admin
	// order that may call the method.
	role Role
	// node lets a member's node certificate call the method (peer traffic).
	node bool
	// self names the identity a request acts for: a reporter id, a joining
	// node id. When set, a node may call only for its own id, and callers
	// with selfOnly may act only as themselves.
	self     func(req any) string
	selfOnly bool
	// limit is the per-identity rate limit the call counts against.
	limit limitClass
}

// authzTable is the one authorization table: every RPC of every service
// has a row, and a method without one is refused (a test walks the service
// descriptors). docs/security.md shows the same table.
var authzTable = map[string]rule{
	api.Catalog_ListRoutes_FullMethodName:   {role: RoleReader},
	api.Catalog_GetRoute_FullMethodName:     {role: RoleReader},
	api.Catalog_SplitRange_FullMethodName:   {role: RoleOperator, limit: limitMutation},
	api.Catalog_WatchRoutes_FullMethodName:  {role: RoleReporter},
	api.Catalog_GetTimestamp_FullMethodName: {role: RoleReporter, limit: limitTimestamp},
	api.Catalog_MergeRange_FullMethodName:   {role: RoleOperator, limit: limitMutation},
	api.Catalog_ListGroups_FullMethodName:   {role: RoleReader},
	api.Catalog_AddGroup_FullMethodName:     {role: RoleOperator, limit: limitMutation},
	api.Catalog_SetGroup_FullMethodName:     {role: RoleOperator, limit: limitMutation},
	api.Catalog_RemoveGroup_FullMethodName:  {role: RoleOperator, limit: limitMutation},
	api.Catalog_MoveRange_FullMethodName:    {role: RoleOperator, limit: limitMutation},
	// A data node acknowledges for itself: Apply refuses an identity that
	// does not serve the group owing the acknowledgement.
	api.Catalog_AckMove_FullMethodName: {role: RoleReporter, limit: limitMutation},

	api.Load_Report_FullMethodName: {role: RoleReporter, self: reporterOf, selfOnly: true},

	api.AutoSplit_Status_FullMethodName:     {role: RoleReader},
	api.AutoSplit_Explain_FullMethodName:    {role: RoleReader},
	api.AutoSplit_GetConfig_FullMethodName:  {role: RoleReader},
	api.AutoSplit_SetEnabled_FullMethodName: {role: RoleOperator, limit: limitMutation},
	api.AutoSplit_SetConfig_FullMethodName:  {role: RoleOperator, limit: limitMutation},
	api.AutoSplit_AbortOp_FullMethodName:    {role: RoleOperator, limit: limitMutation},

	api.Cluster_Members_FullMethodName:            {role: RoleReader, node: true},
	api.Cluster_Leader_FullMethodName:             {role: RoleReader, node: true},
	api.Cluster_Join_FullMethodName:               {role: RoleAdmin, node: true, self: joinerOf, limit: limitMutation},
	api.Cluster_Remove_FullMethodName:             {role: RoleAdmin, limit: limitMutation},
	api.Cluster_TransferLeadership_FullMethodName: {role: RoleAdmin, limit: limitMutation},
	api.Cluster_Admit_FullMethodName:              {role: RoleAdmin, limit: limitMutation},
	// The state check writes a marker entry and makes a diverged node stop:
	// not a read. Its peers' hash reports and clock pings are peer traffic.
	api.Cluster_CheckState_FullMethodName: {role: RoleOperator, limit: limitMutation},
	api.Cluster_StateHash_FullMethodName:  {node: true, role: roleNobody},
	api.Cluster_ClockPing_FullMethodName:  {node: true, role: roleNobody},
	api.Cluster_Health_FullMethodName:     {role: RoleReader},
	api.Cluster_Version_FullMethodName:    {role: RoleReader},
	api.Cluster_Snapshot_FullMethodName:   {role: RoleAdmin},
	api.Cluster_Progress_FullMethodName:   {node: true, role: roleNobody},
	// A browser login grants the reader role only, so a reader may mint
	// one; minting holds a bounded, node-local table of codes, limited as
	// a mutation so that one identity cannot churn it.
	api.Cluster_MintUILogin_FullMethodName: {role: RoleReader, limit: limitMutation},
}

func reporterOf(req any) string {
	if r, ok := req.(*api.ReportRequest); ok {
		return r.GetReporterId()
	}
	return ""
}

func joinerOf(req any) string {
	if r, ok := req.(*api.JoinRequest); ok {
		return r.GetNodeId()
	}
	return ""
}

// actsAs reports whether an identity named name may act as subject: the
// same name, or a name under it ("sim" may report as "sim/2"), so one
// certificate can serve the several reporters of one process.
func actsAs(name, subject string) bool {
	return subject == name || strings.HasPrefix(subject, name+"/")
}

// authorize decides whether p may call method with req. A refusal is
// PermissionDenied naming the identity, the method and the role it needs.
func authorize(p *Principal, method string, req any) error {
	if p == insecurePrincipal {
		return nil
	}
	r, ok := authzTable[method]
	switch {
	case !ok:
		return status.Errorf(codes.PermissionDenied, "identity %q may not call %s: no authorization rule for it", p.Name, method)
	case p.Has(r.role):
		if r.selfOnly && req != nil && !actsAs(p.Name, r.self(req)) {
			return status.Errorf(codes.PermissionDenied, "identity %q may not call %s as %q: it acts only as itself (or %q/…)", p.Name, method, r.self(req), p.Name)
		}
		return nil
	case r.node && p.IsNode():
		if r.self == nil || req == nil || r.self(req) == p.Name {
			return nil
		}
		return status.Errorf(codes.PermissionDenied, "identity %q may not call %s for %q: a node acts only for its own id", p.Name, method, r.self(req))
	}
	need := r.role.String()
	switch {
	case r.role == roleNobody:
		need = "node (peer traffic only)"
	case r.node:
		need += " (or node, for itself)"
	}
	return status.Errorf(codes.PermissionDenied, "identity %q (roles %s) may not call %s: it needs role %s", p.Name, p.rolesString(), method, need)
}
