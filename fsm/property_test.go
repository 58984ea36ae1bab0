package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/hlc"
)

// gen produces plausible log entries from the current state: what a leader
// (and a confused or deposed one) could commit. Keys come from a small
// alphabet so that boundaries, duplicates and hot keys collide often.
type gen struct {
	t    *rapid.T
	ms   uint64 // physical clock of the next stamp
	last uint64 // last stamp handed out
}

var keyAlphabet = []byte("abcdm")

func (g *gen) key(label string) []byte {
	n := rapid.IntRange(1, 3).Draw(g.t, label+"-len")
	k := make([]byte, n)
	for i := range k {
		k[i] = rapid.SampledFrom(keyAlphabet).Draw(g.t, label+"-byte")
	}
	return k
}

// stamp is usually a fresh HLC; sometimes a repeat or an older one, as a
// deposed leader would produce.
func (g *gen) stamp() uint64 {
	switch rapid.IntRange(0, 19).Draw(g.t, "stamp") {
	case 0:
		return g.last
	case 1:
		return g.last / 2
	}
	g.ms += uint64(rapid.IntRange(0, 3000).Draw(g.t, "advance-ms"))
	g.last = max(g.last+1, hlc.Make(g.ms, 0))
	return g.last
}

// newestMostly is every supported version, the newest three times over:
// its commands (merges) are refused below it.
var newestMostly = append(clusterversion.Versions(), clusterversion.Versions()[len(clusterversion.Versions())-1], clusterversion.Versions()[len(clusterversion.Versions())-1])

func (g *gen) bootstrap() *api.Command {
	var splits [][]byte
	for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"b", "c", "d", "da", "m"}), 0, 4, func(s string) string { return s }).Draw(g.t, "splits") {
		splits = append(splits, []byte(k))
	}
	sortKeys(splits)
	version := rapid.SampledFrom(newestMostly).Draw(g.t, "cluster-version")
	var groups uint32
	if clusterversion.ShardGroups.EnabledAt(version) {
		groups = uint32(rapid.IntRange(0, 3).Draw(g.t, "group-count"))
	}
	return &api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: "prop", InitialSplits: splits, AutoSplit: rapid.IntRange(0, 4).Draw(g.t, "auto") > 0,
		ClusterVersion: version, GroupId: uint64(rapid.IntRange(0, 2).Draw(g.t, "group-id")), GroupCount: groups,
		Config: &api.Config{
			Threshold:         uint64(rapid.IntRange(100, 5000).Draw(g.t, "threshold")),
			CandidateWindows:  uint32(rapid.IntRange(1, 2).Draw(g.t, "cw")),
			CooldownMs:        uint64(rapid.IntRange(1, 10000).Draw(g.t, "cooldown")),
			MaxSplitsPerCycle: uint32(rapid.IntRange(1, 3).Draw(g.t, "per-cycle")),
			MaxAutoRoutes:     uint32(rapid.IntRange(4, 64).Draw(g.t, "max-routes")),
			TopKeyShareBp:     uint32(rapid.IntRange(1000, 9000).Draw(g.t, "share")),
			Buckets:           uint32(rapid.IntRange(1, 8).Draw(g.t, "buckets")),
			StepMs:            1000,
			OpTtlMs:           uint64(rapid.IntRange(1, 20000).Draw(g.t, "ttl")),
		}}}}
}

func sortKeys(ks [][]byte) {
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && bytes.Compare(ks[j-1], ks[j]) > 0; j-- {
			ks[j-1], ks[j] = ks[j], ks[j-1]
		}
	}
}

// next draws one command against state s.
func (g *gen) next(s *State) *api.Command {
	c := g.body(s)
	c.Hlc = g.stamp()
	if rapid.IntRange(0, 4).Draw(g.t, "with-request-id") == 0 {
		c.RequestId = rapid.SampledFrom([]string{"r1", "r2", "r3"}).Draw(g.t, "request-id")
	}
	return c
}

