package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"
)

// Node sizes of the start index. Memory latency, not comparisons, decides
// lookup cost at a million routes: each entry keeps its 8-byte key prefix
// next to its pointer, a node's lines are scanned with independent loads
// (fetched in parallel, not one binary-search step at a time), and the
// level above the leaves stays small enough for the core's L2.
const (
	// 31 entries and a count make a leaf 504 bytes, which Go allocates in
	// its 512-byte size class: eight whole, aligned cache lines.
	leafFanout  = 31
	innerFanout = 32
	// Bulk-built nodes are 7/8 full, leaving room for splits.
	leafBulk  = leafFanout * 7 / 8
	innerBulk = innerFanout * 7 / 8
	// Every node but the root holds at least half its fanout: a full node
	// splits into two halves, a bulk load evens out its last two nodes, and
	// a delete that leaves a node below this borrows from or joins a
	// neighbour. So a catalog that shrinks by merges keeps dense nodes and
	// the lookup cost of its size.
	leafMin  = leafFanout / 2
	innerMin = innerFanout / 2
)

// keyPrefix is the first 8 bytes of k, zero-padded, as an integer: it orders
// keys like bytes.Compare except that it cannot tell k from k·0x00….
func keyPrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var buf [8]byte
	copy(buf[:], k)
	return binary.BigEndian.Uint64(buf[:])
}

// le is 1 if p <= kp, else 0, without a branch.
func le(p, kp uint64) int {
	_, borrow := bits.Sub64(kp, p, 0)
	return int(1 - borrow)
}

type leafEntry struct {
	prefix uint64
	r      *RouteDescriptor
}

// leafNode holds up to leafFanout routes in start order. Entries past n
// are padding with prefix noPrefix, so that a search can scan the whole
// fixed-size array without a bound that depends on n.
type leafNode struct {
	n int
	e [leafFanout]leafEntry
}

// noPrefix pads leaves: no real prefix exceeds it.
const noPrefix = ^uint64(0)

// newLeaf returns a leaf holding es, padded.
func newLeaf(es []leafEntry) *leafNode {
	lf := &leafNode{n: len(es)}
	copy(lf.e[:], es)
	for i := len(es); i < leafFanout; i++ {
		lf.e[i].prefix = noPrefix
	}
	return lf
}

// innerEntry is one subtree: its first key's prefix and one pointer to the
// child, a *leafNode at height 1 and an *innerNode above. Sixteen bytes
// rather than a pointer per child kind keep the level above the leaves
// small enough to stay in cache; the height says which kind it is, and only
// the accessors below convert.
type innerEntry struct {
	prefix uint64
	kid    unsafe.Pointer
}

func (e innerEntry) leaf() *leafNode   { return (*leafNode)(e.kid) }
func (e innerEntry) inner() *innerNode { return (*innerNode)(e.kid) }

// innerNode holds up to innerFanout subtrees; first[i] is the first route of
// subtree i, read only to break prefix ties.
type innerNode struct {
	n     int
	e     [innerFanout]innerEntry
	first [innerFanout]*RouteDescriptor
}

// floor returns the index of the last entry whose start is <= key, or -1.
// Entries are ordered by (prefix, start), so every entry with a smaller
// prefix is <= key: counting prefixes <= kp settles almost every search and
// only a prefix tie reads key bytes.
func (lf *leafNode) floor(kp uint64, key []byte) int {
	// Count over the whole padded array in a strided order, one entry of
	// each 64-byte line (4 entries) first, so that every line's load is
	// in flight at once; the constant bounds let the compiler drop bounds
	// checks and keep the loop short enough for the next lookup to start
	// within the reorder window. Padding counts only when kp is noPrefix,
	// hence the clamp to n.
	es := &lf.e
	count := 0
	for s := range 4 {
		for j := s; j < leafFanout; j += 4 {
			count += le(es[j].prefix, kp)
		}
	}
	i := min(count, lf.n) - 1
	for i >= 0 && lf.e[i].prefix == kp && bytes.Compare(lf.e[i].r.Start, key) > 0 {
		i--
	}
	return i
}

