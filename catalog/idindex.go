package catalog

import "fmt"

// idIndex is a persistent 32-ary trie from route id to route. Ids are
// assigned densely and never reused, so the trie stays shallow (four levels
// hold a million ids) and a lookup is a few array hops with no comparisons.
// Removing a route clears its slot; nodes are never modified once published.
type idIndex struct {
	height   int // 0: the root is rootLeaf
	rootLeaf *idLeaf
	root     *idInner
	n        int
}

type idLeaf struct{ routes [fanout]*RouteDescriptor }

type idInner struct {
	inner  [fanout]*idInner
	leaves [fanout]*idLeaf
}

const (
	fanout = 32
	idBits = 5 // log2(fanout)
)

func (t *idIndex) capacity() uint64 { return 1 << (idBits * (t.height + 1)) }

func (t *idIndex) get(id uint64) *RouteDescriptor {
	if t.rootLeaf == nil && t.root == nil || id >= t.capacity() {
		return nil
	}
	lf := t.rootLeaf
	if t.height > 0 {
		in := t.root
		for h := t.height; ; h-- {
			slot := id >> (idBits * h) & (fanout - 1)
			if h == 1 {
				lf = in.leaves[slot]
				break
			}
			if in = in.inner[slot]; in == nil {
				return nil
			}
		}
	}
	if lf == nil {
		return nil
	}
	return lf.routes[id&(fanout-1)]
}

// set returns a new index with slot id holding r (nil removes).
func (t *idIndex) set(id uint64, r *RouteDescriptor) *idIndex {
	out := *t
	if out.rootLeaf == nil && out.root == nil {
		out.rootLeaf = &idLeaf{}
	}
	for id >= out.capacity() {
		// Grow: the old root becomes the first subtree of a new root.
		grown := &idInner{}
		if out.height == 0 {
			grown.leaves[0] = out.rootLeaf
		} else {
			grown.inner[0] = out.root
		}
		out.root, out.rootLeaf = grown, nil
		out.height++
	}
	var old *RouteDescriptor
	if out.height == 0 {
		lf := *out.rootLeaf
		old, lf.routes[id&(fanout-1)] = lf.routes[id&(fanout-1)], r
		out.rootLeaf = &lf
	} else {
		out.root, old = out.root.set(out.height, id, r)
	}
	switch {
	case old == nil && r != nil:
		out.n++
	case old != nil && r == nil:
		out.n--
	}
	return &out
}

func (in *idInner) set(h int, id uint64, r *RouteDescriptor) (*idInner, *RouteDescriptor) {
	c := &idInner{}
	if in != nil {
		*c = *in
	}
	slot := id >> (idBits * h) & (fanout - 1)
	var old *RouteDescriptor
	if h == 1 {
		lf := &idLeaf{}
		if c.leaves[slot] != nil {
			*lf = *c.leaves[slot]
		}
		old, lf.routes[id&(fanout-1)] = lf.routes[id&(fanout-1)], r
		c.leaves[slot] = lf
		return c, old
	}
	c.inner[slot], old = c.inner[slot].set(h-1, id, r)
	return c, old
}

// buildIDIndex bulk-loads routes (any order; ids must be unique).
func buildIDIndex(routes []*RouteDescriptor) (*idIndex, error) {
	t := &idIndex{rootLeaf: &idLeaf{}}
	var maxID uint64
	for _, r := range routes {
		maxID = max(maxID, r.ID)
	}
	for maxID >= t.capacity() {
		t.height++
	}
	if t.height > 0 {
		t.rootLeaf, t.root = nil, &idInner{}
	}
	for _, r := range routes {
		slot := t.leafFor(r.ID)
		if slot.routes[r.ID&(fanout-1)] != nil {
			return nil, fmt.Errorf("%w: route id %d appears twice", ErrInvariant, r.ID)
		}
		slot.routes[r.ID&(fanout-1)] = r
		t.n++
	}
	return t, nil
}

// leafFor returns the leaf holding id, creating the path to it. Only for
// building an index that is not yet published.
func (t *idIndex) leafFor(id uint64) *idLeaf {
	if t.height == 0 {
		return t.rootLeaf
	}
	in := t.root
	for h := t.height; ; h-- {
		slot := id >> (idBits * h) & (fanout - 1)
		if h == 1 {
			if in.leaves[slot] == nil {
				in.leaves[slot] = &idLeaf{}
			}
			return in.leaves[slot]
		}
		if in.inner[slot] == nil {
			in.inner[slot] = &idInner{}
		}
		in = in.inner[slot]
	}
}