func (g *gen) body(s *State) *api.Command {
	cat := s.Catalog()
	route := func() *catalog.RouteDescriptor { return cat.Lookup(g.key("route-key")) }
	switch rapid.IntRange(0, 19).Draw(g.t, "kind") {
	case 0, 1:
		r := route()
		c := split(r.ID, string(g.key("split-key")))
		if rapid.Bool().Draw(g.t, "cas") {
			v := cat.Version() - uint64(rapid.IntRange(0, 1).Draw(g.t, "stale"))
			c.GetSplitRange().ExpectedVersion = &v
		}
		return c
	case 2, 3, 4, 13:
		return g.column(s)
	case 5, 6:
		live := s.LiveOps()
		if len(live) == 0 {
			return g.column(s)
		}
		op := rapid.SampledFrom(live).Draw(g.t, "op")
		n := op.NextStep
		if rapid.IntRange(0, 5).Draw(g.t, "odd-step") == 0 {
			n = uint32(rapid.IntRange(0, 3).Draw(g.t, "step"))
		}
		key := []byte("m") // a step naming a move or merge op is refused
		if len(op.SplitKeys) > 0 {
			key = op.SplitKeys[min(int(op.NextStep), len(op.SplitKeys))-1]
		}
		return step(op.OpId, n, op.TargetRouteId, key)
	case 7:
		src := api.SwitchSource_SWITCH_SOURCE_OPERATOR
		if rapid.Bool().Draw(g.t, "flag") {
			src = api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG
		}
		return setSwitch(rapid.IntRange(0, 2).Draw(g.t, "enabled") > 0, src)
	case 8:
		p := &api.ConfigPatch{}
		switch rapid.IntRange(0, 3).Draw(g.t, "patch") {
		case 0:
			p.Threshold = new(uint64(rapid.IntRange(0, 5000).Draw(g.t, "threshold"))) // 0 is invalid
		case 1:
			p.CooldownMs = new(uint64(rapid.IntRange(0, 10000).Draw(g.t, "cooldown")))
		case 2:
			p.Buckets = new(uint32(rapid.IntRange(1, 300).Draw(g.t, "buckets"))) // > 256 invalid
		case 3:
			p.OpTtlMs = new(uint64(rapid.IntRange(1, 20000).Draw(g.t, "ttl")))
		}
		return setConfig(p)
	case 9:
		return abort(uint64(rapid.IntRange(1, int(s.nextOpID)).Draw(g.t, "abort-id")), "prop")
	case 10:
		id := rapid.SampledFrom([]string{"n1", "n2", "n3"}).Draw(g.t, "node")
		if rapid.Bool().Draw(g.t, "remove") {
			return &api.Command{Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{NodeId: id}}}
		}
		return member(id, 1)
	case 11:
		return &api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{
			CeilingMs: g.ms + uint64(rapid.IntRange(0, 2000).Draw(g.t, "ceiling"))}}}
	case 14, 15:
		// A merge of a route and its right neighbour, sometimes of any two
		// ids, sometimes conditional (stale or not).
		l := route()
		var right uint64
		cat.AscendFrom(l.End, func(r *catalog.RouteDescriptor) bool { right = r.ID; return false })
		if l.Unbounded() || rapid.IntRange(0, 4).Draw(g.t, "merge-any") == 0 {
			right = uint64(rapid.IntRange(0, int(cat.NextRouteID())).Draw(g.t, "merge-right"))
		}
		c := &api.Command{Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: l.ID, RightRouteId: right, Actor: "prop"}}}
		if rapid.Bool().Draw(g.t, "merge-cas") {
			v := cat.Version() - uint64(rapid.IntRange(0, 1).Draw(g.t, "merge-stale"))
			c.GetMergeRange().ExpectedVersion = &v
		}
		return c
	case 16:
		return g.group(s)
	case 17, 18, 19:
		return g.move(s, route)
	default:
		r := route()
		return split(r.ID, string(r.Start)) // always at a boundary
	}
}

