package checker

import (
	"fmt"
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/history"
	"github.com/hotsplit/hotsplit/jepsen/model"
)

// counterModel is a register that only moves forward by one: states never
// repeat, like the catalog's versions.
var counterModel = porcupine.Model{
	Init: func() interface{} { return 0 },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s := state.(int)
		if input.(bool) { // increment from s
			return true, s + 1
		}
		return output.(int) == s, s
	},
}

// Keeping only the extreme reads of each state never changes porcupine's
// verdict on histories whose states do not repeat — linearizable or not.
func TestExtremeReadsKeepTheVerdict(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 5).Draw(t, "writes")
		// True change times 10, 20, ...; each write's window contains its time.
		var ops []porcupine.Operation
		for i := 1; i <= n; i++ {
			at := int64(10 * i)
			ops = append(ops, porcupine.Operation{ClientId: i, Call: at - rapid.Int64Range(0, 12).Draw(t, "wc"), Return: at + rapid.Int64Range(1, 12).Draw(t, "wr"), Input: true, Output: 0})
		}
		byValue := map[int][]porcupine.Operation{}
		reads := rapid.IntRange(1, 12).Draw(t, "reads")
		for i := 0; i < reads; i++ {
			call := rapid.Int64Range(0, int64(10*n+15)).Draw(t, "rc")
			ret := call + rapid.Int64Range(1, 15).Draw(t, "rl")
			v := int((call + ret) / 2 / 10) // mostly right...
			if rapid.IntRange(0, 4).Draw(t, "wrong") == 0 {
				v = rapid.IntRange(0, n).Draw(t, "v") // ...sometimes anything
			}
			v = min(v, n)
			op := porcupine.Operation{ClientId: 100 + i, Call: call, Return: ret, Input: false, Output: v}
			ops = append(ops, op)
			byValue[v] = append(byValue[v], op)
		}
		reduced := ops[:n:n]
		for v := 0; v <= n; v++ {
			if rs := byValue[v]; len(rs) > 0 {
				reduced = append(reduced, extremeReads(rs)...)
			}
		}
		full := porcupine.CheckOperations(counterModel, ops)
		less := porcupine.CheckOperations(counterModel, reduced)
		if full != less {
			t.Fatalf("verdict changed: full %v, reduced %v\nops %v\nreduced %v", full, less, ops, reduced)
		}
	})
}

// A merge the FSM refused fits a catalog only where the FSM would have
// refused it for that reason.
func TestMergeRefusalFits(t *testing.T) {
	c, _ := model.Initial([][]byte{[]byte("f"), []byte("m")}, 1) // v1: r1, r2, r3
	v := func(x uint64) *uint64 { return &x }
	for _, tc := range []struct {
		name        string
		left, right uint64
		expected    *uint64
		code        model.Code
		want        bool
	}{
		{"version mismatch at another version", 1, 2, v(7), model.VersionMismatch, true},
		{"version mismatch at that version", 1, 2, v(1), model.VersionMismatch, false},
		{"version mismatch without CAS", 1, 2, nil, model.VersionMismatch, false},
		{"not adjacent, and they are not", 1, 3, v(1), model.NotAdjacent, true},
		{"not adjacent, but they are", 1, 2, v(1), model.NotAdjacent, false},
		{"not adjacent, at another version (the CAS would have refused first)", 1, 3, v(2), model.NotAdjacent, false},
		{"unknown route", 1, 9, nil, model.RouteNotFound, true},
		{"live op, where the catalog allows the merge", 2, 3, v(1), model.RouteInLiveOp, true},
		{"live op, where the catalog refuses the merge", 1, 3, v(1), model.RouteInLiveOp, false},
		{"fence refusal: anywhere", 1, 2, v(1), model.FenceViolation, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := catInput{kind: catMergeRefused, routeID: tc.left, rightID: tc.right, expected: tc.expected, code: tc.code}
			if got := mergeRefusalFits(c, in); got != tc.want {
				t.Fatalf("fits = %v, want %v", got, tc.want)
			}
		})
	}
}

