package keyviz

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// t0 is a step-aligned time in ms (2025-01-01T00:00:00Z) to start columns at.
const t0 = 1_735_689_600_000

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newTestSampler(t tb, cfg SamplerConfig) *Sampler {
	t.Helper()
	s, err := NewSampler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCatalog(t tb, splits ...string) *catalog.Catalog {
	t.Helper()
	keys := make([][]byte, len(splits))
	for i, k := range splits {
		keys[i] = []byte(k)
	}
	c, err := catalog.New(keys, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func routesOf(c *catalog.Catalog) []*catalog.RouteDescriptor {
	var rs []*catalog.RouteDescriptor
	c.Ascend(func(r *catalog.RouteDescriptor) bool {
		rs = append(rs, r)
		return true
	})
	return rs
}

func setCatalog(t tb, s *Sampler, c *catalog.Catalog) {
	t.Helper()
	if err := s.SetRoutes(routesOf(c), c.Version()); err != nil {
		t.Fatal(err)
	}
}

func rowOf(col *api.ReportColumn, id uint64) *api.ReportRow {
	for _, r := range col.Rows {
		if r.RouteId == id {
			return r
		}
	}
	return nil
}

// checkColumn verifies what must hold of every closed column: rows sorted by
// route id without duplicates, none empty, bucket counts of the effective
// layout length summing to the weighted total, valid sketch entries.
func checkColumn(t interface{ Fatalf(string, ...any) }, col *api.ReportColumn) {
	if col.StepMs == 0 || col.WindowStartMs%col.StepMs != 0 {
		t.Fatalf("window %d not aligned to step %d", col.WindowStartMs, col.StepMs)
	}
	for i, r := range col.Rows {
		if i > 0 && col.Rows[i-1].RouteId >= r.RouteId {
			t.Fatalf("rows not sorted by route id at %d", i)
		}
		if r.Reads == 0 && r.Writes == 0 && r.ReadBytes == 0 && r.WriteBytes == 0 {
			t.Fatalf("route %d: empty row", r.RouteId)
		}
		if len(r.Buckets) < 1 || len(r.Buckets) > int(col.Buckets) {
			t.Fatalf("route %d: %d buckets for configured %d", r.RouteId, len(r.Buckets), col.Buckets)
		}
		var sum uint64
		for _, b := range r.Buckets {
			sum += b
		}
		if want := r.Reads*uint64(col.ReadWeight) + r.Writes*uint64(col.WriteWeight); sum != want {
			t.Fatalf("route %d: buckets sum to %d, weighted total %d", r.RouteId, sum, want)
		}
		if r.SampleRate < 1 || len(r.TopKeys) > MaxTopK {
			t.Fatalf("route %d: sample rate %d, %d top keys", r.RouteId, r.SampleRate, len(r.TopKeys))
		}
		for _, k := range r.TopKeys {
			if k.Error > k.Count {
				t.Fatalf("route %d: key %q error %d above count %d", r.RouteId, k.Key, k.Error, k.Count)
			}
		}
	}
}

func TestObserveFillsRow(t *testing.T) {
	c := mustCatalog(t, "m")
	s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 4, WriteWeight: 4, ReadWeight: 1}, SampleRate: 1})
	setCatalog(t, s, c)
	left := c.Lookup([]byte("a"))
	type op struct {
		key   string
		write bool
		n     uint64
	}
	ops := []op{{"a", false, 10}, {"a", true, 100}, {"b", false, 0}, {"k", true, 7}, {"a", true, 0}, {"\x00", false, 1}}
	for _, o := range ops {
		s.ObserveSize(left.ID, []byte(o.key), o.write, o.n)
	}
	s.Observe(left.ID+1, []byte("z"), true)

	col := s.CloseColumn(t0)
	checkColumn(t, col)
	if col.WindowStartMs != t0-1000 || col.StepMs != 1000 || col.Buckets != 4 || col.WriteWeight != 4 || col.ReadWeight != 1 {
		t.Fatalf("column header %v", col)
	}
	if len(col.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(col.Rows))
	}
	l := catalog.NewLayout(left.Start, left.End, 4)
	want := &api.ReportRow{RouteId: left.ID, Buckets: make([]uint64, l.K()), SampleRate: 1}
	weights := map[string]uint64{}
	for _, o := range ops {
		w := uint64(1)
		if o.write {
			want.Writes++
			want.WriteBytes += o.n
			w = 4
		} else {
			want.Reads++
			want.ReadBytes += o.n
		}
		want.Buckets[l.Bucket([]byte(o.key))] += w
		weights[o.key] += w
	}
	got := rowOf(col, left.ID)
	if got.Reads != want.Reads || got.Writes != want.Writes || got.ReadBytes != want.ReadBytes ||
		got.WriteBytes != want.WriteBytes || !slices.Equal(got.Buckets, want.Buckets) || got.SampleRate != 1 {
		t.Fatalf("row %v, want %v", got, want)
	}
	// Rate 1 and fewer keys than the capacity: the sketch is exact.
	if got.TopKDegraded || len(got.TopKeys) != len(weights) {
		t.Fatalf("top keys %v (degraded %v), want %d exact", got.TopKeys, got.TopKDegraded, len(weights))
	}
	for _, k := range got.TopKeys {
		if k.Count != weights[string(k.Key)] || k.Error != 0 {
			t.Fatalf("key %q: %d±%d, want %d exact", k.Key, k.Count, k.Error, weights[string(k.Key)])
		}
	}
	right, _ := c.Route(left.ID + 1)
	rb := make([]uint64, catalog.NewLayout(right.Start, right.End, 4).K())
	rb[catalog.NewLayout(right.Start, right.End, 4).Bucket([]byte("z"))] = 4
	if r := rowOf(col, right.ID); r.Writes != 1 || r.Reads != 0 || !slices.Equal(r.Buckets, rb) {
		t.Fatalf("right row %v, want buckets %v", r, rb)
	}

	// The next column starts empty.
	if col := s.CloseColumn(t0 + 1000); len(col.Rows) != 0 || col.WindowStartMs != t0 {
		t.Fatalf("second column %v", col)
	}
}