// move draws a move command: a new move of a route to a group, the
// leader's next move step (at times far past the TTL), or an
// acknowledgement of a live move by an identity of either group (or none)
// naming its step's version or a stale one and one of a few watermarks.
func (g *gen) move(s *State, route func() *catalog.RouteDescriptor) *api.Command {
	var moves []*api.Op
	for _, op := range s.LiveOps() {
		if isMoveOp(op) {
			moves = append(moves, op)
		}
	}
	kind := rapid.IntRange(0, 3).Draw(g.t, "move-kind")
	if len(moves) == 0 || kind == 0 {
		// A group without data nodes refuses moves: give it one first.
		if s.Has(clusterversion.ShardGroups) && len(s.Groups()) < 2 {
			return addGroup("east", 0, "dn-east")
		}
		r, target := route(), uint64(rapid.IntRange(0, int(s.NextGroupID())).Draw(g.t, "move-group"))
		for _, id := range []uint64{r.GroupID, target} {
			if gr, ok := s.Group(id); ok && len(gr.GetIdentities()) == 0 {
				return setGroup(&api.SetGroup{GroupId: id, AddIdentities: []string{fmt.Sprintf("dn-g%d", id)}})
			}
		}
		return moveRange(r.ID, target)
	}
	if kind == 1 {
		now := g.ms + uint64(rapid.SampledFrom([]int{0, DefaultMoveTTLMs}).Draw(g.t, "move-late"))
		if _, cmd, _ := NextMoveStep(s, now, "scheduler"); cmd != nil {
			return cmd
		}
	}
	op := rapid.SampledFrom(moves).Draw(g.t, "move-op")
	if rapid.IntRange(0, 3).Draw(g.t, "ack-right") > 0 {
		// The acknowledgement the move waits for, from a node that owes it.
		ack, watermark := api.MoveAck_MOVE_ACK_COPIED, uint64(0)
		if op.GetNextStep() == moveStepCommit {
			ack, watermark = api.MoveAck_MOVE_ACK_FENCED, uint64(rapid.IntRange(0, 9).Draw(g.t, "fence-watermark"))
			if len(missingAcks(s, op, ack)) == 0 {
				ack, watermark = api.MoveAck_MOVE_ACK_CAUGHT_UP, op.GetWatermark()
			}
		}
		if missing := missingAcks(s, op, ack); len(missing) > 0 {
			return ackMove(op, ack, rapid.SampledFrom(missing).Draw(g.t, "ack-owed"), watermark)
		}
	}
	var ids []string
	for _, gr := range s.Groups() {
		ids = append(ids, gr.GetIdentities()...)
	}
	identity := "dn-none"
	if len(ids) > 0 {
		identity = rapid.SampledFrom(ids).Draw(g.t, "ack-identity")
	}
	c := ackMove(op, api.MoveAck(rapid.IntRange(1, 3).Draw(g.t, "ack")), identity, uint64(rapid.IntRange(0, 2).Draw(g.t, "watermark")))
	c.GetAckMove().CatalogVersion -= uint64(rapid.IntRange(0, 1).Draw(g.t, "ack-stale"))
	return c
}

// group draws a shard group command over a few names, identities and ids
// (existing, removed or never made), so that conflicts are common.
func (g *gen) group(s *State) *api.Command {
	names := []string{"east", "west", "group-1", "group-2"}
	ids := []string{"dn-1", "dn-2", "dn-3"}
	id := uint64(rapid.IntRange(0, int(s.NextGroupID())+1).Draw(g.t, "group-id"))
	switch rapid.IntRange(0, 3).Draw(g.t, "group-kind") {
	case 0:
		return addGroup(rapid.SampledFrom(names).Draw(g.t, "group-name"), uint64(rapid.IntRange(0, 3).Draw(g.t, "capacity")),
			rapid.SliceOfN(rapid.SampledFrom(ids), 0, 2).Draw(g.t, "identities")...)
	case 1:
		return removeGroup(id)
	default:
		c := &api.SetGroup{GroupId: id, State: api.GroupState(rapid.IntRange(0, 3).Draw(g.t, "group-state")),
			AddIdentities:    rapid.SliceOfN(rapid.SampledFrom(ids), 0, 1).Draw(g.t, "add-identities"),
			RemoveIdentities: rapid.SliceOfN(rapid.SampledFrom(ids), 0, 1).Draw(g.t, "remove-identities")}
		if rapid.Bool().Draw(g.t, "rename") {
			c.Name = proto.String(rapid.SampledFrom(names).Draw(g.t, "new-name"))
		}
		if rapid.Bool().Draw(g.t, "recapacity") {
			c.Capacity = proto.Uint64(uint64(rapid.IntRange(0, 3).Draw(g.t, "new-capacity")))
		}
		return setGroup(c)
	}
}

