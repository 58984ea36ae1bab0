package keyviz

import (
	"fmt"
	"math"
	"testing"
)

// The operation sample is uniform: over many columns, each of 100 keys
// fed equally often lands in a 32-slot reservoir about 32% of the time
// (chi-square over the keys, fixed seed).
func TestReservoirUniform(t *testing.T) {
	const keys = 100
	columns := 2000
	if testing.Short() {
		columns = 500
	}
	in := make([]int, keys)
	r := newReservoir(7)
	for c := range columns {
		*r = reservoir{rng: uint64(c)*0x9e3779b97f4a7c15 | 1, buf: r.buf[:0]}
		for round := range 5 {
			for k := range keys {
				r.add([]byte(fmt.Sprintf("key-%03d", (k+round*37)%keys)), k%2 == 0)
			}
		}
		for _, s := range r.samples() {
			var k int
			fmt.Sscanf(string(s.Key), "key-%03d", &k)
			in[k] += int(s.Reads + s.Writes)
		}
	}
	expect := float64(columns*ReservoirSize) / keys
	var chi2 float64
	for _, n := range in {
		chi2 += (float64(n) - expect) * (float64(n) - expect) / expect
	}
	// 99 degrees of freedom: mean 99, sd 14; allow mean + 5 sd.
	if chi2 > 99+5*math.Sqrt(2*99) {
		t.Fatalf("chi-square %.1f over %d keys: the sample is not uniform (counts %v)", chi2, keys, in)
	}
}

// A reservoir reports its keys sorted, each once, with the reads and
// writes it holds of them, at most ReservoirSize operations in all.
func TestReservoirSamples(t *testing.T) {
	r := newReservoir(1)
	for i := range 1000 {
		r.add([]byte(fmt.Sprintf("k%d", i%3)), i%4 == 0)
	}
	var n uint32
	ss := r.samples()
	for i, s := range ss {
		if i > 0 && string(ss[i-1].Key) >= string(s.Key) {
			t.Fatalf("samples not sorted and distinct: %v", ss)
		}
		n += s.Reads + s.Writes
	}
	if n != ReservoirSize || len(ss) != 3 {
		t.Fatalf("%d operations in %d keys: %v", n, len(ss), ss)
	}
	if newReservoir(1).samples() != nil {
		t.Fatal("an empty reservoir reports samples")
	}
}