func TestUnknownRouteAndLongKey(t *testing.T) {
	s := newTestSampler(t, SamplerConfig{SampleRate: 1})
	s.Observe(1, []byte("k"), false) // no table yet
	setCatalog(t, s, mustCatalog(t))
	s.Observe(2, []byte("k"), false)
	long := bytes.Repeat([]byte("x"), catalog.MaxKeyLen+1)
	s.Observe(1, long, true)
	s.Observe(1, []byte("short"), true)
	if st := s.Stats(); st.UnknownRoute != 2 || st.KeyTooLong != 1 {
		t.Fatalf("stats %+v, want 2 unknown, 1 key too long", st)
	}
	col := s.CloseColumn(t0)
	r := rowOf(col, 1)
	if len(col.Rows) != 1 || r.Writes != 2 {
		t.Fatalf("rows %v: the long key's request must still count", col.Rows)
	}
	if len(r.TopKeys) != 1 || string(r.TopKeys[0].Key) != "short" {
		t.Fatalf("top keys %v: the long key must not be fed", r.TopKeys)
	}
}

func TestColumnWindows(t *testing.T) {
	type close struct {
		now        uint64
		stepAfter  uint64 // 0: unchanged
		wantLabel  uint64
		wantStep   uint64
		wantNext   uint64 // start of the column opened
		wantBounds uint64 // NextBoundary after the close
	}
	for _, tc := range []struct {
		name   string
		step   uint64
		closes []close
	}{
		{"on time", 1000, []close{
			{now: t0, wantLabel: t0 - 1000, wantStep: 1000, wantNext: t0, wantBounds: t0 + 1000},
			{now: t0 + 1000, wantLabel: t0, wantStep: 1000, wantNext: t0 + 1000, wantBounds: t0 + 2000},
		}},
		{"first close late", 1000, []close{
			{now: t0 + 350, wantLabel: t0 - 1000, wantStep: 1000, wantNext: t0, wantBounds: t0 + 1000},
		}},
		{"closer slept through windows", 1000, []close{
			{now: t0, wantLabel: t0 - 1000, wantStep: 1000, wantNext: t0, wantBounds: t0 + 1000},
			{now: t0 + 5300, wantLabel: t0, wantStep: 1000, wantNext: t0 + 5000, wantBounds: t0 + 6000},
		}},
		{"shorter step, aligned", 60_000, []close{
			{now: t0, stepAfter: 1000, wantLabel: t0 - 60_000, wantStep: 60_000, wantNext: t0, wantBounds: t0 + 1000},
			{now: t0 + 1000, wantLabel: t0, wantStep: 1000, wantNext: t0 + 1000, wantBounds: t0 + 2000},
		}},
		{"longer step: its window would reuse the label", 1000, []close{
			{now: t0 + 61_000, wantLabel: t0 + 60_000, wantStep: 1000, wantNext: t0 + 61_000, wantBounds: t0 + 62_000},
			{now: t0 + 62_000, stepAfter: 60_000, wantLabel: t0 + 61_000, wantStep: 1000, wantNext: t0 + 120_000, wantBounds: t0 + 180_000},
			{now: t0 + 180_000, wantLabel: t0 + 120_000, wantStep: 60_000, wantNext: t0 + 180_000, wantBounds: t0 + 240_000},
		}},
		{"new step's window holds the label", 1000, []close{
			{now: t0, wantLabel: t0 - 1000, wantStep: 1000, wantNext: t0, wantBounds: t0 + 1000},
			// The 7 s window holding t0+1000 starts at t0-1000: before the
			// label t0. The next column starts at t0+6000 instead.
			{now: t0 + 1000, stepAfter: 7000, wantLabel: t0, wantStep: 1000, wantNext: t0 + 6000, wantBounds: t0 + 13_000},
		}},
		{"new step's window starts after the label", 5000, []close{
			{now: t0, wantLabel: t0 - 5000, wantStep: 5000, wantNext: t0, wantBounds: t0 + 5000},
			// The 3 s window holding t0+5000 is [t0+3000, t0+6000): after
			// the label t0, so the column opened at t0+5000 is labelled
			// t0+3000 and closes at t0+6000.
			{now: t0 + 5000, stepAfter: 3000, wantLabel: t0, wantStep: 5000, wantNext: t0 + 3000, wantBounds: t0 + 6000},
			{now: t0 + 6000, wantLabel: t0 + 3000, wantStep: 3000, wantNext: t0 + 6000, wantBounds: t0 + 9000},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: tc.step}})
			setCatalog(t, s, mustCatalog(t))
			for i, c := range tc.closes {
				if c.stepAfter != 0 {
					if err := s.SetConfig(LoadConfig{StepMs: c.stepAfter, Buckets: DefaultBuckets, WriteWeight: 4, ReadWeight: 1}); err != nil {
						t.Fatal(err)
					}
				}
				s.Observe(1, []byte("k"), false)
				col := s.CloseColumn(c.now)
				checkColumn(t, col)
				if col.WindowStartMs != c.wantLabel || col.StepMs != c.wantStep {
					t.Fatalf("close %d: label %d step %d, want %d step %d", i, col.WindowStartMs-t0, col.StepMs, c.wantLabel-t0, c.wantStep)
				}
				if start, _, _ := s.Window(); start != c.wantNext {
					t.Fatalf("close %d: next column starts at %d, want %d", i, start-t0, c.wantNext-t0)
				}
				if b := s.NextBoundary(c.now); b != c.wantBounds {
					t.Fatalf("close %d: next boundary %d, want %d", i, b-t0, c.wantBounds-t0)
				}
			}
		})
	}
}

