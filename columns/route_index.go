package columns

// routeIndex maps a route id to its row in a sum shard: an open-addressing
// table (linear probing, at most half full) instead of a Go map, because
// the lookup runs once per reporter row — a million times a second at a
// hundred reporters — and a multiply and one probe beat hashing through
// the map's generic path. The zero value is empty and ready to use.
//
// Concurrency: none of its own; the shard's mutex guards it.
type routeIndex struct {
	slots []routeSlot // len a power of two, or 0
	n     int
}

// routeSlot holds row+1, so that a zero slot is empty whatever the id.
type routeSlot struct {
	id   uint64
	row1 int32
}

// minRouteSlots is the first table's size.
const minRouteSlots = 64

// slot is where the probe for id starts. The multiplier differs from
// shardOf's, whose top bits are equal for every id of one shard.
func (x *routeIndex) slot(id uint64) int {
	return int((id * 0xbf58476d1ce4e5b9) >> 32 & uint64(len(x.slots)-1))
}

// get returns id's row.
func (x *routeIndex) get(id uint64) (int32, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := len(x.slots) - 1
	for i := x.slot(id); ; i = (i + 1) & mask {
		s := x.slots[i]
		if s.row1 == 0 {
			return 0, false
		}
		if s.id == id {
			return s.row1 - 1, true
		}
	}
}

// put adds id at row; id must not be present.
func (x *routeIndex) put(id uint64, row int32) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	x.insert(id, row+1)
	x.n++
}

func (x *routeIndex) insert(id uint64, row1 int32) {
	mask := len(x.slots) - 1
	i := x.slot(id)
	for x.slots[i].row1 != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = routeSlot{id: id, row1: row1}
}

func (x *routeIndex) grow() {
	old := x.slots
	x.slots = make([]routeSlot, max(minRouteSlots, 2*len(old)))
	for _, s := range old {
		if s.row1 != 0 {
			x.insert(s.id, s.row1)
		}
	}
}
