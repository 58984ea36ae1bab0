package sim

import (
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/keyviz"
)

// BenchmarkNode measures what one simulated node does per operation:
// generate it (workload stream, key formatting), route it (catalog lookup
// over 65 routes) and observe it (keyviz sampler, 16 buckets, default
// sample rate 1 in 16). ops/s is what one driver goroutine can sustain.
func BenchmarkNode(b *testing.B) {
	for _, name := range WorkloadNames() {
		b.Run(name, func(b *testing.B) {
			w := mustWorkload(b, name, func(o *WorkloadOptions) { o.ShiftEvery = time.Millisecond })
			cat, err := catalog.New(w.Keys().SplitKeys(64), 1)
			if err != nil {
				b.Fatal(err)
			}
			sm, err := keyviz.NewSampler(keyviz.SamplerConfig{})
			if err != nil {
				b.Fatal(err)
			}
			n := &node{id: "bench", sampler: sm}
			d := newDriver(w, 1, 100_000, []*node{n}, func(*routing, []*node) *routing { return newRouting(cat) })
			d.route = newRouting(cat)
			if err := sm.SetRoutes(d.route.routes, cat.Version()); err != nil {
				b.Fatal(err)
			}
			d.adopt = func(r *routing, _ []*node) *routing { return r }
			d.issue(10_000) // warm the sampler's blocks and sketches
			b.ReportAllocs()
			b.ResetTimer()
			d.issue(uint64(b.N))
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			if st := sm.Stats(); st.UnknownRoute != 0 {
				b.Fatalf("%d operations dropped", st.UnknownRoute)
			}
		})
	}
}
