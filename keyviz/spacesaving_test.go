package keyviz

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// checkHeap verifies the summary's internal structure: the heap order, the
// position index and the count sum.
func checkHeap(t interface{ Fatalf(string, ...any) }, s *spaceSaving) {
	if len(s.ents) > s.capacity || len(s.heap) != len(s.ents) {
		t.Fatalf("%d entries, %d in heap, capacity %d", len(s.ents), len(s.heap), s.capacity)
	}
	occupied := 0
	for _, c := range s.index.cells {
		if c.slot != 0 {
			occupied++
		}
	}
	if occupied != len(s.ents) {
		t.Fatalf("index holds %d keys, %d entries", occupied, len(s.ents))
	}
	var sum uint64
	for i, e := range s.ents {
		if _, got := s.index.find(e.hash); got != int32(i) {
			t.Fatalf("key %q in slot %d indexed at %d", e.key, i, got)
		}
		if s.heap[e.hpos] != int32(i) {
			t.Fatalf("slot %d says heap position %d, which holds slot %d", i, e.hpos, s.heap[e.hpos])
		}
		if e.err > e.count {
			t.Fatalf("key %q error %d above count %d", e.key, e.err, e.count)
		}
		sum += e.count
	}
	for i := 1; i < len(s.heap); i++ {
		if s.less(i, (i-1)/2) {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	if sum != s.total {
		t.Fatalf("counts sum to %d, total %d", sum, s.total)
	}
}

// TestSpaceSavingGuarantees checks the Space-Saving bounds against an exact
// model on random weighted streams: each reported entry's true weight lies in
// [count-error, count], and every key heavier than total/capacity is present.
func TestSpaceSavingGuarantees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 12).Draw(t, "capacity")
		keys := rapid.IntRange(1, 40).Draw(t, "keys")
		// A skew parameter makes some streams concentrate on few keys.
		skew := rapid.IntRange(0, 3).Draw(t, "skew")
		n := rapid.IntRange(0, 400).Draw(t, "updates")
		s := newSpaceSaving(capacity)
		exact := map[string]uint64{}
		var total uint64
		for i := range n {
			k := rapid.IntRange(0, keys-1).Draw(t, fmt.Sprint("k", i))
			for range skew {
				k /= 2
			}
			w := rapid.SampledFrom([]uint64{1, 1, 4, 7}).Draw(t, fmt.Sprint("w", i))
			key := fmt.Sprintf("key-%02d", k)
			s.add([]byte(key), w, true)
			exact[key] += w
			total += w
		}
		checkHeap(t, s)
		if s.total != total {
			t.Fatalf("total %d, fed %d", s.total, total)
		}
		present := map[string]bool{}
		for _, e := range s.top() {
			k := string(e.Key)
			present[k] = true
			tr := exact[k]
			if tr > e.Count || tr < e.Count-e.Error {
				t.Fatalf("key %s: true %d outside [%d-%d, %d]", k, tr, e.Count, e.Error, e.Count)
			}
		}
		for k, tr := range exact {
			if tr*uint64(capacity) > total && !present[k] {
				t.Fatalf("key %s with %d of %d (capacity %d) missing", k, tr, total, capacity)
			}
		}
	})
}

func TestSpaceSavingTopOrder(t *testing.T) {
	s := newSpaceSaving(4)
	for _, u := range []struct {
		k string
		w uint64
	}{{"b", 3}, {"a", 3}, {"c", 9}, {"d", 1}, {"e", 2}} {
		s.add([]byte(u.k), u.w, true)
	}
	// "e" replaced "d" (count 1): count 3, error 1.
	want := []struct {
		k        string
		c, error uint64
	}{{"c", 9, 0}, {"a", 3, 0}, {"b", 3, 0}, {"e", 3, 1}}
	got := s.top()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i, w := range want {
		if !bytes.Equal(got[i].Key, []byte(w.k)) || got[i].Count != w.c || got[i].Error != w.error {
			t.Fatalf("entry %d = %s/%d/%d, want %s/%d/%d", i, got[i].Key, got[i].Count, got[i].Error, w.k, w.c, w.error)
		}
	}
}