func (in *innerNode) floor(kp uint64, key []byte) int {
	// Inner nodes stay cached, so unlike leaves they are searched by
	// halving, over the whole padded array (entries past n have prefix
	// noPrefix) in a fixed five steps that compile to conditional moves.
	es := &in.e
	if in.n == 0 || es[0].prefix > kp {
		return -1
	}
	i := 0
	for half := innerFanout / 2; half > 0; half >>= 1 {
		if es[i+half].prefix <= kp {
			i += half
		}
	}
	i = min(i, in.n-1)
	for i >= 0 && in.e[i].prefix == kp && bytes.Compare(in.first[i].Start, key) > 0 {
		i--
	}
	return i
}

// startIndex is a persistent B+tree of routes keyed by start. Nodes are
// never modified once published: set and delete copy the path they change
// (and, for delete, the neighbour a node borrows from or joins).
type startIndex struct {
	height   int // 0: the root is rootLeaf
	rootLeaf *leafNode
	root     *innerNode
	n        int
}

func (t *startIndex) floor(key []byte) *RouteDescriptor {
	kp := keyPrefix(key)
	lf := t.rootLeaf
	if t.height > 0 {
		in := t.root
		for h := t.height; ; h-- {
			e := in.e[max(in.floor(kp, key), 0)]
			if h == 1 {
				lf = e.leaf()
				break
			}
			in = e.inner()
		}
	}
	i := lf.floor(kp, key)
	if i < 0 {
		return nil
	}
	return lf.e[i].r
}

// set returns a new index with r stored at r.Start: replacing the route with
// an equal start, or inserted in order.
func (t *startIndex) set(r *RouteDescriptor) *startIndex {
	kp := keyPrefix(r.Start)
	out := &startIndex{height: t.height, n: t.n}
	var left, right subtree
	if t.height == 0 {
		lf, sib, added := t.rootLeaf.set(r, kp)
		out.n += added
		if sib == nil {
			out.rootLeaf = lf
			return out
		}
		left, right = leafEntryOf(lf), leafEntryOf(sib)
	} else {
		in, sib, added := t.root.set(t.height, r, kp)
		out.n += added
		if sib == nil {
			out.root = in
			return out
		}
		left, right = innerEntryOf(in), innerEntryOf(sib)
	}
	out.height++
	out.root = &innerNode{}
	out.root.fill([]subtree{left, right})
	return out
}

// subtree is a child being placed into an inner node.
type subtree struct {
	e     innerEntry
	first *RouteDescriptor
}

func leafEntryOf(lf *leafNode) subtree {
	return subtree{innerEntry{lf.e[0].prefix, unsafe.Pointer(lf)}, lf.e[0].r}
}

func innerEntryOf(in *innerNode) subtree {
	return subtree{innerEntry{in.e[0].prefix, unsafe.Pointer(in)}, in.first[0]}
}

func (in *innerNode) subtrees() []subtree {
	out := make([]subtree, in.n, in.n+1)
	for i := range out {
		out[i] = subtree{in.e[i], in.first[i]}
	}
	return out
}

// fill sets the node's children to subs and pads the rest.
func (in *innerNode) fill(subs []subtree) {
	in.n = len(subs)
	for i, s := range subs {
		in.e[i], in.first[i] = s.e, s.first
	}
	for i := len(subs); i < innerFanout; i++ {
		in.e[i], in.first[i] = innerEntry{prefix: noPrefix}, nil
	}
}

func (lf *leafNode) set(r *RouteDescriptor, kp uint64) (*leafNode, *leafNode, int) {
	c := *lf
	i := c.floor(kp, r.Start)
	if i >= 0 && bytes.Equal(c.e[i].r.Start, r.Start) {
		c.e[i].r = r
		return &c, nil, 0
	}
	left, right := insertAt(c.e[:c.n], i+1, leafEntry{kp, r}, leafFanout)
	if right == nil {
		return newLeaf(left), nil, 1
	}
	return newLeaf(left), newLeaf(right), 1
}

