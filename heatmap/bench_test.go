package heatmap

import (
	"testing"
)

// BenchmarkAddColumn10kRoutes: one committed column of 10,000 loaded
// routes into a history at its steady state (merges included), the cost
// Apply pays per ObserveColumn at cluster version 3.
func BenchmarkAddColumn10kRoutes(b *testing.B) {
	w := newWorkload(b, 10_000, 1)
	const step = 60_000
	h := w.build(b, New(), 0, step, 300*step)
	inputs := make([]ColumnInput, 64)
	at := uint64(300 * step)
	for i := range inputs {
		inputs[i], _ = w.next(at, step)
		at += step
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		in := inputs[i%len(inputs)]
		in.WindowStartMs, in.AtMs = at, at+step
		at += step
		var err error
		if h, err = h.AddColumn(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQuery1h1000Routes: the page's default question, an hour of
// 1000 routes, over the weighted metric.
func BenchmarkQuery1h1000Routes(b *testing.B) {
	for _, tc := range []struct {
		name string
		step uint64
	}{{"step=60s", 60_000}, {"step=1s", 1000}} {
		b.Run(tc.name, func(b *testing.B) {
			w := newWorkload(b, 1000, 2)
			h := w.build(b, New(), 0, tc.step, 3_600_000)
			q := Query{FromMs: 0, ToMs: 3_600_000}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := h.Query(q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