func TestNextBoundaryBeforeFirstClose(t *testing.T) {
	s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000}})
	if b := s.NextBoundary(t0 + 1); b != t0+1000 {
		t.Fatalf("boundary %d, want %d", b, t0+1000)
	}
	if b := s.NextBoundary(t0); b != t0+1000 {
		t.Fatalf("boundary at an exact boundary: %d, want the next one %d", b, t0+1000)
	}
}

func TestConfigAdoptedAtNextBoundaryOnly(t *testing.T) {
	c := mustCatalog(t)
	s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 2, WriteWeight: 4, ReadWeight: 1}, SampleRate: 1})
	setCatalog(t, s, c)
	s.Observe(1, []byte("a"), true)
	if err := s.SetConfig(LoadConfig{StepMs: 1000, Buckets: 8, WriteWeight: 3, ReadWeight: 2}); err != nil {
		t.Fatal(err)
	}
	s.Observe(1, []byte("\xf0"), true) // after SetConfig, same column
	s.Observe(1, []byte("b"), false)
	col := s.CloseColumn(t0)
	checkColumn(t, col)
	r := rowOf(col, 1)
	if col.Buckets != 2 || col.WriteWeight != 4 || col.ReadWeight != 1 || len(r.Buckets) != 2 || r.Buckets[0] != 4+1 || r.Buckets[1] != 4 {
		t.Fatalf("open column changed config mid-way: %v", col)
	}
	for _, k := range r.TopKeys {
		if k.Count != map[string]uint64{"a": 4, "\xf0": 4, "b": 1}[string(k.Key)] {
			t.Fatalf("key %q weighted %d with the new weights", k.Key, k.Count)
		}
	}
	s.Observe(1, []byte("a"), true)
	s.Observe(1, []byte("b"), false)
	col = s.CloseColumn(t0 + 1000)
	checkColumn(t, col)
	r = rowOf(col, 1)
	if col.Buckets != 8 || col.WriteWeight != 3 || col.ReadWeight != 2 || len(r.Buckets) != 8 {
		t.Fatalf("next column did not adopt the config: %v", col)
	}
	for _, k := range r.TopKeys {
		if k.Count != map[string]uint64{"a": 3, "b": 2}[string(k.Key)] {
			t.Fatalf("key %q weighted %d, want the new weights", k.Key, k.Count)
		}
	}
}