// Porcupine over a catalog with merges finds no fault in a history a
// correct cluster could produce: random splits and merges (some sent with
// a stale version and refused, some merges of routes that are not
// adjacent), each client call's window holding its log entry's moment, and
// reads around the versions between them.
func TestCatalogHistoryWithMergesIsLinearizable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := &fixture{hlc: 5_000_000 * ms}
		f.add(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c", GroupId: 1, ClusterVersion: 3}}})
		cat, _ := model.Initial(nil, 1)
		cat, _ = cat.MarkAllStarts() // version 3: manual splits pin their keys
		type sent struct {
			kind        history.Kind
			rid         string
			route, with uint64
			key         []byte
			expected    uint64
		}
		var cmds []sent
		n := rapid.IntRange(3, 20).Draw(t, "commands")
		for i := range n {
			expected := cat.Version
			if cat.Version > 1 && rapid.IntRange(0, 4).Draw(t, "stale") == 0 {
				expected--
			}
			rid := fmt.Sprint("r", i)
			routes := cat.Routes
			pos := rapid.IntRange(0, len(routes)-1).Draw(t, "route")
			if len(routes) > 1 && rapid.Bool().Draw(t, "merge") {
				l, r := routes[max(pos-1, 0)].ID, routes[max(pos, 1)].ID
				if rapid.IntRange(0, 5).Draw(t, "reversed") == 0 {
					l, r = r, l
				}
				f.add(merge(rid, l, r, expected))
				cmds = append(cmds, sent{history.Merge, rid, l, r, nil, expected})
				if next, _, code := cat.Merge(l, r, f.hlc); code == model.OK && expected == cat.Version {
					cat = next
				}
				continue
			}
			key := fmt.Appendf(nil, "k%06d", rapid.IntRange(0, 999_999).Draw(t, "key"))
			f.add(split(rid, routes[pos].ID, string(key), expected))
			cmds = append(cmds, sent{history.Split, rid, routes[pos].ID, 0, key, expected})
			if next, _, code := cat.Split(routes[pos].ID, key, f.hlc, true); code == model.OK && expected == cat.Version {
				cat = next
			}
		}
		replay, err := model.Run(f.log, uint64(len(f.log)))
		if err != nil {
			t.Fatal(err)
		}
		if replay.Final().Hash() != cat.Hash() {
			t.Fatalf("the test's catalog v%d differs from the replay's v%d", cat.Version, replay.Final().Version)
		}
		window := func(at int64) (int64, int64) {
			return at - rapid.Int64Range(0, 150).Draw(t, "before"), at + rapid.Int64Range(1, 150).Draw(t, "after")
		}
		var ops []history.Op
		for i, c := range cmds {
			at := int64(100 * (i + 1))
			call, ret := window(at)
			exp := c.expected
			op := history.Op{Client: i % 4, Kind: c.kind, Call: call, Return: ret, RequestID: c.rid, RouteID: c.route, RightRouteID: c.with,
				SplitKey: c.key, ExpectedVersion: &exp}
			res := replay.Requests[c.rid]
			switch {
			case res.Code != model.OK:
				op.Status, op.Code = history.Fail, "FailedPrecondition"
			case c.kind == history.Merge:
				op.Status, op.Version, op.MergedID, op.CommitHLC = history.OK, res.Version, res.Merged.ID, res.HLC
			default:
				op.Status, op.Version, op.LeftID, op.RightID, op.CommitHLC = history.OK, res.Version, res.Children[0].ID, res.Children[1].ID, res.HLC
			}
			op.ID = len(ops)
			ops = append(ops, op)
			// A read of the catalog as it stands after this command.
			v := replay.Requests[c.rid].Version
			if v == 0 {
				v = model.InitialVersion
				for _, prev := range cmds[:i] {
					v = max(v, replay.Requests[prev.rid].Version)
				}
			}
			rc, _ := replay.CatalogAt(v)
			call, ret = window(at + 50)
			ops = append(ops, history.Op{ID: len(ops), Client: 10 + i%3, Kind: history.ListRoutes, Status: history.OK, Call: max(call, at+1), Return: ret,
				Version: v, RoutesHash: rc.Hash().Hex(), RouteCount: len(rc.Routes)})
			// And of one route: by key, or by an id that may be gone.
			call, ret = window(at + 50)
			g := history.Op{ID: len(ops), Client: 20 + i%3, Kind: history.GetRoute, Status: history.OK, Call: max(call, at+1), Return: ret}
			if id := rapid.Uint64Range(1, rc.NextID-1).Draw(t, "get id"); rapid.Bool().Draw(t, "by id") {
				g.RouteID = id
			} else {
				g.ByKey, g.Key = true, fmt.Appendf(nil, "k%06d", rapid.IntRange(0, 999_999).Draw(t, "get key"))
			}
			found, live := rc.Route(g.RouteID)
			if g.ByKey {
				for _, r := range rc.Routes {
					if r.Contains(g.Key) {
						found, live = r, true
					}
				}
			}
			if live {
				g.RouteID, g.Version, g.RoutesHash = found.ID, v, model.HashRoutes([]model.Route{found}).Hex()
			} else {
				g.Gone = true
			}
			ops = append(ops, g)
		}
		resolved, errs := resolve(ops, replay)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		catOps, m := catalogHistory(resolved, replay)
		if res, _ := porcupine.CheckOperationsVerbose(m, catOps, PorcupineTimeout); res != porcupine.Ok {
			t.Fatalf("porcupine: %v on a correct history of %d commands (%d merges applied)", res, n, len(replay.Merges))
		}
	})
}