func (in *innerNode) set(h int, r *RouteDescriptor, kp uint64) (*innerNode, *innerNode, int) {
	i := max(in.floor(kp, r.Start), 0)
	var added int
	var kid, sib subtree
	if h == 1 {
		lf, s, a := in.e[i].leaf().set(r, kp)
		kid, added = leafEntryOf(lf), a
		if s != nil {
			sib = leafEntryOf(s)
		}
	} else {
		k, s, a := in.e[i].inner().set(h-1, r, kp)
		kid, added = innerEntryOf(k), a
		if s != nil {
			sib = innerEntryOf(s)
		}
	}
	if sib.first == nil {
		c := *in
		c.e[i], c.first[i] = kid.e, kid.first
		return &c, nil, added
	}
	subs := in.subtrees()
	subs[i] = kid
	left, right := insertAt(subs, i+1, sib, innerFanout)
	out := &innerNode{}
	out.fill(left)
	if right == nil {
		return out, nil, added
	}
	s := &innerNode{}
	s.fill(right)
	return out, s, added
}

// insertAt returns es with x inserted at pos, divided in two halves when
// that exceeds capacity.
func insertAt[E any](es []E, pos int, x E, capacity int) (left, right []E) {
	all := make([]E, 0, len(es)+1)
	all = append(append(append(all, es[:pos]...), x), es[pos:]...)
	if len(all) <= capacity {
		return all, nil
	}
	half := len(all) / 2
	return all[:half], all[half:]
}

// delete returns a new index without the route that starts at key, and
// false (with t itself) when no route starts there. A node left below half
// full borrows from or joins a neighbour (see rebalance); a root inner node
// left with one child hands its place to that child, so the height shrinks
// as the catalog does.
func (t *startIndex) delete(key []byte) (*startIndex, bool) {
	kp := keyPrefix(key)
	if t.height == 0 {
		lf, ok := t.rootLeaf.delete(kp, key)
		if !ok {
			return t, false
		}
		return &startIndex{rootLeaf: lf, n: t.n - 1}, true
	}
	root, ok := t.root.delete(t.height, kp, key)
	if !ok {
		return t, false
	}
	out := &startIndex{height: t.height, root: root, n: t.n - 1}
	for out.height > 0 && out.root.n <= 1 {
		if out.root.n == 0 { // the last route went
			return &startIndex{rootLeaf: newLeaf(nil)}, true
		}
		if out.height == 1 {
			out.rootLeaf, out.root = out.root.e[0].leaf(), nil
		} else {
			out.root = out.root.e[0].inner()
		}
		out.height--
	}
	return out, true
}

func (lf *leafNode) delete(kp uint64, key []byte) (*leafNode, bool) {
	i := lf.floor(kp, key)
	if i < 0 || !bytes.Equal(lf.e[i].r.Start, key) {
		return lf, false
	}
	es := make([]leafEntry, 0, lf.n-1)
	es = append(append(es, lf.e[:i]...), lf.e[i+1:lf.n]...)
	return newLeaf(es), true
}

// delete removes key from the subtree of in (height h) and rebalances the
// child it went through when that child fell below half full. The result
// may itself be below half full, or empty: its parent rebalances it.
func (in *innerNode) delete(h int, kp uint64, key []byte) (*innerNode, bool) {
	i := max(in.floor(kp, key), 0)
	var kid subtree
	var n int
	if h == 1 {
		lf, ok := in.e[i].leaf().delete(kp, key)
		if !ok {
			return in, false
		}
		kid, n = leafEntryOf(lf), lf.n
	} else {
		k, ok := in.e[i].inner().delete(h-1, kp, key)
		if !ok {
			return in, false
		}
		kid, n = innerEntryOf(k), k.n
	}
	subs := in.subtrees()
	subs[i] = kid
	least := innerMin
	if h == 1 {
		least = leafMin
	}
	switch {
	case n >= least:
	case len(subs) > 1:
		// Join the right neighbour, or the left one for the last child.
		lo := min(i, len(subs)-2)
		subs = slices.Replace(subs, lo, lo+2, rebalance(h, subs[lo], subs[lo+1])...)
	case n == 0:
		// An only child that emptied: this node empties too.
		subs = subs[:0]
	}
	out := &innerNode{}
	out.fill(subs)
	return out, true
}