func TestSetConfigRejects(t *testing.T) {
	s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 4}})
	for _, c := range []LoadConfig{
		{StepMs: 0, Buckets: 4},
		{StepMs: MaxStepMs + 1, Buckets: 4},
		{StepMs: 1000, Buckets: 0},
		{StepMs: 1000, Buckets: maxBuckets + 1},
	} {
		if err := s.SetConfig(c); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("SetConfig(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	setCatalog(t, s, mustCatalog(t))
	s.Observe(1, []byte("k"), false)
	if col := s.CloseColumn(t0); col.Buckets != 4 || col.StepMs != 1000 {
		t.Fatalf("a rejected config was applied: %v", col)
	}
	if _, _, _ = s.Window(); s.CloseColumn(t0+1000).Buckets != 4 {
		t.Fatal("a rejected config was staged")
	}
}

func TestNewSamplerRejects(t *testing.T) {
	for _, cfg := range []SamplerConfig{
		{Load: LoadConfig{StepMs: MaxStepMs + 1}},
		{Load: LoadConfig{Buckets: maxBuckets + 1}},
		{SampleRate: MaxSampleRate + 1},
		{TopK: MaxTopK + 1},
		{TopK: -1},
	} {
		if _, err := NewSampler(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("NewSampler(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

func TestSplitMidColumn(t *testing.T) {
	c := mustCatalog(t)
	s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 4}, SampleRate: 1})
	setCatalog(t, s, c)
	s.Observe(1, []byte("a"), true)
	s.Observe(1, []byte("q"), false)
	c2, kids, err := c.Split(1, []byte("m"), 1)
	if err != nil {
		t.Fatal(err)
	}
	setCatalog(t, s, c2)
	s.Observe(1, []byte("a"), true) // the parent is gone
	s.Observe(kids[0].ID, []byte("a"), true)
	s.Observe(kids[1].ID, []byte("q"), false)
	s.Observe(kids[1].ID, []byte("r"), false)
	if st := s.Stats(); st.UnknownRoute != 1 {
		t.Fatalf("stats %+v: an observation of the removed parent must be dropped", st)
	}
	col := s.CloseColumn(t0)
	checkColumn(t, col)
	if p := rowOf(col, 1); p == nil || p.Writes != 1 || p.Reads != 1 || len(p.TopKeys) != 2 {
		t.Fatalf("parent row %v: its observations before the split belong to the column", p)
	}
	if l := rowOf(col, kids[0].ID); l == nil || l.Writes != 1 {
		t.Fatalf("left child row %v", l)
	}
	if r := rowOf(col, kids[1].ID); r == nil || r.Reads != 2 || len(r.Buckets) != catalog.NewLayout(kids[1].Start, kids[1].End, 4).K() {
		t.Fatalf("right child row %v", r)
	}
	s.Observe(kids[0].ID, []byte("b"), true)
	col = s.CloseColumn(t0 + 1000)
	if len(col.Rows) != 1 || col.Rows[0].RouteId != kids[0].ID {
		t.Fatalf("next column rows %v: the parent must not come back", col.Rows)
	}
}

func TestSetRoutesRejects(t *testing.T) {
	good := routesOf(mustCatalog(t, "m"))
	r := func(id uint64, start, end string) *catalog.RouteDescriptor {
		return &catalog.RouteDescriptor{ID: id, Start: []byte(start), End: []byte(end)}
	}
	for _, tc := range []struct {
		name   string
		routes []*catalog.RouteDescriptor
		want   string
	}{
		{"nil route", []*catalog.RouteDescriptor{good[0], nil}, "route 1 of 2 is nil"},
		{"id 0", []*catalog.RouteDescriptor{r(0, "", "")}, "id 0"},
		{"duplicate id", []*catalog.RouteDescriptor{r(5, "", "m"), r(5, "m", "")}, "route id 5 appears twice"},
		{"start not below end", []*catalog.RouteDescriptor{r(7, "m", "a")}, "route 7: start"},
		{"boundary too long", []*catalog.RouteDescriptor{r(8, strings.Repeat("x", catalog.MaxBoundaryLen+1), "")}, "route 8: boundary longer"},
		{"ids too far apart", []*catalog.RouteDescriptor{r(1, "", "m"), r(1+maxIndexSpan, "m", "")}, "span more than"},
		{"bounds of a known id changed", []*catalog.RouteDescriptor{r(good[0].ID, "", "n"), r(good[1].ID, "n", "")}, "changed bounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSampler(t, SamplerConfig{SampleRate: 1})
			if err := s.SetRoutes(good, 1); err != nil {
				t.Fatal(err)
			}
			err := s.SetRoutes(tc.routes, 2)
			if !errors.Is(err, ErrInvalidRoutes) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalidRoutes naming %q", err, tc.want)
			}
			// Nothing applied: the old table still serves, at the old version.
			if v, _ := s.RoutesVersion(); v != 1 {
				t.Fatalf("version %d after a rejected set", v)
			}
			s.Observe(good[1].ID, []byte("z"), false)
			if st := s.Stats(); st.UnknownRoute != 0 {
				t.Fatalf("old route unknown after a rejected set: %+v", st)
			}
		})
	}
}