func TestSpaceSavingDegraded(t *testing.T) {
	type upd struct {
		k string
		w uint64
	}
	uniform := func(keys, rounds int) []upd {
		var us []upd
		for range rounds {
			for k := range keys {
				us = append(us, upd{fmt.Sprint(k), 1})
			}
		}
		return us
	}
	hot := func(share, keys int) []upd {
		// share percent of 1000 updates to "hot", the rest spread.
		var us []upd
		for i := range 1000 {
			if i%100 < share {
				us = append(us, upd{"hot", 1})
			} else {
				us = append(us, upd{fmt.Sprint(i % keys), 1})
			}
		}
		return us
	}
	for _, tc := range []struct {
		name     string
		capacity int
		updates  []upd
		want     bool
	}{
		{"empty", 4, nil, false},
		{"exact: as many keys as capacity, never evicted", 4, uniform(4, 10), false},
		{"uniform over more keys than capacity", 4, uniform(9, 10), true},
		{"uniform, capacity 32", 32, uniform(100, 5), true},
		{"one key at 70% (capacity 4)", 4, hot(70, 50), false},
		{"one key at 55% (capacity 4): below 5/8, tail spread", 4, hot(55, 50), true},
		{"one key at 60% (capacity 32)", 32, hot(60, 500), false},
		{"one key at 90% (capacity 32)", 32, hot(90, 500), false},
		{"one key at 10% (capacity 32)", 32, hot(10, 500), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSpaceSaving(tc.capacity)
			for _, u := range tc.updates {
				s.add([]byte(u.k), u.w, true)
			}
			if got := s.degraded(); got != tc.want {
				t.Fatalf("degraded = %v, want %v (min %d, total %d, evicted %v)", got, tc.want, s.min(), s.total, s.evicted)
			}
		})
	}
}

// A key holding more than (capacity+1)/(2·capacity) of the weight keeps the
// summary from being degraded, whatever the rest of the stream is.
func TestSpaceSavingDominantKeyNeverDegraded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(2, 16).Draw(t, "capacity")
		others := rapid.SliceOfN(rapid.IntRange(0, 1000), 0, 300).Draw(t, "others")
		// hot weight h with h·2c > (c+1)·total, total = h + len(others).
		o := uint64(len(others))
		c := uint64(capacity)
		h := (c+1)*o/(c-1) + 1
		s := newSpaceSaving(capacity)
		hotEvery := len(others)/int(min(h, o+1)) + 1
		fed := uint64(0)
		for i, k := range others {
			if i%hotEvery == 0 && fed < h {
				s.add([]byte("hot"), 1, true)
				fed++
			}
			s.add([]byte(fmt.Sprint(k)), 1, true)
		}
		for ; fed < h; fed++ {
			s.add([]byte("hot"), 1, true)
		}
		if s.degraded() {
			t.Fatalf("degraded with hot weight %d of %d (capacity %d)", h, s.total, capacity)
		}
	})
}

func TestSketchSaturates(t *testing.T) {
	const max = ^uint64(0)
	s := newSpaceSaving(1)
	s.add([]byte("a"), max-1, true)
	s.add([]byte("a"), 9, true)
	if s.min() != max || s.total != max {
		t.Fatalf("count %d total %d, want saturation", s.min(), s.total)
	}
}

// A hash collision drops the newcomer's update and leaves the summary
// consistent; the key already present keeps counting.
func TestSpaceSavingHashCollision(t *testing.T) {
	s := newSpaceSaving(2)
	s.addHashed([]byte("a"), 7, 3, false)
	s.addHashed([]byte("b"), 7, 5, false) // same hash, other key
	s.addHashed([]byte("a"), 7, 1, false)
	checkHeap(t, s)
	top := s.top()
	if len(top) != 1 || string(top[0].Key) != "a" || top[0].Count != 4 || s.total != 4 {
		t.Fatalf("top %v total %d, want only a=4", top, s.total)
	}
}

// Every sketch entry's raw sampled reads and writes are exactly what its
// lower estimate weighs: count - error = ww·writes + wr·reads, and never
// more events than the key was fed.
func TestSketchRawCounts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 8).Draw(t, "capacity")
		const ww, wr = 4, 1
		s := newSpaceSaving(capacity)
		fed := map[string][2]uint64{}
		for i := range rapid.IntRange(0, 300).Draw(t, "updates") {
			k := fmt.Sprintf("k%d", rapid.IntRange(0, 20).Draw(t, fmt.Sprint("k", i)))
			write := rapid.Bool().Draw(t, fmt.Sprint("w", i))
			w := uint64(wr)
			if write {
				w = ww
			}
			s.add([]byte(k), w, write)
			f := fed[k]
			if write {
				f[1]++
			} else {
				f[0]++
			}
			fed[k] = f
		}
		for _, e := range s.top() {
			if e.Count-e.Error != ww*e.SampledWrites+wr*e.SampledReads {
				t.Fatalf("key %s: count %d - error %d != 4·%d + %d", e.Key, e.Count, e.Error, e.SampledWrites, e.SampledReads)
			}
			if f := fed[string(e.Key)]; e.SampledReads > f[0] || e.SampledWrites > f[1] {
				t.Fatalf("key %s: %d/%d sampled events, fed %v", e.Key, e.SampledReads, e.SampledWrites, f)
			}
		}
	})
}
