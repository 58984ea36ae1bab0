package fsm

import (
	"io"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// WriteSnapshot writes st, as of raft index index, in the FSM's snapshot
// file format. It does not check st: restoring the file does. It exists for
// tools and tests that build a snapshot from a description of a state —
// for example one that breaks an invariant on purpose, to prove that
// Restore refuses it.
func WriteSnapshot(w io.Writer, index uint64, st *api.StateSnapshot) error {
	core := proto.CloneOf(st)
	core.Tracked, core.Requests = nil, nil
	var routes []*api.RouteDescriptor
	if cat := core.GetCatalog(); cat != nil {
		routes = cat.Routes
		core.Catalog = &api.CatalogSnapshot{Version: cat.Version, NextRouteId: cat.NextRouteId}
	}
	core.FormatVersion = snapshotFormatVersion
	heat := core.HeatHistory
	core.HeatHistory, core.HeatHistoryPages = nil, nil
	p := snapshotParts{index: index, core: core, routes: len(routes), tracked: st.GetTracked(), requests: st.GetRequests(), heat: heat}
	if core.Catalog != nil {
		p.ascend = func(fn func(*api.RouteDescriptor) bool) {
			for _, r := range routes {
				if !fn(r) {
					return
				}
			}
		}
	}
	return writeParts(w, p)
}