func TestSetRoutesNeverGoesBack(t *testing.T) {
	s := newTestSampler(t, SamplerConfig{})
	if v, set := s.RoutesVersion(); set || v != 0 {
		t.Fatalf("fresh sampler: version %d set %v", v, set)
	}
	c := mustCatalog(t, "m")
	if err := s.SetRoutes(routesOf(c), 0); err != nil { // version 0 is accepted as the first table
		t.Fatal(err)
	}
	if err := s.SetRoutes(routesOf(c), 5); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRoutes(routesOf(mustCatalog(t)), 4); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.RoutesVersion(); v != 5 {
		t.Fatalf("version %d, want 5: an older table must be ignored", v)
	}
	s.Observe(2, []byte("z"), false) // route 2 exists at version 5, not in the older table
	if st := s.Stats(); st.UnknownRoute != 0 {
		t.Fatalf("older table applied: %+v", st)
	}
}

// A route removed and added back within one column keeps its counters.
func TestRouteRemovedAndRestoredInColumn(t *testing.T) {
	c := mustCatalog(t, "m")
	rs := routesOf(c)
	s := newTestSampler(t, SamplerConfig{SampleRate: 1})
	if err := s.SetRoutes(rs, 1); err != nil {
		t.Fatal(err)
	}
	s.Observe(rs[0].ID, []byte("a"), true)
	if err := s.SetRoutes(rs[1:], 2); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRoutes(rs, 3); err != nil {
		t.Fatal(err)
	}
	s.Observe(rs[0].ID, []byte("b"), true)
	col := s.CloseColumn(t0)
	if r := rowOf(col, rs[0].ID); len(col.Rows) != 1 || r.Writes != 2 || len(r.TopKeys) != 2 {
		t.Fatalf("rows %v, want one row with both writes", col.Rows)
	}
}

func TestSamplerSketchBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		topK := rapid.IntRange(1, 8).Draw(t, "topK")
		s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 4, WriteWeight: 4, ReadWeight: 1}, SampleRate: 1, TopK: topK})
		setCatalog(t, s, mustCatalog(t))
		exact := map[string]uint64{}
		var total uint64
		for i := range rapid.IntRange(0, 300).Draw(t, "n") {
			k := fmt.Sprint(rapid.IntRange(0, 20).Draw(t, fmt.Sprint("k", i)))
			w := rapid.Bool().Draw(t, fmt.Sprint("w", i))
			s.Observe(1, []byte(k), w)
			if w {
				exact[k] += 4
				total += 4
			} else {
				exact[k]++
				total++
			}
		}
		col := s.CloseColumn(t0)
		checkColumn(t, col)
		if total == 0 {
			if len(col.Rows) != 0 {
				t.Fatalf("rows without observations")
			}
			return
		}
		present := map[string]bool{}
		for _, k := range col.Rows[0].TopKeys {
			present[string(k.Key)] = true
			if tr := exact[string(k.Key)]; tr > k.Count || tr < k.Count-k.Error {
				t.Fatalf("key %s: true %d outside [%d-%d, %d]", k.Key, tr, k.Count, k.Error, k.Count)
			}
		}
		for k, tr := range exact {
			if tr*uint64(topK) > total && !present[k] {
				t.Fatalf("key %s with %d of %d missing (capacity %d)", k, tr, total, topK)
			}
		}
	})
}