// column draws the next column: usually contiguous, sometimes a gap or a
// stale one; rows for a few live routes (and a dead one), hot or not, with
// bucket and top-key evidence inside each route.
func (g *gen) column(s *State) *api.Command {
	start := s.LastColumnAtMs()
	switch rapid.IntRange(0, 9).Draw(g.t, "column-start") {
	case 0:
		start += 1000 * uint64(rapid.IntRange(1, 3).Draw(g.t, "gap"))
	case 1:
		start -= min(start, 500)
	}
	at := start + 1000
	g.ms = max(g.ms, at)
	c := &api.ObserveColumn{WindowStartMs: start, AtMs: at, StepMs: 1000, Reporters: []string{"r1"}}
	seen := map[uint64]bool{}
	n := rapid.IntRange(0, 4).Draw(g.t, "rows")
	for i := range n {
		// The first row usually holds the persistent hot spot around "c",
		// so routes stay hot for consecutive columns and ops get planned.
		var r *catalog.RouteDescriptor
		hot := i == 0 && rapid.IntRange(0, 3).Draw(g.t, "hot-spot") > 0
		if hot {
			r = s.Catalog().Lookup([]byte("c"))
		} else {
			r = s.Catalog().Lookup(g.key("row-route"))
		}
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		row := &api.ColumnRow{RouteId: r.ID,
			Reads:  uint64(rapid.IntRange(0, 200).Draw(g.t, "reads")),
			Writes: uint64(rapid.IntRange(0, 2000).Draw(g.t, "writes")),
		}
		if hot {
			row.Writes += 1000
		}
		if rapid.Bool().Draw(g.t, "with-buckets") {
			k := catalog.NewLayout(r.Start, r.End, int(s.Config().GetBuckets())).K()
			for range k {
				row.Buckets = append(row.Buckets, uint64(rapid.IntRange(0, 1000).Draw(g.t, "bucket")))
			}
		}
		for range rapid.IntRange(0, 3).Draw(g.t, "top-keys") {
			key := []byte("c")
			if rapid.Bool().Draw(g.t, "random-top-key") {
				key = append(bytes.Clone(r.Start), g.key("top-suffix")...)
			}
			if !r.Contains(key) {
				continue
			}
			lo := uint64(rapid.IntRange(0, 8000).Draw(g.t, "lower"))
			row.TopKeys = append(row.TopKeys, &api.KeyEstimate{Key: key, Lower: lo, Upper: lo + uint64(rapid.IntRange(0, 100).Draw(g.t, "err"))})
		}
		row.TopKDegraded = rapid.IntRange(0, 9).Draw(g.t, "degraded") == 0
		c.Rows = append(c.Rows, row)
	}
	if rapid.IntRange(0, 9).Draw(g.t, "dead-row") == 0 && !seen[1] {
		c.Rows = append(c.Rows, &api.ColumnRow{RouteId: 1, Writes: 1}) // route 1 may be gone
	}
	return &api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: c}}
}

func applyBytes(f *FSM, index uint64, b []byte) *Result {
	return f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}).(*Result)
}

// checkState asserts what Apply must maintain after every entry: the
// catalog invariants, and a canonical form that restores to an equal state
// (ops, decisions, requests, tracked routes all within their rules).
func checkState(t *rapid.T, f *FSM) {
	s := f.State()
	if !s.Bootstrapped() {
		return
	}
	if err := s.Catalog().CheckInvariants(); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	back, err := stateFromProto(s.Proto(), f.limits())
	if err != nil {
		t.Fatalf("state does not pass the restore checks: %v", err)
	}
	if back.Hash() != s.Hash() {
		t.Fatal("restore of Proto() changes the hash")
	}
	if len(s.Decisions()) > f.decisionRingSize || s.requests.len() > f.requestTableSize {
		t.Fatal("bounded table over its bound")
	}
}

