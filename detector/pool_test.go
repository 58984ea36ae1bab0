package detector

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Pooled evidence (RulePooledEvidence, pool.go). Route [a, b) has 16
// buckets as in evidence_test.go; "ap…" keys are all in bucket 7.

// pooled is n earlier columns' evidence for the keys, each column giving
// every key weight w (a sampled key: variance w²), ages 0..n-1.
func pooled(n int, w uint64, ks ...string) []PooledKey {
	var out []PooledKey
	for age := range n {
		sorted := slices.Clone(ks)
		slices.Sort(sorted)
		for _, k := range sorted {
			out = append(out, PooledKey{Key: []byte(k), Weight: w, Variance: w * w, Age: uint32(age)})
		}
	}
	return out
}

// pooledExplanation runs one eligible column of row for [a, b) under the
// rules, the route's entry holding pool.
func pooledExplanation(t *testing.T, rules Rules, row Row, pool []PooledKey) Explanation {
	t.Helper()
	return pooledExplanationAfter(t, rules, row, pool, 4*hotWrites)
}

// pooledExplanationAfter is pooledExplanation after a column that scored
// lastScore.
func pooledExplanationAfter(t *testing.T, rules Rules, row Row, pool []PooledKey, lastScore uint64) Explanation {
	t.Helper()
	cfg := DefaultConfig()
	c, id := routeUnderTest(t, "a", "b")
	row.RouteID, row.Writes = id, hotWrites
	s, err := NewState([]Tracked{{RouteID: id, ConsecutiveOver: cfg.CandidateWindows - 1, LastScore: lastScore, Pool: pool}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	in := enabledInput(c, cfg)
	in.Rules = rules
	s, _ = Observe(in, s, column(row))
	tr, _ := s.Get(id)
	return tr.Explanation
}

func TestPooledEvidenceCut(t *testing.T) {
	in7 := buckets(16, map[int]uint64{7: 60_000})
	eight := []string{"ap1", "ap2", "ap3", "ap4", "ap5", "ap6", "ap7", "ap8"}
	cases := []struct {
		name  string
		rules Rules
		row   Row
		pool  []PooledKey
		// want: reason, key, left share and the interval's half width
		// (0: any).
		reason    Reason
		key       string
		left      uint32
		half      uint32
		points    uint32
		evidence  Evidence
		halfBelow uint32 // the half width is below this (0: unchecked)
	}{
		{name: "eight samples of one column: balanced by the estimate, not at confidence", rules: AllRules,
			row: Row{Buckets: in7, Samples: samples(eight...)}, reason: ReasonCutUncertain, key: "", left: 5000, points: 8,
			evidence: EvidenceSamples},
		{name: "the same keys in the two columns before: three times the evidence, the cut is made", rules: AllRules,
			row: Row{Buckets: in7, Samples: samples(eight...)}, pool: pooled(2, 100, eight...),
			reason: ReasonPlanned, key: "ap5", left: 5000, points: 8, evidence: EvidenceSamples, halfBelow: 3000},
		{name: "without the rule the pool is not evidence", rules: AllRules &^ RulePooledEvidence,
			row: Row{Buckets: in7, Samples: samples(eight...)}, pool: pooled(2, 100, eight...),
			reason: ReasonCutUncertain, left: 5000, points: 8, evidence: EvidenceSamples},
		{name: "one column of 32 keys: the cut halves them", rules: AllRules,
			row:    Row{Buckets: in7, Samples: manySamples("ap", 32)},
			reason: ReasonPlanned, key: "ap16", left: 5000, points: 32, evidence: EvidenceSamples},
		{name: "the columns before sampled only the first half: the cut moves left", rules: AllRules,
			row: Row{Buckets: in7, Samples: manySamples("ap", 32)}, pool: pooled(2, 100, keyStrings(manySamples("ap", 16))...),
			reason: ReasonPlanned, key: "ap11", left: 5156, points: 32, evidence: EvidenceSamples},
		{name: "pooled keys outside the route are ignored", rules: AllRules,
			row: Row{Buckets: in7, Samples: samples(eight...)}, pool: pooled(2, 100, "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"),
			reason: ReasonCutUncertain, left: 5000, points: 8, evidence: EvidenceSamples},
		{name: "a pooled key in a bucket empty in this column is stale", rules: AllRules,
			row: Row{Buckets: in7, Samples: samples(eight...)}, pool: pooled(2, 100, "a\x95x", "a\x96y", "a\x97z"),
			reason: ReasonCutUncertain, left: 5000, points: 11, evidence: EvidenceSamples},
		{name: "a cut between buckets stays exact: pooled keys only place cuts inside a bucket", rules: AllRules,
			row:  Row{Buckets: buckets(16, map[int]uint64{2: 20_000, 5: 20_000, 9: 20_000}), Samples: samples("a\x25", "a\x55", "a\x95")},
			pool: pooled(2, 100, "a\x25", "a\x55", "a\x95"), reason: ReasonPlanned, key: "a\x90", left: 6666, half: 0, points: 3,
			evidence: EvidenceBuckets},
		{name: "a pooled known key keeps its load known; an exact one stands for its load in each pooled column", rules: AllRules,
			row:  Row{Buckets: in7, TopKeys: []KeyEstimate{known("ap1", 30_000)}, Samples: samples("ap7", "ap8")},
			pool: []PooledKey{{Key: []byte("ap7"), Weight: 30_000, Known: true}}, reason: ReasonPlanned, key: "ap1\x00", left: 6651,
			points: 1, evidence: EvidenceTopKeys},
		{name: "exact loads are not pooled: earlier columns do not move a cut between them", rules: AllRules,
			row: Row{Buckets: in7, TopKeys: []KeyEstimate{known("ap1", 20_000), known("ap2", 25_000), known("ap3", 15_000)}},
			pool: []PooledKey{{Key: []byte("ap1"), Weight: 5_000, Known: true}, {Key: []byte("ap2"), Weight: 5_000, Known: true},
				{Key: []byte("ap3"), Weight: 50_000, Known: true}},
			reason: ReasonPlanned, key: "ap2", left: 3333, points: 0, evidence: EvidenceTopKeys},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := pooledExplanation(t, tc.rules, tc.row, tc.pool)
			checkInterval(t, x)
			if x.Reason != tc.reason {
				t.Fatalf("reason %v, want %v (%+v)", x.Reason, tc.reason, x)
			}
			if tc.key != "" && (len(x.SplitKeys) != 1 || string(x.SplitKeys[0]) != tc.key) {
				t.Errorf("keys %s, want [%q]", fmtKeys(x.SplitKeys), tc.key)
			}
			if x.LeftShareBP != tc.left || x.SamplePoints != tc.points || x.Evidence != tc.evidence {
				t.Errorf("left %d points %d evidence %v, want %d %d %v", x.LeftShareBP, x.SamplePoints, x.Evidence, tc.left, tc.points, tc.evidence)
			}
			half := x.LeftShareHiBP - x.LeftShareBP
			if tc.evidence == EvidenceBuckets && half != 0 {
				t.Errorf("bucket cut with half width %d", half)
			}
			if tc.halfBelow != 0 && half >= tc.halfBelow {
				t.Errorf("half width %d, want below %d", half, tc.halfBelow)
			}
		})
	}
}

