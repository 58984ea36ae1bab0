package sim

import (
	"encoding/binary"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

func rd(id uint64, start, end string) *api.RouteDescriptor {
	return &api.RouteDescriptor{RouteId: id, Start: []byte(start), End: []byte(end), GroupId: 1,
		State: api.RouteState_ROUTE_STATE_ACTIVE}
}

func page(version, next uint64, last bool, routes ...*api.RouteDescriptor) *api.WatchRoutesResponse {
	return &api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_SnapshotPage{SnapshotPage: &api.SnapshotPage{
		Version: version, NextRouteId: next, Routes: routes, Last: last}}}
}

func delta(version uint64, removed []uint64, added ...*api.RouteDescriptor) *api.WatchRoutesResponse {
	return &api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_Delta{Delta: &api.CatalogDelta{
		Version: version, RemovedRouteIds: removed, Added: added}}}
}

// merged is a route a merge of left and right made.
func merged(id uint64, start, end string, left, right uint64) *api.RouteDescriptor {
	r := rd(id, start, end)
	r.MergedFromLeft, r.MergedFromRight, r.MergedAtHlc = left, right, 99
	return r
}

// lookups renders which route holds each key, for comparisons.
func lookups(c *catalog.Catalog, keys ...string) []uint64 {
	out := make([]uint64, len(keys))
	for i, k := range keys {
		out[i] = c.Lookup([]byte(k)).ID
	}
	return out
}

func TestFollowerSnapshotThenDeltas(t *testing.T) {
	var f follower
	if f.from() != 0 {
		t.Fatal("a new follower must start from a snapshot")
	}
	steps := []struct {
		ev      *api.WatchRoutesResponse
		changed bool
		gap     bool
		version uint64
		owners  []uint64 // route of "", "b", "m", "z"
	}{
		{ev: page(3, 3, false, rd(1, "", "m")), version: 0},
		{ev: page(3, 3, true, rd(2, "m", "")), changed: true, version: 3, owners: []uint64{1, 1, 2, 2}},
		// A split of r2 at "t".
		{ev: delta(4, []uint64{2}, rd(3, "m", "t"), rd(4, "t", "")), changed: true, version: 4, owners: []uint64{1, 1, 3, 4}},
		// Already applied: a resumed watch repeating itself.
		{ev: delta(4, []uint64{2}, rd(3, "m", "t"), rd(4, "t", "")), version: 4, owners: []uint64{1, 1, 3, 4}},
		// An older snapshot never takes the catalog back.
		{ev: page(2, 3, true, rd(1, "", "m"), rd(2, "m", "")), version: 4, owners: []uint64{1, 1, 3, 4}},
		// An event this build does not know.
		{ev: &api.WatchRoutesResponse{}, version: 4, owners: []uint64{1, 1, 3, 4}},
		// A split of r1 at "b".
		{ev: delta(5, []uint64{1}, rd(5, "", "b"), rd(6, "b", "m")), changed: true, version: 5, owners: []uint64{5, 6, 3, 4}},
		// A merge of r6 and r3 (cluster version 3): two routes out, one in.
		{ev: delta(6, []uint64{6, 3}, merged(7, "b", "t", 6, 3)), changed: true, version: 6, owners: []uint64{5, 7, 7, 4}},
		// A move's step (cluster version 4): r4 changed in place, same id.
		{ev: moved(7, rd(4, "t", ""), 3), changed: true, version: 7, owners: []uint64{5, 7, 7, 4}},
		// A newer snapshot replaces everything.
		{ev: page(9, 10, true, rd(8, "", "c"), rd(9, "c", "")), changed: true, version: 9, owners: []uint64{8, 8, 9, 9}},
	}
	for i, s := range steps {
		changed, err := f.apply(s.ev)
		if err != nil || changed != s.changed {
			t.Fatalf("step %d: apply = %v, %v; want %v, nil", i, changed, err, s.changed)
		}
		if f.from() != s.version {
			t.Fatalf("step %d: version %d, want %d", i, f.from(), s.version)
		}
		if s.owners != nil {
			if got := lookups(f.cat, "", "b", "m", "z"); !equalIDs(got, s.owners) {
				t.Fatalf("step %d: owners %v, want %v", i, got, s.owners)
			}
		}
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFollowerRefusesGaps: every event that does not follow the catalog is
// refused with errCatalogGap and leaves the catalog as it was.
func TestFollowerRefusesGaps(t *testing.T) {
	base := []*api.WatchRoutesResponse{page(3, 3, true, rd(1, "", "m"), rd(2, "m", ""))}
	for _, tc := range []struct {
		name string
		ev   *api.WatchRoutesResponse
	}{
		{"skipped version", delta(5, []uint64{2}, rd(3, "m", "t"), rd(4, "t", ""))},
		{"removes a route that is not live", delta(4, []uint64{9}, rd(3, "m", "t"), rd(4, "t", ""))},
		{"removes a route twice", delta(4, []uint64{2, 2}, rd(3, "m", "t"), rd(4, "t", ""))},
		{"leaves a hole", delta(4, []uint64{2}, rd(3, "m", "t"))},
		{"overlaps", delta(4, []uint64{2}, rd(3, "m", "t"), rd(4, "s", ""))},
		{"reuses a live id", delta(4, []uint64{2}, rd(1, "m", "t"), rd(4, "t", ""))},
		{"snapshot with a hole", page(7, 9, true, rd(1, "", "m"), rd(2, "n", ""))},
		{"snapshot with start not at the empty key", page(7, 9, true, rd(2, "a", ""))},
		{"route id zero", page(7, 9, true, rd(0, "", ""))},
		{"changes a route that is not live", moved(4, rd(9, "m", ""), 3)},
		{"changes a route into a hole", moved(4, rd(2, "n", ""), 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f follower
			for _, ev := range base {
				if _, err := f.apply(ev); err != nil {
					t.Fatal(err)
				}
			}
			before := f.cat
			changed, err := f.apply(tc.ev)
			if !errors.Is(err, errCatalogGap) || changed {
				t.Fatalf("apply = %v, %v; want errCatalogGap", changed, err)
			}
			if f.cat != before {
				t.Fatal("a refused event changed the catalog")
			}
			f.restart(true)
			if f.from() != 0 {
				t.Fatal("after a gap the follower must start over from a snapshot")
			}
		})
	}
	var f follower
	if _, err := f.apply(delta(1, nil, rd(1, "", ""))); !errors.Is(err, errCatalogGap) {
		t.Fatalf("a delta before any snapshot: %v, want errCatalogGap", err)
	}
}

// TestFollowerRestartDropsPartialSnapshot: pages of a watch that broke off
// are not mixed with the next watch's pages.
func TestFollowerRestartDropsPartialSnapshot(t *testing.T) {
	var f follower
	if _, err := f.apply(page(3, 9, false, rd(1, "", "m"))); err != nil {
		t.Fatal(err)
	}
	f.restart(false)
	changed, err := f.apply(page(3, 9, true, rd(7, "", "")))
	if err != nil || !changed {
		t.Fatalf("apply = %v, %v", changed, err)
	}
	if f.cat.Len() != 1 || f.cat.Lookup([]byte("a")).ID != 7 {
		t.Fatalf("catalog after restart: %d routes", f.cat.Len())
	}
}

// FuzzFollow feeds the follower watch events decoded from arbitrary bytes
// (each event prefixed by its length): it must never panic, never move to an
// older version, and every catalog it installs must pass every invariant.
func FuzzFollow(f *testing.F) {
	seed := func(evs ...*api.WatchRoutesResponse) []byte {
		var b []byte
		for _, ev := range evs {
			m, err := proto.Marshal(ev)
			if err != nil {
				f.Fatal(err)
			}
			b = binary.AppendUvarint(b, uint64(len(m)))
			b = append(b, m...)
		}
		return b
	}
	f.Add(seed(page(3, 3, true, rd(1, "", "m"), rd(2, "m", "")), delta(4, []uint64{2}, rd(3, "m", "t"), rd(4, "t", ""))))
	f.Add(seed(page(1, 2, false, rd(1, "", "")), page(1, 2, true), delta(2, []uint64{1}, rd(2, "", "k"), rd(3, "k", ""))))
	f.Add(seed(delta(2, []uint64{1}), page(5, 0, true, rd(4, "", ""))))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fl follower
		for len(data) > 0 {
			n, k := binary.Uvarint(data)
			if k <= 0 || n > uint64(len(data)-k) {
				return
			}
			var ev api.WatchRoutesResponse
			msg := data[k : k+int(n)]
			data = data[k+int(n):]
			if proto.Unmarshal(msg, &ev) != nil {
				continue
			}
			before := fl.from()
			changed, err := fl.apply(&ev)
			switch {
			case err != nil:
				if !errors.Is(err, errCatalogGap) || changed {
					t.Fatalf("apply = %v, %v", changed, err)
				}
				fl.restart(true)
			case changed:
				if fl.from() <= before && before != 0 {
					t.Fatalf("version went from %d to %d", before, fl.from())
				}
				if err := fl.cat.CheckInvariants(); err != nil {
					t.Fatalf("installed a broken catalog: %v", err)
				}
			case fl.from() != before:
				t.Fatalf("version moved from %d to %d without a change", before, fl.from())
			}
		}
	})
}