// Two replicas fed the same entries agree after every entry; a replica
// restored from a snapshot taken at any point and fed the rest agrees too;
// and a snapshot whose catalog breaks an invariant is refused without
// touching the state.
func TestPropertyReplicasAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		opts := Options{RequestTableSize: 2, DecisionRingSize: 8, FinishedOps: 3}
		a, b := newQuiet(opts), newQuiet(opts)
		g := &gen{t: t, ms: startMs}
		n := rapid.IntRange(1, 60).Draw(t, "entries")
		cut := rapid.IntRange(0, n).Draw(t, "snapshot-at")
		var entries [][]byte
		var snap []byte
		for i := 0; i <= n; i++ {
			if i == cut {
				snap = persist(t, a)
			}
			if i == n {
				break
			}
			var c *api.Command
			if i == 0 {
				c = g.bootstrap()
				c.Hlc = g.stamp()
			} else {
				c = g.next(a.State())
			}
			data, err := EncodeCommand(c)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, data)
			ra, rb := applyBytes(a, uint64(i+1), data), applyBytes(b, uint64(i+1), data)
			if ra.Code != rb.Code || a.State().Hash() != b.State().Hash() {
				t.Fatalf("entry %d: replicas diverge (%v / %v)", i+1, ra.Code, rb.Code)
			}
			checkState(t, a)
		}
		c := newQuiet(opts)
		if err := restore(c, snap); err != nil {
			t.Fatalf("restore at %d: %v", cut, err)
		}
		for i := cut; i < n; i++ {
			applyBytes(c, uint64(i+1), entries[i])
		}
		if c.State().Hash() != a.State().Hash() || c.State().Index() != a.State().Index() {
			t.Fatalf("snapshot at %d + %d entries differs from the original", cut, n-cut)
		}

		s := a.State()
		p := s.Proto()
		routes := p.GetCatalog().GetRoutes()
		if len(routes) < 2 {
			return
		}
		i := rapid.IntRange(0, len(routes)-1).Draw(t, "broken-route")
		switch rapid.IntRange(0, 2).Draw(t, "breakage") {
		case 0: // a gap, a missing start or a missing +inf end
			p.Catalog.Routes = append(append([]*api.RouteDescriptor(nil), routes[:i]...), routes[i+1:]...)
		case 1: // a duplicate id
			j := (i + 1) % len(routes)
			dup := proto.Clone(routes[j]).(*api.RouteDescriptor)
			dup.RouteId = routes[i].RouteId
			p.Catalog.Routes = append(append(append([]*api.RouteDescriptor(nil), routes[:j]...), dup), routes[j+1:]...)
		case 2: // a route swapped out of order
			j := (i + 1) % len(routes)
			rs := append([]*api.RouteDescriptor(nil), routes...)
			rs[i], rs[j] = rs[j], rs[i]
			p.Catalog.Routes = rs
		}
		err := restore(a, encodeProto(t, p, s.Index()))
		if !errors.Is(err, ErrSnapshot) || a.State() != s {
			t.Fatalf("broken catalog restored: %v", err)
		}
	})
}

// Replaying the same ObserveColumn entries into fresh FSMs gives the same
// tracked state, ops and explanations: a new leader or a restored replica
// reaches the same decisions.
func TestPropertyColumnReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := &gen{t: t, ms: startMs}
		boot := g.bootstrap()
		boot.GetBootstrap().AutoSplit = true
		boot.Hlc = g.stamp()
		a := newQuiet(Options{})
		data, _ := EncodeCommand(boot)
		entries := [][]byte{data}
		applyBytes(a, 1, data)
		for i := range rapid.IntRange(1, 40).Draw(t, "columns") {
			c := g.column(a.State())
			c.Hlc = g.stamp()
			data, _ := EncodeCommand(c)
			entries = append(entries, data)
			applyBytes(a, uint64(i+2), data)
		}
		b := newQuiet(Options{})
		for i, e := range entries {
			applyBytes(b, uint64(i+1), e)
		}
		if a.State().Hash() != b.State().Hash() {
			t.Fatal("column replay diverged")
		}
	})
}