// TestPooledEvidenceNarrowsByRootThree: k columns of the same evidence
// shrink the interval of a cut inside a bucket by about √k.
func TestPooledEvidenceNarrowsByRootThree(t *testing.T) {
	in7 := buckets(16, map[int]uint64{7: 60_000})
	row := Row{Buckets: in7, Samples: manySamples("ap", 32)}
	one := pooledExplanation(t, AllRules, row, nil)
	three := pooledExplanation(t, AllRules, row, pooled(2, 100, keyStrings(manySamples("ap", 32))...))
	h1, h3 := one.LeftShareHiBP-one.LeftShareBP, three.LeftShareHiBP-three.LeftShareBP
	if one.Reason != ReasonPlanned || three.Reason != ReasonPlanned || one.LeftShareBP != three.LeftShareBP {
		t.Fatalf("one column %v %d, three %v %d", one.Reason, one.LeftShareBP, three.Reason, three.LeftShareBP)
	}
	// √3 = 1.732; the integer sd rounds up by a few bp.
	if r := float64(h1) / float64(h3); r < 1.65 || r > 1.8 {
		t.Errorf("half widths %d and %d: ratio %.3f, want about 1.732", h1, h3, r)
	}
}

// TestPoolOfAnotherLoadUnused: after a column whose score differs from
// this one's by more than counting noise explains, the pool describes
// another load and this column's cut rests on this column alone. This
// column: 15000 writes in 60 s, so the difference of two columns' counts
// has sd √(2·4²·15000) = 692.8 weighted operations (a minute's: the score's).
func TestPoolOfAnotherLoadUnused(t *testing.T) {
	row := Row{Buckets: buckets(16, map[int]uint64{7: 60_000}), Samples: samples("ap1", "ap2", "ap3", "ap4", "ap5", "ap6", "ap7", "ap8")}
	pool := pooled(2, 100, "ap1", "ap2", "ap3", "ap4", "ap5", "ap6", "ap7", "ap8")
	const score = 4 * hotWrites
	for _, tc := range []struct {
		last uint64
		want Reason
	}{
		{score, ReasonPlanned},
		{score - 693, ReasonPlanned},
		{score - 694, ReasonCutUncertain},
		{score + 693, ReasonPlanned},
		{score + 694, ReasonCutUncertain},
		{score * 5 / 4, ReasonCutUncertain},
		{0, ReasonCutUncertain},
	} {
		if x := pooledExplanationAfter(t, AllRules, row, pool, tc.last); x.Reason != tc.want {
			t.Errorf("after a column scoring %d (this one %d): %v, want %v", tc.last, score, x.Reason, tc.want)
		}
	}
}

