package sim

import (
	"math/rand/v2"
	"time"
)

// driver generates, routes and serves operations, one after the other: it
// owns the workload stream, so the operation sequence is fixed by the seed
// alone. It belongs to one goroutine.
type driver struct {
	stream Stream
	keys   KeySpace
	nodes  []*node
	adopt  func(cur *routing, nodes []*node) *routing
	route  *routing

	issued uint64
	// Operation time of the next operation, floor(issued·1e9/rate) ns,
	// kept incrementally: at·rate + acc = issued·1e9 with acc < rate.
	at     time.Duration
	acc    uint64
	stepQ  time.Duration // 1e9 / rate
	stepR  uint64        // 1e9 % rate
	rate   uint64
	next   int      // node of the next operation: issued mod len(nodes)
	reads  []uint64 // per node
	writes []uint64
	key    []byte // the current key, reused
}

// newDriver returns a driver for w seeded with seed at rate operations per
// second over nodes. adopt is called before every batch with the catalog
// the driver routes by and returns the one to route the batch by.
func newDriver(w Workload, seed uint64, rate int, nodes []*node, adopt func(*routing, []*node) *routing) *driver {
	return &driver{
		stream: w.Stream(rand.New(rand.NewPCG(seed, 0))),
		keys:   w.Keys(),
		nodes:  nodes,
		adopt:  adopt,
		stepQ:  time.Second / time.Duration(rate),
		stepR:  uint64(time.Second % time.Duration(rate)),
		rate:   uint64(rate),
		reads:  make([]uint64, len(nodes)),
		writes: make([]uint64, len(nodes)),
		key:    make([]byte, 0, 64),
	}
}

// issue serves the next n operations. There must be a catalog (Run waits
// for one). It does not allocate.
func (d *driver) issue(n uint64) {
	d.route = d.adopt(d.route, d.nodes)
	cat := d.route.cat
	for range n {
		k, write := d.stream.Next(d.at)
		d.key = d.keys.AppendKey(d.key[:0], k)
		r := cat.Lookup(d.key)
		d.nodes[d.next].sampler.Observe(r.ID, d.key, write)
		if write {
			d.writes[d.next]++
		} else {
			d.reads[d.next]++
		}
		d.advance()
	}
}

func (d *driver) advance() {
	d.issued++
	if d.next++; d.next == len(d.nodes) {
		d.next = 0
	}
	d.at += d.stepQ
	if d.acc += d.stepR; d.acc >= d.rate {
		d.acc -= d.rate
		d.at++
	}
}