// rebalance joins two neighbouring children of a node at height h (leaves
// when h is 1) into one when their entries fit, else shares the entries out
// evenly between two new nodes, each then at least half full. Either may be
// empty or below half full.
func rebalance(h int, a, b subtree) []subtree {
	if h == 1 {
		la, lb := a.e.leaf(), b.e.leaf()
		left, right := joinOrHalve(la.e[:la.n], lb.e[:lb.n], leafFanout)
		if right == nil {
			return []subtree{leafEntryOf(newLeaf(left))}
		}
		return []subtree{leafEntryOf(newLeaf(left)), leafEntryOf(newLeaf(right))}
	}
	left, right := joinOrHalve(a.e.inner().subtrees(), b.e.inner().subtrees(), innerFanout)
	l := &innerNode{}
	l.fill(left)
	if right == nil {
		return []subtree{innerEntryOf(l)}
	}
	r := &innerNode{}
	r.fill(right)
	return []subtree{innerEntryOf(l), innerEntryOf(r)}
}

// joinOrHalve returns a and b as one run when it fits capacity, else as two
// halves.
func joinOrHalve[E any](a, b []E, capacity int) (left, right []E) {
	all := make([]E, 0, len(a)+len(b))
	all = append(append(all, a...), b...)
	if len(all) <= capacity {
		return all, nil
	}
	half := len(all) / 2
	return all[:half], all[half:]
}

// buildStartIndex bulk-loads routes sorted by start.
func buildStartIndex(routes []*RouteDescriptor) *startIndex {
	t := &startIndex{n: len(routes)}
	var level []subtree
	es := make([]leafEntry, 0, leafBulk)
	for _, c := range bulkChunks(len(routes), leafBulk, leafMin, leafFanout) {
		es = es[:0]
		for _, r := range routes[c[0]:c[1]] {
			es = append(es, leafEntry{keyPrefix(r.Start), r})
		}
		level = append(level, leafEntryOf(newLeaf(es)))
	}
	switch len(level) {
	case 0:
		t.rootLeaf = newLeaf(nil)
		return t
	case 1:
		t.rootLeaf = level[0].e.leaf()
		return t
	}
	for len(level) > 1 {
		var up []subtree
		for _, c := range bulkChunks(len(level), innerBulk, innerMin, innerFanout) {
			in := &innerNode{}
			in.fill(level[c[0]:c[1]])
			up = append(up, innerEntryOf(in))
		}
		level = up
		t.height++
	}
	t.root = level[0].e.inner()
	return t
}

// bulkChunks cuts [0, n) into runs of bulk entries, the last one evened
// out with the one before it when it would hold fewer than least: joined
// when both fit in capacity, else halved. A single run may be short (it is
// the root).
func bulkChunks(n, bulk, least, capacity int) [][2]int {
	var out [][2]int
	for i := 0; i < n; i += bulk {
		out = append(out, [2]int{i, min(i+bulk, n)})
	}
	k := len(out)
	if k < 2 || out[k-1][1]-out[k-1][0] >= least {
		return out
	}
	from := out[k-2][0]
	if n-from <= capacity {
		return append(out[:k-2], [2]int{from, n})
	}
	mid := from + (n-from)/2
	return append(out[:k-2], [2]int{from, mid}, [2]int{mid, n})
}

// ascendFrom calls fn on routes with start >= key (every route when all is
// set) in order, until fn returns false.
func (t *startIndex) ascendFrom(key []byte, all bool, fn func(*RouteDescriptor) bool) {
	kp := keyPrefix(key)
	if t.height == 0 {
		t.rootLeaf.ascend(kp, key, all, fn)
		return
	}
	t.root.ascend(t.height, kp, key, all, fn)
}

func (lf *leafNode) ascend(kp uint64, key []byte, all bool, fn func(*RouteDescriptor) bool) bool {
	j := 0
	if !all {
		// First entry with start >= key.
		j = lf.floor(kp, key)
		if j < 0 || !bytes.Equal(lf.e[j].r.Start, key) {
			j++
		}
	}
	for ; j < lf.n; j++ {
		if !fn(lf.e[j].r) {
			return false
		}
	}
	return true
}

