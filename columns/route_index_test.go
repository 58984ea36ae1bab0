package columns

import (
	"testing"

	"pgregory.net/rapid"
)

// TestRouteIndexLikeAMap: any sequence of puts of new ids and gets answers
// as a map would, through growth, for ids that collide on purpose (equal
// low or high bits) as well as spread ones.
func TestRouteIndexLikeAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var x routeIndex
		want := map[uint64]int32{}
		ids := rapid.OneOf(
			rapid.Uint64(),
			rapid.Uint64Range(0, 300),
			rapid.Map(rapid.Uint64Range(0, 300), func(v uint64) uint64 { return v << 40 }),
		)
		for range rapid.IntRange(0, 600).Draw(t, "ops") {
			id := ids.Draw(t, "id")
			got, ok := x.get(id)
			if w, wok := want[id]; ok != wok || got != w {
				t.Fatalf("get(%d) = %d, %v; want %d, %v", id, got, ok, w, wok)
			}
			if !ok && rapid.Bool().Draw(t, "put") {
				row := int32(len(want))
				x.put(id, row)
				want[id] = row
			}
		}
		if x.n != len(want) {
			t.Fatalf("%d entries, want %d", x.n, len(want))
		}
	})
}