func keyStrings(ws []WeightedKey) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = string(w.Key)
	}
	return out
}

// TestPoolFollowsTheCounter: the pool gathers the counted columns' keys,
// ages them out after PoolColumns−1 columns, and empties when the counter
// resets, after a gap, and without the rule.
func TestPoolFollowsTheCounter(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CandidateWindows = 100 // no plan gets in the way
	c, id := routeUnderTest(t, "a", "b")
	row := func(writes uint64, ks ...string) Row {
		return Row{RouteID: id, Writes: writes, Buckets: buckets(16, map[int]uint64{7: writes * 4}), Samples: samples(ks...)}
	}
	type step struct {
		row   *Row // nil: the route is absent
		gap   bool // the column does not start where the last ended
		rules Rules
		want  string // the pool as age:key…
	}
	r1, r2, r3 := row(hotWrites, "ap1", "ap2"), row(hotWrites, "ap3"), row(hotWrites, "ap2", "ap4")
	// Just above the threshold, and just below it in the hold band: the
	// same load by the scores.
	justHot, band, below := row(12_500, "ap1", "ap2"), row(12_450, "ap5"), row(coldWrites/2, "ap6")
	hotter := row(hotWrites*5/4, "ap9") // a load a quarter higher
	cases := []struct {
		name  string
		steps []step
	}{
		{"hot columns: newest first, two columns kept", []step{
			{row: &r1, want: "0:ap1 0:ap2"},
			{row: &r2, want: "0:ap3 1:ap1 1:ap2"},
			{row: &r3, want: "0:ap2 0:ap4 1:ap3"}}},
		{"a column in the hold band holds the counter and adds its keys", []step{
			{row: &justHot, want: "0:ap1 0:ap2"},
			{row: &band, want: "0:ap5 1:ap1 1:ap2"}}},
		{"a column of another load starts afresh", []step{
			{row: &r1, want: "0:ap1 0:ap2"},
			{row: &hotter, want: "0:ap9"},
			{row: &r2, want: "0:ap3"}}},
		{"a column below the band resets the counter and empties the pool", []step{
			{row: &r1, want: "0:ap1 0:ap2"},
			{row: &below, want: ""},
			{row: &r2, want: "0:ap3"}}},
		{"an absent route is cold", []step{
			{row: &r1, want: "0:ap1 0:ap2"},
			{want: ""}}},
		{"after a gap the earlier columns prove nothing", []step{
			{row: &r1, want: "0:ap1 0:ap2"},
			{row: &r2, gap: true, want: "0:ap3"}}},
		{"without the rule there is no pool", []step{
			{row: &r1, rules: AllRules &^ RulePooledEvidence, want: ""},
			{row: &r2, rules: AllRules &^ RulePooledEvidence, want: ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s *State
			at := t0
			for i, st := range tc.steps {
				if st.gap {
					at += minute
				}
				col := Column{WindowStartMs: at, AtMs: at + minute}
				if st.row != nil {
					r := *st.row
					r.Samples = slices.Clone(r.Samples)
					for j := range r.Samples {
						r.Samples[j].Key = slices.Clone(r.Samples[j].Key)
					}
					col.Rows = []Row{r}
				}
				in := enabledInput(c, cfg)
				in.NowMs = at + minute
				in.Rules = AllRules
				if st.rules != 0 {
					in.Rules = st.rules
				}
				s, _ = Observe(in, s, col)
				if got := poolString(s, id); got != st.want {
					t.Fatalf("column %d: pool %q, want %q", i, got, st.want)
				}
				// The state owns its keys: the column's bytes may be reused.
				for _, k := range col.Rows {
					for _, w := range k.Samples {
						w.Key[0] = 'z'
					}
				}
				if got := poolString(s, id); got != st.want {
					t.Fatalf("column %d: pool %q after the column's keys changed, want %q", i, got, st.want)
				}
				at += minute
			}
		})
	}
}

// TestResetHysteresisEmptiesPools: a SetConfig may change the weights the
// pooled evidence was weighed with.
func TestResetHysteresisEmptiesPools(t *testing.T) {
	cfg := DefaultConfig()
	c, id := routeUnderTest(t, "a", "b")
	in := enabledInput(c, cfg)
	in.Rules = AllRules
	s, _ := Observe(in, nil, column(Row{RouteID: id, Writes: hotWrites, Buckets: buckets(16, map[int]uint64{7: 4 * hotWrites}),
		Samples: samples("ap1")}))
	if poolString(s, id) != "0:ap1" {
		t.Fatalf("pool %q", poolString(s, id))
	}
	if got := poolString(s.ResetHysteresis(), id); got != "" {
		t.Fatalf("pool %q after the reset", got)
	}
}

func poolString(s *State, id uint64) string {
	tr, _ := s.Get(id)
	parts := make([]string, len(tr.Pool))
	for i, p := range tr.Pool {
		parts[i] = fmt.Sprintf("%d:%s", p.Age, p.Key)
	}
	return strings.Join(parts, " ")
}

// TestNextPoolBound: at most MaxPooledKeys keys, the newest column's
// first, each copied.
func TestNextPoolBound(t *testing.T) {
	mk := func(prefix string, n int) []evItem {
		out := make([]evItem, n)
		for i := range out {
			out[i] = evItem{lo: fmt.Appendf(nil, "%s%04d", prefix, i), x: 1, v: 1}
		}
		return out
	}
	prev := nextPool(mk("b", 300), nil)
	if len(prev) != 300 || checkPool(prev) != nil {
		t.Fatalf("%d keys, check %v", len(prev), checkPool(prev))
	}
	next := nextPool(mk("a", 300), prev)
	if len(next) != MaxPooledKeys || next[299].Age != 0 || next[300].Age != 1 || !bytes.Equal(next[300].Key, prev[0].Key) {
		t.Fatalf("%d keys; [299] age %d, [300] %q age %d", len(next), next[299].Age, next[300].Key, next[300].Age)
	}
	if err := checkPool(next); err != nil {
		t.Fatal(err)
	}
	if got := nextPool(mk("c", MaxPooledKeys+10), next); len(got) != MaxPooledKeys || got[len(got)-1].Age != 0 {
		t.Fatalf("a column of more keys than the bound: %d keys, last age %d", len(got), got[len(got)-1].Age)
	}
	if got := nextPool(nil, next); len(got) != 300 || got[0].Age != 1 {
		t.Fatalf("an empty column ages the previous one (%d keys) and drops the older", len(got))
	}
	// Long keys: the byte bound comes first.
	long := make([]evItem, 20)
	for i := range long {
		long[i] = evItem{lo: append(fmt.Appendf(nil, "%02d", i), bytes.Repeat([]byte{'x'}, 2046)...), x: 1}
	}
	got := nextPool(long, nil)
	size := 0
	for _, p := range got {
		size += len(p.Key)
	}
	if len(got) != MaxPooledKeyBytes/2048 || size > MaxPooledKeyBytes || checkPool(got) != nil {
		t.Fatalf("long keys: %d keys, %d bytes, check %v", len(got), size, checkPool(got))
	}
}

// TestRestoredPoolChecked: NewState refuses a pool nextPool would not
// write.
func TestRestoredPoolChecked(t *testing.T) {
	k := func(key string, age uint32) PooledKey { return PooledKey{Key: []byte(key), Weight: 1, Age: age} }
	big := make([]PooledKey, MaxPooledKeys+1)
	for i := range big {
		big[i] = k(fmt.Sprintf("k%04d", i), 0)
	}
	for name, tc := range map[string]struct {
		pool []PooledKey
		want string
	}{
		"ok":                {pool: []PooledKey{k("a", 0), k("b", 0), k("a", 1)}},
		"too old":           {pool: []PooledKey{k("a", PoolColumns-1)}, want: "age"},
		"keys out of order": {pool: []PooledKey{k("b", 0), k("a", 0)}, want: "order"},
		"a key twice":       {pool: []PooledKey{k("a", 0), k("a", 0)}, want: "order"},
		"ages out of order": {pool: []PooledKey{k("a", 1), k("b", 0)}, want: "order"},
		"too many":          {pool: big, want: "above"},
		"too many bytes":    {pool: []PooledKey{k(strings.Repeat("a", MaxPooledKeyBytes), 0), k("b", 0)}, want: "key bytes"},
	} {
		_, err := NewState([]Tracked{{RouteID: 1, Pool: tc.pool}}, 0)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}