// TestSampleRate checks that about one in SampleRate observations feeds the
// sketch and that a request pattern periodic in the sample rate does not
// alias: round-robin over 16 keys at rate 16 still samples every key. The
// sampling seed is random, so the bounds are 6 standard deviations wide
// (a false failure about once in 10^9 runs).
func TestSampleRate(t *testing.T) {
	s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 1, WriteWeight: 1, ReadWeight: 1}, SampleRate: 16, TopK: 16})
	setCatalog(t, s, mustCatalog(t))
	const n = 64_000
	for i := range n {
		s.Observe(1, fmt.Appendf(nil, "key-%02d", i%16), false)
	}
	r := s.CloseColumn(t0).Rows[0]
	if r.SampleRate != 16 || r.Reads != n {
		t.Fatalf("row %v", r)
	}
	var fed uint64
	for _, k := range r.TopKeys {
		fed += k.Count
		// Each key: n/16 observations sampled at 1/16: mean 250, sd ~15.
		if k.Count < 250-6*16 || k.Count > 250+6*16 {
			t.Fatalf("key %q sampled %d times, want about 250", k.Key, k.Count)
		}
	}
	// Total: mean 4000, sd ~61.
	if len(r.TopKeys) != 16 || fed < 4000-6*62 || fed > 4000+6*62 {
		t.Fatalf("%d keys, %d fed, want 16 keys and about 4000", len(r.TopKeys), fed)
	}
}

type straggler struct {
	e      *routeEntry
	b      *block
	st     *stripeSet // b's stripes when captured, if any
	noBlk  bool       // captured the entry only (as observeSlow does before blockFor)
	key    []byte
	write  bool
	n      uint64
	closes int // closes done when it was captured
}

type tally struct{ reads, writes, bytes uint64 }

