package sim

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// narrow: K keys sharing exactly a P-byte prefix, all the load uniform
// over them.
func TestNarrowShape(t *testing.T) {
	for _, p := range []int{4, 19, 40} {
		w := mustWorkload(t, Narrow, func(o *WorkloadOptions) { o.PrefixLen, o.HotKeys = p, 1000 })
		ks := w.Keys()
		first, last := ks.Key(0), ks.Key(ks.Len()-1)
		if ks.Len() != 1000 || len(first) != p+3 || !bytes.Equal(first[:p], last[:p]) || first[p] == last[p] {
			t.Fatalf("P=%d: keys %q..%q do not share exactly a %d-byte prefix", p, first, last, p)
		}
		if i, ok := ks.Index(ks.Key(617)); !ok || i != 617 {
			t.Fatalf("P=%d: Index(Key(617)) = %d %v", p, i, ok)
		}
		s := draw(w, 3, 100_000, 0)
		checkShare(t, "lower half of the keys", s.in(0, 500), s.n, 0.5, 0.5)
	}
	if _, err := ParseWorkload(Narrow, func() WorkloadOptions { o := DefaultWorkloadOptions(); o.HotKeys = 1; return o }()); err == nil {
		t.Fatal("narrow with one key accepted")
	}
}

// pair: two adjacent keys with PairShare each.
func TestPairShape(t *testing.T) {
	w := mustWorkload(t, Pair, nil)
	lo, hi, ok := w.Hotspot(0)
	if !ok || hi != lo+2 {
		t.Fatalf("Hotspot = [%d, %d)", lo, hi)
	}
	s := draw(w, 5, distN, 0)
	frac := 1.0 / float64(w.Keys().Len())
	checkShare(t, "first key", s.in(lo, lo+1), s.n, 0.45, 0.45+0.1*frac)
	checkShare(t, "second key", s.in(lo+1, hi), s.n, 0.45, 0.45+0.1*frac)
}

// incidental: the hot range is read-only, the incidental key in it is
// written by IncidentalShare of the operations and never read by the
// range's draws.
func TestIncidentalShape(t *testing.T) {
	w := mustWorkload(t, Incidental, func(o *WorkloadOptions) { o.IncidentalShare = 0.02 })
	key, ok := IncidentalKey(w)
	if !ok {
		t.Fatal("no incidental key")
	}
	idx, _ := w.Keys().Index(key)
	lo, hi, _ := w.Hotspot(0)
	if idx < lo || idx >= hi {
		t.Fatalf("incidental key %d outside the range [%d, %d)", idx, lo, hi)
	}
	st := w.Stream(rand.New(rand.NewPCG(9, 0)))
	var keyWrites, rangeWrites, n int
	for range distN {
		k, write := st.Next(0)
		n++
		switch {
		case k == idx && write:
			keyWrites++
		case k >= lo && k < hi && write:
			rangeWrites++
		}
	}
	checkShare(t, "incidental key writes", keyWrites, n, 0.02, 0.02)
	// Only the uniform rest writes into the range: 18% of ops × half × 1%.
	if float64(rangeWrites)/float64(n) > 0.002 {
		t.Fatalf("the range is written by %d of %d ops: not read-hot", rangeWrites, n)
	}
	if _, ok := IncidentalKey(mustWorkload(t, HotRange, nil)); ok {
		t.Fatal("hotrange has an incidental key")
	}
}

// oscillate: the range's share alternates between share·(1±amplitude).
func TestOscillateShape(t *testing.T) {
	w := mustWorkload(t, Oscillate, func(o *WorkloadOptions) { o.HotShare, o.Amplitude, o.OscillateEvery = 0.5, 0.2, time.Minute })
	lo, hi, _ := w.Hotspot(0)
	frac := float64(hi-lo) / float64(w.Keys().Len())
	for _, tc := range []struct {
		at    time.Duration
		share float64
	}{{0, 0.6}, {90 * time.Second, 0.4}, {150 * time.Second, 0.6}} {
		s := draw(w, 11, distN/4, tc.at)
		checkShare(t, "range at "+tc.at.String(), s.in(lo, hi), s.n, tc.share, tc.share+(1-tc.share)*frac)
	}
}

// A report refused because it contradicts one already taken is refused for
// good: the reporter drops it rather than resend it forever.
func TestConflictingReportIsPermanent(t *testing.T) {
	if !permanent(status.Error(codes.AlreadyExists, "conflict")) || permanent(status.Error(codes.Unavailable, "later")) {
		t.Fatal("permanent classifies AlreadyExists or Unavailable wrongly")
	}
}