// A snapshot of another cluster id (the cluster was restored from a backup
// or recovered) replaces the catalog even at a lower version; one of the
// same id at a lower version is a lagging node and is ignored.
func TestFollowerTakesANewClusterAtAnyVersion(t *testing.T) {
	withCluster := func(ev *api.WatchRoutesResponse, id string) *api.WatchRoutesResponse {
		ev.GetSnapshotPage().ClusterId = id
		return ev
	}
	var f follower
	if _, err := f.apply(withCluster(page(5, 4, true, rd(2, "", "m"), rd(3, "m", "")), "old")); err != nil {
		t.Fatal(err)
	}
	if changed, err := f.apply(withCluster(page(3, 2, true, rd(1, "", "")), "old")); err != nil || changed || f.cat.Version() != 5 {
		t.Fatalf("an older snapshot of the same cluster: changed %v err %v version %d", changed, err, f.cat.Version())
	}
	changed, err := f.apply(withCluster(page(3, 2, true, rd(1, "", "")), "new"))
	if err != nil || !changed || f.cat.Version() != 3 || f.from() != 3 {
		t.Fatalf("a new cluster's snapshot: changed %v err %v version %d", changed, err, f.cat.Version())
	}
	if _, err := f.apply(delta(4, []uint64{1}, rd(2, "", "x"), rd(3, "x", ""))); err != nil || f.cat.Version() != 4 {
		t.Fatalf("deltas after the new snapshot: %v, version %d", err, f.cat.Version())
	}
}

// moved is the delta of a move's step to version v: r now in group.
func moved(v uint64, r *api.RouteDescriptor, group uint64) *api.WatchRoutesResponse {
	r.GroupId = group
	return &api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_Delta{Delta: &api.CatalogDelta{Version: v, Changed: []*api.RouteDescriptor{r}}}}
}