// TestExactlyOnceInterleavings is the exactly-once property of the
// sampler with the interleaving under the test's control. An observation is
// split where a real one can be preempted: "capture" loads the route entry
// and its block as Observe does (or only the entry, as the slow path does
// before blockFor), and "commit" runs the rest (observeAt, after blockFor)
// on what was loaded, possibly after closes, config changes and splits in
// between. A captured block's stripes are captured too, and blocks — open,
// closed or dead — are striped at any point (or every block when created).
// Every committed observation must be counted exactly once across the closed
// columns, or dropped as unknown exactly when its route has left the table
// and its block was sealed; each column's bucket counts sum to its weighted
// total.
func TestExactlyOnceInterleavings(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cat := mustCatalog(t, "g", "p")
		s := newTestSampler(t, SamplerConfig{
			Load:       LoadConfig{StepMs: 1000, Buckets: rapid.SampledFrom([]int{1, 4}).Draw(t, "buckets"), WriteWeight: 4, ReadWeight: 1},
			SampleRate: rapid.SampledFrom([]uint32{1, 3}).Draw(t, "rate"),
			TopK:       4,
		})
		s.stripeAll = rapid.Bool().Draw(t, "stripe all")
		setCatalog(t, s, cat)
		want := map[uint64]*tally{}
		var wantDropped uint64
		count := func(id uint64, write bool, n uint64) {
			if want[id] == nil {
				want[id] = &tally{}
			}
			if write {
				want[id].writes++
			} else {
				want[id].reads++
			}
			want[id].bytes += n
		}
		live := func(id uint64) bool { _, ok := cat.Route(id); return ok }
		// An entry dies at a close that changes the bucket count, or at
		// the first close after its route left the table.
		closes := 0
		buckets, pendingBuckets := s.col.cfg.Buckets, 0
		var kChanged []bool           // per close
		removedAt := map[uint64]int{} // route id -> closes done at removal
		dead := func(st straggler) bool {
			if slices.Contains(kChanged[st.closes:], true) {
				return true
			}
			at, ok := removedAt[st.e.id]
			return ok && closes > at
		}
		var pending []straggler
		var cols []*api.ReportColumn
		now := uint64(t0)
		keyGen := rapid.SliceOfN(rapid.SampledFrom([]byte("abgmpqz\x00\xff")), 0, 4)

		commit := func(i int) {
			st := pending[i]
			pending = append(pending[:i], pending[i+1:]...)
			// Counted where it was loaded unless a close sealed that block
			// (or there was none): then only if its route is still live.
			// An entry alone is good until it dies.
			loaded := st.b != nil && st.closes == closes || st.noBlk && !dead(st)
			if loaded || live(st.e.id) {
				count(st.e.id, st.write, st.n)
			} else {
				wantDropped++
			}
			if st.noBlk {
				st.b = s.blockFor(st.e)
			}
			if st.st == nil {
				s.observeAt(st.e, st.b, st.key, st.write, st.n)
			} else if !s.observeStriped(st.e, st.b, st.st, st.e.word(st.key, st.write), st.key, st.write, st.n) {
				s.observeSlow(st.e.id, st.key, st.write, st.n)
			}
		}
		closeCol := func() {
			kChanged = append(kChanged, pendingBuckets != 0 && pendingBuckets != buckets)
			if pendingBuckets != 0 {
				buckets, pendingBuckets = pendingBuckets, 0
			}
			col := s.CloseColumn(now)
			checkColumn(t, col)
			cols = append(cols, col)
			closes++
			now += 1000
		}

		for i := range rapid.IntRange(20, 200).Draw(t, "steps") {
			switch rapid.IntRange(0, 10).Draw(t, fmt.Sprint("op", i)) {
			case 0, 1, 2: // a whole observation
				key := keyGen.Draw(t, "key")
				id := cat.Lookup(key).ID
				if rapid.IntRange(0, 9).Draw(t, "unknown") == 0 {
					id = 1000
				}
				write := rapid.Bool().Draw(t, "write")
				n := rapid.SampledFrom([]uint64{0, 1, 100}).Draw(t, "n")
				s.ObserveSize(id, key, write, n)
				if live(id) {
					count(id, write, n)
				} else {
					wantDropped++
				}
			case 3, 4: // capture
				key := keyGen.Draw(t, "key")
				e := s.table.Load().lookup(cat.Lookup(key).ID)
				st := straggler{e: e, key: key, write: rapid.Bool().Draw(t, "write"),
					n: rapid.SampledFrom([]uint64{0, 7}).Draw(t, "n"), closes: closes}
				if st.noBlk = rapid.Bool().Draw(t, "entry only"); !st.noBlk {
					if st.b = e.blk.Load(); st.b != nil {
						st.st = st.b.hot.Load()
					}
				}
				pending = append(pending, st)
			case 5, 6: // commit
				if len(pending) > 0 {
					commit(rapid.IntRange(0, len(pending)-1).Draw(t, "which"))
				}
			case 7:
				closeCol()
			case 8: // config change, adopted at the next close
				pendingBuckets = rapid.SampledFrom([]int{1, 2, 4, 16}).Draw(t, "buckets")
				err := s.SetConfig(LoadConfig{StepMs: 1000, Buckets: pendingBuckets,
					WriteWeight: uint32(rapid.IntRange(0, 5).Draw(t, "ww")), ReadWeight: uint32(rapid.IntRange(0, 5).Draw(t, "wr"))})
				if err != nil {
					t.Fatal(err)
				}
			case 9: // split the route of a key at that key
				key := keyGen.Draw(t, "key")
				r := cat.Lookup(key)
				if c2, _, err := cat.Split(r.ID, key, 1); err == nil {
					cat = c2
					setCatalog(t, s, cat)
					removedAt[r.ID] = closes
				}
			case 10: // stripe a block: a route's open one, or a straggler's
				if len(pending) > 0 && rapid.Bool().Draw(t, "straggler's") {
					st := pending[rapid.IntRange(0, len(pending)-1).Draw(t, "whose")]
					if st.b != nil {
						s.stripe(st.e, st.b)
					}
				} else if e := s.table.Load().lookup(cat.Lookup(keyGen.Draw(t, "key")).ID); e.blk.Load() != nil {
					s.stripe(e, e.blk.Load())
				}
			}
		}
		for len(pending) > 0 {
			commit(rapid.IntRange(0, len(pending)-1).Draw(t, "which"))
		}
		closeCol()

		got := map[uint64]*tally{}
		for _, col := range cols {
			for _, r := range col.Rows {
				if got[r.RouteId] == nil {
					got[r.RouteId] = &tally{}
				}
				got[r.RouteId].reads += r.Reads
				got[r.RouteId].writes += r.Writes
				got[r.RouteId].bytes += r.ReadBytes + r.WriteBytes
			}
		}
		for id, w := range want {
			if g := got[id]; g == nil || *g != *w {
				t.Fatalf("route %d: counted %+v, want %+v", id, g, *w)
			}
		}
		for id, g := range got {
			if want[id] == nil {
				t.Fatalf("route %d: counted %+v, want nothing", id, *g)
			}
		}
		if st := s.Stats(); st.UnknownRoute != wantDropped {
			t.Fatalf("dropped %d, want %d", st.UnknownRoute, wantDropped)
		}
	})
}