func (in *innerNode) ascend(h int, kp uint64, key []byte, all bool, fn func(*RouteDescriptor) bool) bool {
	i := 0
	if !all {
		i = max(in.floor(kp, key), 0)
	}
	for j := i; j < in.n; j++ {
		sub := all || j != i
		var ok bool
		if h == 1 {
			ok = in.e[j].leaf().ascend(kp, key, sub, fn)
		} else {
			ok = in.e[j].inner().ascend(h-1, kp, key, sub, fn)
		}
		if !ok {
			return false
		}
	}
	return true
}

// check verifies the index structure: node sizes (every node but the root
// at least half full, an inner root with at least two children), order,
// cached prefixes, first-route pointers, uniform leaf depth and the route
// count.
func (t *startIndex) check() error {
	if t.height == 0 {
		if t.rootLeaf == nil {
			return errors.New("start index has no root")
		}
		if t.rootLeaf.n != t.n {
			return fmt.Errorf("start index counts %d routes, holds %d", t.n, t.rootLeaf.n)
		}
		return t.rootLeaf.check(true)
	}
	if t.rootLeaf != nil {
		return errors.New("start index has a root leaf above height 0")
	}
	if t.root == nil || t.root.n < 2 {
		// delete hands a one-child root's place to its child.
		return errors.New("start index root inner node has fewer than 2 children")
	}
	count, err := t.root.check(t.height, true)
	if err == nil && count != t.n {
		err = fmt.Errorf("start index counts %d routes, holds %d", t.n, count)
	}
	return err
}

// check verifies one leaf; below the root it must be at least half full.
func (lf *leafNode) check(root bool) error {
	if lf.n < 1 || lf.n > leafFanout || (!root && lf.n < leafMin) {
		return fmt.Errorf("start index leaf has %d entries", lf.n)
	}
	for i := lf.n; i < leafFanout; i++ {
		if lf.e[i] != (leafEntry{prefix: noPrefix}) {
			return fmt.Errorf("start index leaf padding %d is set", i)
		}
	}
	for i := range lf.n {
		r := lf.e[i].r
		if r == nil || lf.e[i].prefix != keyPrefix(r.Start) {
			return fmt.Errorf("start index leaf entry %d is stale", i)
		}
		if i > 0 && bytes.Compare(lf.e[i-1].r.Start, r.Start) >= 0 {
			return fmt.Errorf("start index leaf out of order at %s", FormatKey(r.Start))
		}
	}
	return nil
}

func (in *innerNode) check(h int, root bool) (int, error) {
	if in.n < 1 || in.n > innerFanout || (!root && in.n < innerMin) {
		return 0, fmt.Errorf("start index inner node at height %d has %d entries", h, in.n)
	}
	for i := in.n; i < innerFanout; i++ {
		if in.e[i] != (innerEntry{prefix: noPrefix}) || in.first[i] != nil {
			return 0, fmt.Errorf("start index inner node padding %d is set", i)
		}
	}
	total := 0
	for i := range in.n {
		e := in.e[i]
		if e.kid == nil {
			return 0, fmt.Errorf("start index: subtree %d at height %d is missing", i, h)
		}
		var want subtree
		if h == 1 {
			if err := e.leaf().check(false); err != nil {
				return 0, err
			}
			want, total = leafEntryOf(e.leaf()), total+e.leaf().n
		} else {
			n, err := e.inner().check(h-1, false)
			if err != nil {
				return 0, err
			}
			want, total = innerEntryOf(e.inner()), total+n
		}
		if e != want.e || in.first[i] != want.first {
			return 0, fmt.Errorf("start index: stale entry for subtree %d", i)
		}
		if i > 0 && bytes.Compare(in.first[i-1].Start, in.first[i].Start) >= 0 {
			return 0, fmt.Errorf("start index inner node out of order at %s", FormatKey(in.first[i].Start))
		}
	}
	return total, nil
}