// TestExactlyOnceConcurrent races real observers with a closer that keeps
// closing columns and changing the bucket count: every observation is counted
// exactly once.
func TestExactlyOnceConcurrent(t *testing.T) {
	cat := mustCatalog(t, "d", "k", "r")
	s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 4}, SampleRate: 2, TopK: 8})
	setCatalog(t, s, cat)
	const workers, perWorker = 4, 20_000
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				key := []byte{byte('a' + (i*7+w)%26), byte(i)}
				s.ObserveSize(cat.Lookup(key).ID, key, i%3 == 0, 1)
			}
		})
	}
	var cols []*api.ReportColumn
	closer := make(chan struct{})
	go func() {
		defer close(closer)
		now := uint64(t0)
		for i := 0; ; i++ {
			select {
			case <-done:
				cols = append(cols, s.CloseColumn(now))
				return
			default:
			}
			if i%3 == 0 {
				if err := s.SetConfig(LoadConfig{StepMs: 1000, Buckets: []int{1, 4, 16}[i%9/3], WriteWeight: 4, ReadWeight: 1}); err != nil {
					panic(err)
				}
			}
			cols = append(cols, s.CloseColumn(now))
			now += 1000
		}
	}()
	wg.Wait()
	close(done)
	<-closer
	var ops, byteSum uint64
	for _, col := range cols {
		checkColumn(t, col)
		for _, r := range col.Rows {
			ops += r.Reads + r.Writes
			byteSum += r.ReadBytes + r.WriteBytes
		}
	}
	if ops != workers*perWorker || byteSum != workers*perWorker {
		t.Fatalf("counted %d ops and %d bytes over %d columns, want %d", ops, byteSum, len(cols), workers*perWorker)
	}
	if st := s.Stats(); st.UnknownRoute != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Rows carry the operation sample and the raw counts; the same seed and
// the same observations give the same columns.
func TestSamplerSeedReproducible(t *testing.T) {
	run := func(seed uint64) []*api.ReportColumn {
		c := mustCatalog(t, "m")
		s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 16, WriteWeight: 4, ReadWeight: 1}, Seed: seed})
		setCatalog(t, s, c)
		var out []*api.ReportColumn
		for col := range 3 {
			for i := range 5000 {
				s.Observe(1, []byte(fmt.Sprintf("a%04d", (i*7919)%1000)), i%3 == 0)
			}
			out = append(out, s.CloseColumn(t0+uint64(col)*1000))
		}
		return out
	}
	a, b := run(42), run(42)
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("column %d differs between two runs of seed 42", i)
		}
	}
	r := rowOf(a[1], 1)
	if len(r.Samples) == 0 || len(r.TopKeys) == 0 {
		t.Fatalf("row without samples or top keys: %v", r)
	}
	var ops uint32
	for _, s := range r.Samples {
		ops += s.Reads + s.Writes
	}
	if ops != ReservoirSize {
		t.Fatalf("%d sampled operations, want %d", ops, ReservoirSize)
	}
	if c := run(43); proto.Equal(a[1], c[1]) {
		t.Fatal("another seed sampled the same")
	}
}

// A scheduled step change takes effect with the first column at or after
// its boundary: the column before it keeps the old step; windows stay
// aligned and increasing, even for a closer that is late.
func TestCloseColumnAdoptsScheduledStep(t *testing.T) {
	const at = t0 + 6000 // a multiple of 1000 and 3000
	for _, late := range []uint64{0, 1700} {
		c := mustCatalog(t)
		s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 1, WriteWeight: 4, ReadWeight: 1}, SampleRate: 1})
		setCatalog(t, s, c)
		s.CloseColumn(t0) // opens [t0, t0+1000)
		if err := s.SetConfig(LoadConfig{StepMs: 1000, Buckets: 1, WriteWeight: 4, ReadWeight: 1, NextStepMs: 3000, NextStepAtMs: at}); err != nil {
			t.Fatal(err)
		}
		var labels, steps []uint64
		for now := uint64(t0 + 1000); now <= at+6000; {
			s.Observe(1, []byte("k"), true)
			col := s.CloseColumn(now + late)
			checkColumn(t, col)
			labels = append(labels, col.WindowStartMs)
			steps = append(steps, col.StepMs)
			start, step, _ := s.Window()
			now = start + step
		}
		for i := range labels {
			if i > 0 && labels[i] <= labels[i-1] {
				t.Fatalf("late %d: labels %v not increasing", late, labels)
			}
			if want := uint64(1000); labels[i] >= at {
				want = 3000
				if steps[i] != want {
					t.Fatalf("late %d: window %d has step %d, want %d (labels %v steps %v)", late, labels[i], steps[i], want, labels, steps)
				}
			} else if steps[i] != want {
				t.Fatalf("late %d: window %d before the boundary has step %d", late, labels[i], steps[i])
			}
		}
		if i := slices.Index(labels, at); late == 0 && (i < 0 || steps[i] != 3000) {
			t.Fatalf("the first column of the new step is not at the boundary: labels %v steps %v", labels, steps)
		}
	}
}
